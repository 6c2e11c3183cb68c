"""`bank`: accounts whose total must never change.

Each transfer is one transaction, an UPDATE of two rows::

    UPDATE t SET balance = CASE WHEN k = <from> THEN balance - <x> ELSE balance + <x> END,
                 id = CASE WHEN k = <from> THEN <id1> ELSE <id2> END,
                 prev_writer = writer, writer = '<op id>'
    WHERE k IN (<from>, <to>)

Reads return every balance. The bank checker demands the total be conserved
at every version of the log and in every read; the serializability checker
sees each transfer as a read-modify-write of two rows.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

ACCOUNTS = 8
INITIAL_BALANCE = 100
MAX_TRANSFER = 5
READ_FRACTION = 0.3


class BankWorkload(Workload):
    name = "bank"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "serializability", "bank")
    primitives = {"load": "append", "transfer": "update", "read": "read"}

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("k", "BIGINT"),
                Column("balance", "BIGINT"),
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
                {
                    "ids": [row_id(0, gen.seq, k) for k in range(ACCOUNTS)],
                    "keys": list(range(ACCOUNTS)),
                    "balance": INITIAL_BALANCE,
                    "total": ACCOUNTS * INITIAL_BALANCE,
                    "via": "sql",
                },
            )
        ]

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        if gen.rng.random() < READ_FRACTION:
            return self.read_op(gen, op_id)
        a, b = gen.rng.sample(range(ACCOUNTS), 2)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        return OpSpec(
            "transfer",
            op_id,
            {
                "from": a,
                "to": b,
                "amount": gen.rng.randint(1, MAX_TRANSFER),
                "ids": [row_id(slot + 1, gen.seq, 0), row_id(slot + 1, gen.seq, 1)],
            },
        )

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "load":
            rows = [(i, k, value["balance"], op["id"], None) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "transfer":
            a, b, x = int(value["from"]), int(value["to"]), int(value["amount"])
            id1, id2 = (int(i) for i in value["ids"])
            res = client.update(
                f"k IN ({a}, {b})",
                {
                    "balance": f"CASE WHEN k = {a} THEN balance - {x} ELSE balance + {x} END",
                    "id": f"CASE WHEN k = {a} THEN {id1} ELSE {id2} END",
                    "prev_writer": "writer",
                    "writer": f"'{op['id']}'",
                },
                op["id"],
            )
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            res = client.read(["id", "k", "balance"], value.get("via", "dataframe"))
            rows = res.value
            res.value = {**value, "ids": sorted(r[0] for r in rows), "balances": sorted([r[1], r[2]] for r in rows)}
            return res
        raise ValueError(f"bank workload has no op {f!r}")
