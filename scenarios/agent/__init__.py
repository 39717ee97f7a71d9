"""The agent family scenarios: the refund agent (loader.py beside its TOML)."""
