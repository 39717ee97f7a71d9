"""Semantic isolation benchmarks: resolution and merge validation."""
