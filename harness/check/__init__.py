"""L2: checking a run folder, with no engine: load the history and the table's
log, run the workload's checkers, combine and write the verdict."""
