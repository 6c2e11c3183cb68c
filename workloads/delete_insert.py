"""`delete-insert`: spec C16 at scale. DELETEs over key ranges, and some
with no predicate at all (C16's own example, which engines may treat apart
from a range), run concurrently with blind INSERTs into those ranges.

Under Serializable a DELETE that read the table before a concurrent INSERT
into its range committed must fail; under WriteSerializable it may commit
(the inserted rows survive, as if the INSERT ran after it), which the
serializability checker reports as a permitted reordering. Each DELETE's
range is recorded as its predicate; the read version comes from the log.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

KEY_SPACE = 64
MAX_RANGE = 16
MAX_BATCH = 3
DELETE_FRACTION = 0.3
DELETE_ALL_FRACTION = 0.2  # of the DELETEs: no WHERE clause
READ_FRACTION = 0.15


class DeleteInsertWorkload(Workload):
    name = "delete-insert"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "serializability")
    primitives = {"insert": "append", "delete": "delete", "read": "read"}
    # Many rows share a k: a row is its id; DELETE ranges are over k.
    row_key = "id"
    predicate_column = "k"

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("k", "BIGINT"),
                Column("writer", "STRING"),
                Column("prev_writer", "STRING"),
            ),
            properties=self.properties(),
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        r = gen.rng.random()
        if r < READ_FRACTION:
            return self.read_op(gen, op_id)
        if r < READ_FRACTION + DELETE_FRACTION:
            if gen.rng.random() < DELETE_ALL_FRACTION:
                # The predicate the checkers read is the whole key space; the
                # engine gets no WHERE clause.
                return OpSpec("delete", op_id, {"predicate": [0, KEY_SPACE - 1], "where": "none"})
            lo = gen.rng.randrange(KEY_SPACE)
            return OpSpec("delete", op_id, {"predicate": [lo, min(KEY_SPACE - 1, lo + gen.rng.randrange(MAX_RANGE))]})
        slot = gen.slot if isinstance(gen.slot, int) else 0
        n = gen.rng.randint(1, MAX_BATCH)
        return OpSpec(
            "insert",
            op_id,
            {
                "ids": [row_id(slot + 1, gen.seq, j) for j in range(n)],
                "keys": [gen.rng.randrange(KEY_SPACE) for _ in range(n)],
                "via": gen.rng.choice(VIAS),
            },
        )

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "insert":
            rows = [(i, k, op["id"], None) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "delete":
            lo, hi = (int(x) for x in value["predicate"])
            where = None if value.get("where") == "none" else f"k >= {lo} AND k <= {hi}"
            res = client.delete(where, op["id"])
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            return self.read_ids(client, value)
        raise ValueError(f"delete-insert workload has no op {f!r}")
