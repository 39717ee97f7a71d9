"""Semantic isolation: its anomaly checkers and tables (SemIso paper, arXiv 2608.05412)."""
