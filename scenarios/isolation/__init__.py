"""Semantic isolation scenarios: deployment schedules and anomaly witnesses (TOML beside loader.py)."""
