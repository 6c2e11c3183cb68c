"""L3: many runs summarised as one table: the workload matrix (workload x
engine x isolation level) and the conformance matrix (conformance/)."""
