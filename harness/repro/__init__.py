"""From an anomaly in a run folder to a minimal, deterministic reproduction
(`delta-jepsen reproduce`): the schedule the anomaly names, its replay with
pinned snapshots, the shrinker, and the standalone script."""
