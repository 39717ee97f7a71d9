"""Resume semantics benchmarks: claim + ledger overhead, LangGraph guard vs stock savers."""
