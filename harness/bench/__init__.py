"""L3: the benchmarks (`delta-jepsen bench-*`) and the simulators they feed on
(simulate: an in-memory model of concurrent Delta commits; synth_run: a
stored run folder made from it)."""
