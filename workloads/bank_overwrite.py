"""`bank-overwrite`: the bank, each transfer a read of the whole table and
an overwrite of it, as one transaction.

What a user of a Delta engine without UPDATE writes (deltalake before 0.12
has only appends and overwrites): read every account, move the amount
between two of them in memory, and overwrite the table with the result,
committed from the snapshot that was read. Delta's conflict check must then
fail one of two concurrent transfers (both remove the same files: spec C14,
E2); an engine that commits both keeps both writers' copies of every
account, and the bank checker sees the total change.

Rows untouched by a transfer are written back with their id and writer, so
the checkers see each transfer as an update of two rows, as in `bank`.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import TableSpec
from harness.engines.base import EngineClient, OpResult
from workloads.bank import BankWorkload

COLUMNS = ["id", "k", "balance", "writer", "prev_writer"]


def transfer(rows: list[tuple], a: int, b: int, x: int, ids: tuple[int, int], op_id: str) -> list[tuple]:
    """The table after moving `x` from account `a` to `b`: the same as the
    bank's UPDATE does to the rows it matches."""
    out = []
    for rid, k, balance, writer, prev in rows:
        if k == a:
            out.append((ids[0], k, balance - x, op_id, writer))
        elif k == b:
            out.append((ids[1], k, balance + x, op_id, writer))
        else:
            out.append((rid, k, balance, writer, prev))
    return out


class BankOverwriteWorkload(BankWorkload):
    name = "bank-overwrite"
    primitives = {"load": "append", "transfer": "overwrite", "read": "read"}

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        if op["f"] != "transfer":
            return super().invoke(client, table, op)
        value = op["value"]
        a, b, x = int(value["from"]), int(value["to"]), int(value["amount"])
        ids = (int(value["ids"][0]), int(value["ids"][1]))

        def apply(rows: list[tuple]) -> tuple[list[tuple], dict[str, Any]]:
            return transfer(rows, a, b, x, ids, op["id"]), {"updated": sum(1 for r in rows if r[1] in (a, b))}

        res = client.overwrite(COLUMNS, apply, table, op["id"])
        res.value = {**value, **(res.value or {})}
        return res
