"""The agent family (issue 15): one LangGraph agent meeting all three failure modes; its judgement and tables."""
