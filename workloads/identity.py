"""`identity`: concurrent INSERTs into a table with an identity column (spec C19).

The table's `uid` column is `GENERATED ALWAYS AS IDENTITY`: the engine
picks each row's value from the high water mark the table's metadata keeps,
and every INSERT that generates values moves that mark, so it changes the
table's metadata. Writers insert rows (1-3 per op) without a `uid`, now and
then delete the rows of one `k`, and read. Each row still carries the
harness's own `id` and its writer's op id, so the usual checks (durability,
atomicity, duplicates, reads) apply as in the other workloads.

The `identity` checker then holds the engine to C19: no two transactions
that generate identity values both commit if they ran concurrently, and
the values stay unique at every version. Engines that cannot declare an
identity column report the run `unsupported` at create-table.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

KEY_SPACE = 8
MAX_BATCH = 3
IDENTITY_COLUMN = "uid"

# Cumulative op mix.
_MIX = (("insert", 0.70), ("delete", 0.80), ("read", 1.0))


class IdentityWorkload(Workload):
    name = "identity"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "identity")
    primitives = {"insert": "append", "delete": "delete", "read": "read"}
    row_key = "id"
    predicate_column = "k"

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column(IDENTITY_COLUMN, "BIGINT"),
                Column("id", "BIGINT"),
                Column("k", "BIGINT"),
                Column("writer", "STRING"),
            ),
            properties=self.properties(),
            identity=IDENTITY_COLUMN,
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        f = gen.pick(_MIX)
        if f == "read":
            return self.read_op(gen, op_id)
        if f == "delete":
            return OpSpec("delete", op_id, {"key": rng.randrange(KEY_SPACE)})
        slot = gen.slot if isinstance(gen.slot, int) else 0
        n = rng.randint(1, MAX_BATCH)
        return OpSpec(
            "insert",
            op_id,
            {
                "ids": [row_id(slot + 1, gen.seq, j) for j in range(n)],
                "keys": [rng.randrange(KEY_SPACE) for _ in range(n)],
                "via": rng.choice(VIAS),
            },
        )

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "insert":
            rows = [(i, k, op["id"]) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "delete":
            res = client.delete(f"k = {int(value['key'])}", op["id"])
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            return self.read_ids(client, value)
        raise ValueError(f"identity workload has no op {f!r}")
