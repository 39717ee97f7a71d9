"""Semantic isolation (SemIso paper, arXiv 2608.05412): its experiments and their side effects: the workflow runtime, the Qdrant retrieval workflow, LangGraph threads."""
