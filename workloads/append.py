"""`append`: a set workload. Blind appends of small batches of unique rows,
interleaved with whole-table reads; a final read after quiescence.

Every row carries its writer's op id, so each row in the table traces back to
exactly one op (Elle's recoverability) and the checkers can tell which op's
rows are missing, partial or duplicated.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

MAX_BATCH = 5
READ_FRACTION = 0.2


class AppendWorkload(Workload):
    name = "append"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "serializability")
    primitives = {"append": "append", "read": "read"}

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(Column("id", "BIGINT"), Column("writer", "STRING")),
            properties=self.properties(),
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        via = gen.rng.choice(VIAS)
        if gen.rng.random() < READ_FRACTION:
            return OpSpec("read", op_id, {"via": via})
        n = gen.rng.randint(1, MAX_BATCH)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        ids = [row_id(slot + 1, gen.seq, j) for j in range(n)]
        return OpSpec("append", op_id, {"ids": ids, "via": via})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value = op["value"]
        if op["f"] == "append":
            rows = [(i, op["id"]) for i in value["ids"]]
            return client.append(rows, table, value["via"], op["id"])
        if op["f"] == "read":
            res = client.read(["id", "writer"], value.get("via", "dataframe"))
            rows = res.value
            # Record ids only, sorted: reads of a growing table dominate the
            # history's size; writers are recoverable from the log.
            res.value = {**value, "ids": sorted(r[0] for r in rows)}
            return res
        raise ValueError(f"append workload has no op {op['f']!r}")
