"""Pure functions of a run's records and histories: checkers, counting, statistics, tables, the report."""
