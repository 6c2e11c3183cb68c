"""`register`: keys with values, overwritten by UPDATEs and read back.

Each write is one UPDATE of one key::

    UPDATE t SET id = <new row id>, v = <unique>, prev_writer = writer,
                 writer = '<op id>' WHERE k = <key>

The right-hand side sees the old row, so the row version itself records
which version the update replaced: the serializability checker recovers
what every write read from the data alone and finds lost updates (G-single)
and other cycles. Reads return the whole (small) table; every row version has
a unique id, so read validity compares them with the versions in the log.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

KEYS = 8
READ_FRACTION = 0.3
SETUP_SLOT = 0  # row ids of the initial load; client slots use 1..


class RegisterWorkload(Workload):
    name = "register"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "serializability")
    primitives = {"load": "append", "write": "update", "read": "read"}

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

    def setup_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        op_id = gen.next_id()
        return [
            OpSpec(
                "load",
                op_id,
                {"ids": [row_id(SETUP_SLOT, gen.seq, k) for k in range(KEYS)], "keys": list(range(KEYS)), "via": "sql"},
            )
        ]

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        if gen.rng.random() < READ_FRACTION:
            return self.read_op(gen, op_id)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        rid = row_id(slot + 1, gen.seq, 0)
        return OpSpec("write", op_id, {"key": gen.rng.randrange(KEYS), "ids": [rid], "value": rid})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value = op["value"]
        f = op["f"]
        if f == "load":
            rows = [(i, k, 0, op["id"], None) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "write":
            res = client.update(
                f"k = {int(value['key'])}",
                {
                    "id": str(int(value["ids"][0])),
                    "v": str(int(value["value"])),
                    "prev_writer": "writer",
                    "writer": f"'{op['id']}'",
                },
                op["id"],
            )
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            res = client.read(["id", "k", "writer"], value.get("via", "dataframe"))
            rows = res.value
            res.value = {**value, "ids": sorted(r[0] for r in rows), "reads": sorted([r[1], r[2]] for r in rows)}
            return res
        raise ValueError(f"register workload has no op {f!r}")
