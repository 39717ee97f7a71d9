"""Semantic isolation faults: contract omission."""
