"""Decision revalidation (ATR paper, arXiv 2609.08015): its experiments and their side effects: the agent, business stores, race actors."""
