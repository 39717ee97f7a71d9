"""Resume semantics scenarios: graphs, fault-matrix cells, fault switches, the concurrency grid (TOML beside loader.py)."""
