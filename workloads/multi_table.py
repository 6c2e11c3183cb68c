"""`multi-table`: two tables, writes to each and to both, and queries that
read both at once (spec C1, C2).

The run's table is `a`; table `b` lives in the folder `b` inside it (Delta
reads only a table's own log and the files it names, so neither sees the
other). Writers append rows to one table, or to both in one op: two
statements, one per table, since a transaction covers one table (C1), so
the second can fail after the first committed. Readers read `a` alone, or
both tables in one query (`UNION ALL`), which sees each table at its latest
version when it reads it and no snapshot across them (C2).

Row ids are unique across both tables; an op's value says which rows it
meant for which table (`ids` for `a` alone, so the usual checks judge `a`;
`ids_a` / `ids_b` otherwise). The `multi-table` checker judges both logs.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

OTHER_TABLE = "b"
MAX_BATCH = 3

# Cumulative op mix.
_MIX = (("append", 0.30), ("append-b", 0.45), ("append-both", 0.65), ("read-both", 0.90), ("read", 1.0))


def other_uri(client: EngineClient) -> str:
    return f"{client.config.table_uri.rstrip('/')}/{OTHER_TABLE}"


class MultiTableWorkload(Workload):
    name = "multi-table"
    checkers = ("log-sanity", "durability", "read-validity", "multi-table")
    primitives = {
        "create-b": "create-table-at",
        "append": "append",
        "append-b": "append",
        "append-both": "append",
        "read": "read",
        "read-both": "read-tables",
    }
    related_tables = (OTHER_TABLE,)
    row_key = "id"
    predicate_column = "id"

    def table(self) -> TableSpec:
        return TableSpec(columns=(Column("id", "BIGINT"), Column("writer", "STRING")), properties=self.properties())

    def setup_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        return [OpSpec("create-b", gen.next_id(), {"table": OTHER_TABLE})]

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        f = gen.pick(_MIX)
        if f == "read":
            return self.read_op(gen, op_id)
        if f == "read-both":
            return OpSpec(f, op_id, {})
        slot = gen.slot if isinstance(gen.slot, int) else 0
        ids = [row_id(slot + 1, gen.seq, j) for j in range(rng.randint(2, 2 * MAX_BATCH))]
        if f == "append":
            return OpSpec(f, op_id, {"ids": ids[:MAX_BATCH], "via": rng.choice(VIAS)})
        if f == "append-b":
            return OpSpec(f, op_id, {"ids_b": ids[:MAX_BATCH]})
        half = len(ids) // 2
        return OpSpec(f, op_id, {"ids_a": ids[:half], "ids_b": ids[half:], "via": rng.choice(VIAS)})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f, op_id = op["value"], op["f"], op["id"]
        if f == "create-b":
            return client.create_table_at(other_uri(client), table, op_id)
        if f == "append":
            return client.append([(i, op_id) for i in value["ids"]], table, value["via"], op_id)
        if f == "append-b":
            # Another table than the session's: by path (the DataFrame API).
            return client.at(other_uri(client)).append([(i, op_id) for i in value["ids_b"]], table, "dataframe", op_id)
        if f == "append-both":
            # Two transactions, a then b (spec C1): b can fail after a committed.
            client.append([(i, op_id) for i in value["ids_a"]], table, value["via"], op_id)
            client.at(other_uri(client)).append([(i, op_id) for i in value["ids_b"]], table, "dataframe", op_id)
            return OpResult(value=value)
        if f == "read":
            return self.read_ids(client, value)
        if f == "read-both":
            res = client.read_tables([client.config.table_uri, other_uri(client)], ["id"])
            rows, versions = res.value["rows"], res.value.get("versions")
            return OpResult(
                value={
                    "a": sorted(r[0] for r in rows[0]),
                    "b": sorted(r[0] for r in rows[1]),
                    "versions": versions,
                }
            )
        raise ValueError(f"multi-table workload has no op {f!r}")
