"""A workload and a checker of your own, run by `delta-jepsen run`:

    PYTHONPATH=docs/examples delta-jepsen run --workload pairs:PairsWorkload --engine delta-rs

Each write appends a pair of rows in one op (one transaction); reads return
the whole table. Delta's atomicity (spec C6) says no read sees one row of a
pair without the other: `pairs_whole` checks exactly that, beside the
harness's own durability and log checks.
"""

from __future__ import annotations

from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from harness.core.history import OK, History
from harness.core.table import Column, TableSpec, row_id
from harness.deltalog import TransactionLog
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload


class PairsWorkload(Workload):
    name = "pairs"
    # Registered checkers by name, yours as "module:function".
    checkers = ("log-sanity", "durability", "pairs:pairs_whole")
    primitives = {"append": "append", "read": "read"}

    def table(self) -> TableSpec:
        return TableSpec(columns=(Column("id", "BIGINT"), Column("writer", "STRING")), properties=self.properties())

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        if gen.rng.random() < 0.3:
            return OpSpec("read", op_id, {"via": "dataframe"})
        slot = gen.slot if isinstance(gen.slot, int) else 0
        return OpSpec("append", op_id, {"ids": [row_id(slot + 1, gen.seq, j) for j in (0, 1)], "via": "dataframe"})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        if op["f"] == "append":
            return client.append([(i, op["id"]) for i in op["value"]["ids"]], table, "dataframe", op["id"])
        res = client.read(["id", "writer"], "dataframe")
        res.value = {**op["value"], "ids": sorted(r[0] for r in res.value)}
        return res


def pairs_whole(history: History, log: TransactionLog) -> CheckResult:
    """Every ok read holds both rows of a pair or neither."""
    pairs = {i: op.invoke.value["ids"] for op in history.ops() if op.f == "append" for i in op.invoke.value["ids"]}
    reads = [op for op in history.ops() if op.f == "read" and op.type == OK]
    anomalies = []
    for op in reads:
        seen = set(op.value["ids"])
        halves = sorted(i for i in seen if i in pairs and not set(pairs[i]) <= seen)
        if halves:
            anomalies.append(
                Anomaly("partial-op", "C6", f"Read {op.id} saw half of a pair: rows {halves[:10]}.", ops=[op.id])
            )
    if anomalies:
        return CheckResult("pairs-whole", Verdict.INVALID, f"{len(anomalies)} read(s) saw half a pair.", anomalies)
    if not reads:
        return CheckResult("pairs-whole", Verdict.UNKNOWN, "No ok read to judge.")
    return CheckResult("pairs-whole", Verdict.VALID, f"All {len(reads)} ok reads saw whole pairs.")
