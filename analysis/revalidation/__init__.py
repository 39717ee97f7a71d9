"""Decision revalidation: its checkers, counting rules and tables (ATR paper, arXiv 2609.08015)."""
