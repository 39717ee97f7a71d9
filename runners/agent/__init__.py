"""The agent family's runners: the LangGraph refund agent, its stores, its real processes, its experiments."""
