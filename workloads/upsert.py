"""`upsert`: MERGEs of small source batches into a keyed table.

Each write is one MERGE over a few distinct keys drawn from a small key
space, starting from an empty table, so both branches run::

    MERGE INTO t USING <batch> s ON t.k = s.k
    WHEN MATCHED THEN UPDATE SET id = s.id, v = s.v, prev_writer = t.writer, writer = '<op id>'
    WHEN NOT MATCHED THEN INSERT (id, k, v, writer, prev_writer) VALUES (s.id, s.k, s.v, '<op id>', NULL)

A matched row records the version it replaced (`prev_writer`); an inserted
one records none, and the op's invocation names its source keys
(`read_keys`): a MERGE reads the keys of its source, so an insert read the
key absent. The serializability checker recovers every MERGE's reads from
that; `unique-key` finds the other face of the same anomaly, two concurrent
MERGEs that both inserted an absent key (spec M3).
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

KEYS = 10
MAX_BATCH = 3
READ_FRACTION = 0.25


class UpsertWorkload(Workload):
    name = "upsert"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "serializability", "unique-key")
    primitives = {"merge": "merge", "read": "read"}
    row_key = "k"
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
        if gen.rng.random() < READ_FRACTION:
            return self.read_op(gen, op_id)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        # Distinct keys: a target row matched by two source rows is an error.
        keys = sorted(gen.rng.sample(range(KEYS), gen.rng.randint(1, MAX_BATCH)))
        ids = [row_id(slot + 1, gen.seq, j) for j in range(len(keys))]
        return OpSpec("merge", op_id, {"ids": ids, "read_keys": keys, "values": ids})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "merge":
            writer = f"'{op['id']}'"
            res = client.merge(
                [
                    (int(i), int(k), int(v))
                    for i, k, v in zip(value["ids"], value["read_keys"], value["values"], strict=True)
                ],
                ["id", "k", "v"],
                "t.k = s.k",
                {"id": "s.id", "v": "s.v", "prev_writer": "t.writer", "writer": writer},
                {"id": "s.id", "k": "s.k", "v": "s.v", "writer": writer, "prev_writer": "CAST(NULL AS STRING)"},
                op["id"],
            )
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            res = client.read(["id", "k", "writer"], value.get("via", "dataframe"))
            rows = res.value
            res.value = {**value, "ids": sorted(r[0] for r in rows), "rows": sorted([r[1], r[2]] for r in rows)}
            return res
        raise ValueError(f"upsert workload has no op {f!r}")
