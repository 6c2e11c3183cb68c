"""Warm a fresh delta-spark JVM before a run starts.

A new Spark Connect server takes 5-10 s over each of its first writes and
reads (class loading, JIT, query-plan codegen), then 0.2-0.5 s. Left cold,
a short run measures the JVM's start-up rather than the engine, and its
first ops hit the op timeout. So each node runs the ops the workloads use
once, against a scratch table in its own work directory (never the table
under test), before the run's clock starts.

Run in its own process (the controller never loads an engine library):
``python -m harness.engines.warmup sc://127.0.0.1:PORT /path/to/scratch [OP,OP,...]``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from harness.core.table import Column, TableSpec
from harness.engines.base import ClientConfig
from harness.engines.deltaspark import DELTA_SPARK_CAPABILITIES
from harness.engines.spark import DeltaSparkClient

# One round: the first pass over each op pays the start-up; a second pass
# measured within 10-20% of later ones.
ROUNDS = 1
TABLE = TableSpec(
    (Column("id", "BIGINT"), Column("p", "STRING"), Column("v", "BIGINT"), Column("writer", "STRING")),
    partition_by=("p",),
)


# Warmed whatever the run calls: the table's creation, a write and a read
# (every run has its setup and final reads). The rest only for a run whose
# workload calls them: each costs a second or two of a cold JVM.
OPTIONAL = ("update", "merge", "delete")


def warm(url: str, scratch: str, ops: frozenset[str] | None = None) -> list[tuple[str, float]]:
    """`ops`: the run's primitives (None: warm every op below)."""
    client = DeltaSparkClient(
        ClientConfig(engine="delta-spark", node="warmup", process="warmup", table_uri=scratch, url=url, timeout=120.0),
        "delta-spark",
        DELTA_SPARK_CAPABILITIES,
    )
    client.open()
    steps: list[tuple[str, float]] = []

    def step(name: str, fn: Callable[..., object], *args: Any) -> None:
        if name in OPTIONAL and ops is not None and name not in ops:
            return
        t0 = time.monotonic()
        fn(*args)
        steps.append((name, time.monotonic() - t0))

    try:
        cols = TABLE.column_names()
        step("create", client.create_table, TABLE)
        for i in range(ROUNDS):
            step("append-sql", client.append, [(i, "a", 1, "w")], TABLE, "sql", f"w{i}a")
            step("append-df", client.append, [(i + 10, "b", 1, "w")], TABLE, "dataframe", f"w{i}b")
            step("read", client.read, cols)
            step("read-sql", client.read, cols, "sql")
            step("update", client.update, f"id = {i}", {"v": "v + 1"}, f"w{i}u")
            merge_set = {c: f"s.{c}" for c in cols}
            step(
                "merge",
                client.merge,
                [(i, "a", 5, "w")],
                cols,
                "t.id = s.id AND t.p = s.p",
                {"v": "s.v"},
                merge_set,
                f"w{i}m",
            )
            step("delete", client.delete, f"id = {i + 10}", f"w{i}d")
    finally:
        client.close()
    return steps


def main() -> int:
    url, scratch = sys.argv[1], sys.argv[2]
    ops = frozenset(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    t0 = time.monotonic()
    steps = warm(url, scratch, ops)
    print(
        f"warm-up of {url}: {time.monotonic() - t0:.1f} s (" + ", ".join(f"{n} {s:.2f}" for n, s in steps) + ")",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
