"""Semantic isolation figures (SemIso paper): one module per figure."""
