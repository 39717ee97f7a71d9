"""Decision revalidation scenarios: workloads (TOML in workloads/), the rule language, the reference oracle, the seven schedules."""
