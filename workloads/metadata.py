"""`metadata`: data writes racing metadata changes, spec C17 / E4.

Writers append fresh rows and UPDATE a few keyed rows (register-style, so the
serializability checker sees read-modify-writes); other ops change the
table's metadata:

- ``set-property``: ``ALTER TABLE t SET TBLPROPERTIES ('dj.prop.<slot>_<seq>'
  = '<op id>')``, a key of its own per op, so the final metadata shows every
  acknowledged change;
- ``add-column``: ``ALTER TABLE t ADD COLUMNS (c_<slot>_<seq> STRING)``, a
  fresh nullable column each time.

Writers keep writing the table's original columns: an INSERT that names its
columns leaves the added ones NULL (Spark), and the delta-rs client fills
them with NULL itself (it rejects an append lacking a column). Every write
records the snapshot version it read where the engine tells
(``read_version``), because delta-rs writes no readVersion into commitInfo
and C17 is judged on it.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator
from workloads.register import KEYS, RegisterWorkload

MAX_BATCH = 3
# Fractions of ops; the rest are appends.
READ_FRACTION = 0.2
UPDATE_FRACTION = 0.25
SET_PROPERTY_FRACTION = 0.1
ADD_COLUMN_FRACTION = 0.1
PROPERTY_PREFIX = "dj.prop."
COLUMN_PREFIX = "c_"


def property_key(op_id: str) -> str:
    return PROPERTY_PREFIX + op_id.replace(".", "_")


def column_name(op_id: str) -> str:
    return COLUMN_PREFIX + op_id.replace(".", "_")


class MetadataWorkload(RegisterWorkload):
    """Register's table and initial load, plus appends and metadata changes."""

    name = "metadata"
    checkers = (
        "log-sanity",
        "durability",
        "atomicity",
        "duplicates",
        "read-validity",
        "serializability",
        "metadata-conflicts",
    )
    primitives = {
        "load": "append",
        "append": "append",
        "write": "update",
        "read": "read",
        "set-property": "set-properties",
        "add-column": "add-columns",
    }

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        slot = gen.slot if isinstance(gen.slot, int) else 0
        r = gen.rng.random()
        if r < READ_FRACTION:
            return self.read_op(gen, op_id)
        r -= READ_FRACTION
        if r < UPDATE_FRACTION:
            rid = row_id(slot + 1, gen.seq, 0)
            return OpSpec("write", op_id, {"key": gen.rng.randrange(KEYS), "ids": [rid], "value": rid})
        r -= UPDATE_FRACTION
        if r < SET_PROPERTY_FRACTION:
            return OpSpec("set-property", op_id, {"properties": {property_key(op_id): op_id}})
        r -= SET_PROPERTY_FRACTION
        if r < ADD_COLUMN_FRACTION:
            return OpSpec("add-column", op_id, {"columns": [[column_name(op_id), "STRING"]]})
        n = gen.rng.randint(1, MAX_BATCH)
        return OpSpec(
            "append", op_id, {"ids": [row_id(slot + 1, gen.seq, j) for j in range(n)], "via": gen.rng.choice(VIAS)}
        )

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f, op_id = op["value"], op["f"], op["id"]
        if f == "read":
            return super().invoke(client, table, op)
        client.last_read_version = None
        if f == "append":
            # k = the row id: a key of its own, outside the UPDATEs' 0..KEYS-1.
            res = client.append([(i, i, i, op_id, None) for i in value["ids"]], table, value["via"], op_id)
        elif f == "set-property":
            res = client.set_properties(dict(value["properties"]), op_id)
        elif f == "add-column":
            res = client.add_columns([Column(n, t) for n, t in value["columns"]], op_id)
        else:  # the initial load and the UPDATEs: register's
            res = super().invoke(client, table, op)
        res.value = {**value, **(res.value or {}), "read_version": client.last_read_version}
        return res
