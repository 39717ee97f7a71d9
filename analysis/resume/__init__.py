"""Resume semantics: the six contract properties as checkers, its tables, the LangGraph findings (arXiv 2608.03836)."""
