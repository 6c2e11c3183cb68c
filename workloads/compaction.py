"""`compaction`: OPTIMIZE and OPTIMIZE ZORDER BY (k) concurrent with writes.

Blind appends of 1-3 rows each leave many small files; UPDATEs and DELETEs
change the few rows of one `k`; reads return the whole table. Meanwhile
clients run OPTIMIZE (bin-packing) and OPTIMIZE ZORDER BY (k), which must
rewrite files without changing the data (spec M4-M6): the compaction checker
compares, per compaction commit, the row versions it removed from the table
with the ones it added, and flags writes whose removes a concurrent
compaction had already applied (their change is lost, spec M5).

An engine without OPTIMIZE (Sail 0.7) reports the optimize ops unsupported;
they are counted in the history, never passed.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

KEY_SPACE = 16
MAX_BATCH = 3
ZORDER_BY = ["k"]

# Cumulative op mix: mostly small appends, so compactions have files to merge.
_MIX = (
    ("read", 0.10),
    ("append", 0.55),
    ("update", 0.65),
    ("delete", 0.72),
    ("optimize", 0.86),
    ("optimize-zorder", 1.0),
)


class CompactionWorkload(Workload):
    name = "compaction"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "compaction")
    primitives = {
        "append": "append",
        "update": "update",
        "delete": "delete",
        "optimize": "optimize",
        "optimize-zorder": "optimize",
        "read": "read",
    }
    row_key = "id"
    predicate_column = "k"

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("k", "BIGINT"),
                Column("v", "BIGINT"),
                Column("writer", "STRING"),
                Column("prev_writer", "STRING"),
            ),
            properties=self.properties(),
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        f = gen.pick(_MIX)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        if f == "read":
            return self.read_op(gen, op_id)
        if f == "append":
            n = rng.randint(1, MAX_BATCH)
            return OpSpec(
                "append",
                op_id,
                {
                    "ids": [row_id(slot + 1, gen.seq, j) for j in range(n)],
                    "keys": [rng.randrange(KEY_SPACE) for _ in range(n)],
                    "via": rng.choice(VIAS),
                },
            )
        if f == "update":
            return OpSpec("update", op_id, {"key": rng.randrange(KEY_SPACE), "value": row_id(slot + 1, gen.seq, 0)})
        if f == "delete":
            return OpSpec("delete", op_id, {"key": rng.randrange(KEY_SPACE)})
        return OpSpec(f, op_id, {"zorder_by": ZORDER_BY if f == "optimize-zorder" else None})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "append":
            rows = [(i, k, 0, op["id"], None) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "update":
            res = client.update(
                f"k = {int(value['key'])}",
                {"v": str(int(value["value"])), "prev_writer": "writer", "writer": f"'{op['id']}'"},
                op["id"],
            )
        elif f == "delete":
            res = client.delete(f"k = {int(value['key'])}", op["id"])
        elif f in ("optimize", "optimize-zorder"):
            res = client.optimize(op["id"], value.get("zorder_by"))
        elif f == "read":
            return self.read_ids(client, value)
        else:
            raise ValueError(f"compaction workload has no op {f!r}")
        res.value = {**value, **(res.value or {})}
        return res
