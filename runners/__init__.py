"""Every side effect of the lab: the CLI, the engine, executors, experiments, processes, stores and backends."""
