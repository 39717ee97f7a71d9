"""The agent family benchmarks: the stacks' cost per checkpointed step and per resume."""
