"""`partitioned`: spec P1/P2 on a table partitioned by (day, country).

Six partitions (3 days x 2 countries). Each partition owns a range of row ids
(``id // PARTITION_STRIDE`` is the partition's index), so a condition on ids
alone can name rows of exactly one partition. UPDATEs, DELETEs and MERGEs
each change one partition, in two variants recorded in the invoke value:

- ``"variant": "literal"``: the condition carries literal partition
  predicates (``day = '2024-01-01' AND country = 'pt' AND id % 5 = 2``; a
  MERGE adds ``t.day = '<d>' AND t.country = '<c>'`` to its ON condition).
  Spec P1/P2: two such ops on different partitions must not conflict.
- ``"variant": "no-literal"``: the same change, named without the partition
  columns (an id range inside the partition; a MERGE joins only on the
  partition columns and the key). The engine may scan every partition and
  conflict (spec P2): counted, not flagged.

Blind appends go into one partition each; reads return the whole table.
Rows carry ``writer``/``prev_writer``, so the serializability checker
recovers every transaction, and the partition-conflicts checker reports the
conflict rate per variant and flags P1 deviations.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
COUNTRIES = ("pt", "de")
PARTITIONS: tuple[tuple[str, str], ...] = tuple((d, c) for d in DAYS for c in COUNTRIES)
# id // PARTITION_STRIDE is the partition index; row_id() stays far below it.
PARTITION_STRIDE = 10**15
SETUP_ROWS = 10  # rows loaded into every partition before the run
SETUP_SLOT = 0  # row ids of the initial load; client slots use 1..
VARIANTS = ("literal", "no-literal")
UPDATE_MOD = 5  # an UPDATE changes the rows with id % 5 = r of one partition
DELETE_MOD = 10  # a DELETE removes fewer: id % 10 = r
MAX_BATCH = 3

# Cumulative op mix.
_MIX = (("read", 0.15), ("append", 0.40), ("update", 0.60), ("delete", 0.75), ("merge", 1.0))


def partition_of(row: int) -> int:
    return int(row) // PARTITION_STRIDE


def partition_id(p: int, base: int) -> int:
    return p * PARTITION_STRIDE + base


def setup_id(p: int, j: int) -> int:
    """Row j of partition p's initial load; client rows use slots 1.. (row_id)."""
    return partition_id(p, row_id(SETUP_SLOT, 0, j))


def literal_predicate(day: str, country: str, alias: str = "") -> str:
    a = f"{alias}." if alias else ""
    return f"{a}day = '{day}' AND {a}country = '{country}'"


def id_range_predicate(p: int) -> str:
    return f"id >= {p * PARTITION_STRIDE} AND id < {(p + 1) * PARTITION_STRIDE}"


class PartitionedWorkload(Workload):
    name = "partitioned"
    checkers = (
        "log-sanity",
        "durability",
        "atomicity",
        "duplicates",
        "read-validity",
        "serializability",
        "partition-conflicts",
    )
    primitives = {
        "load": "append",
        "append": "append",
        "update": "update",
        "delete": "delete",
        "merge": "merge",
        "read": "read",
    }
    row_key = "id"
    predicate_column = "id"

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("day", "STRING"),
                Column("country", "STRING"),
                Column("v", "BIGINT"),
                Column("writer", "STRING"),
                Column("prev_writer", "STRING"),
            ),
            partition_by=("day", "country"),
            properties=self.properties(),
        )

    def setup_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        op_id = gen.next_id()
        ids = [setup_id(p, j) for p in range(len(PARTITIONS)) for j in range(SETUP_ROWS)]
        return [OpSpec("load", op_id, {"ids": ids, "partition": "all", "via": "sql"})]

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        f = gen.pick(_MIX)
        if f == "read":
            return self.read_op(gen, op_id)
        p = rng.randrange(len(PARTITIONS))
        slot = gen.slot if isinstance(gen.slot, int) else 0
        value: dict[str, Any] = {"partition": list(PARTITIONS[p])}
        if f == "append":
            n = rng.randint(1, MAX_BATCH)
            value.update(ids=[partition_id(p, row_id(slot + 1, gen.seq, j)) for j in range(n)], via=rng.choice(VIAS))
            return OpSpec("append", op_id, value)
        value["variant"] = rng.choice(VARIANTS)
        if f == "update":
            value.update(mod=UPDATE_MOD, rem=rng.randrange(UPDATE_MOD), value=row_id(slot + 1, gen.seq, 0))
        elif f == "delete":
            value.update(mod=DELETE_MOD, rem=rng.randrange(DELETE_MOD))
        else:
            # Some rows of the initial load (matched unless deleted meanwhile)
            # and one fresh row (never matched): every source row ends up
            # written by this op, as an update or an insert.
            old = [setup_id(p, j) for j in rng.sample(range(SETUP_ROWS), 2)]
            value.update(ids=[*old, partition_id(p, row_id(slot + 1, gen.seq, 0))], value=row_id(slot + 1, gen.seq, 0))
        return OpSpec(f, op_id, value)

    def _where(self, value: dict[str, Any]) -> str:
        day, country = value["partition"]
        p = PARTITIONS.index((day, country))
        scope = literal_predicate(day, country) if value["variant"] == "literal" else id_range_predicate(p)
        return f"{scope} AND id % {int(value['mod'])} = {int(value['rem'])}"

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f in ("load", "append"):
            rows = [(i, *PARTITIONS[partition_of(i)], 0, op["id"], None) for i in value["ids"]]
            return client.append(rows, table, value["via"], op["id"])
        if f == "update":
            res = client.update(
                self._where(value),
                {"v": str(int(value["value"])), "prev_writer": "writer", "writer": f"'{op['id']}'"},
                op["id"],
            )
        elif f == "delete":
            res = client.delete(self._where(value), op["id"])
        elif f == "merge":
            day, country = value["partition"]
            on = "s.day = t.day AND s.country = t.country AND s.id = t.id"
            if value["variant"] == "literal":
                on += f" AND {literal_predicate(day, country, 't')}"
            cols = table.column_names()
            rows = [(i, day, country, int(value["value"]), op["id"], None) for i in value["ids"]]
            res = client.merge(
                rows,
                cols,
                on,
                {"v": "s.v", "prev_writer": "t.writer", "writer": "s.writer"},
                {c: f"s.{c}" for c in cols},
                op["id"],
            )
        elif f == "read":
            res = client.read(["id", "writer"], value.get("via", "dataframe"))
            res.value = {**value, "ids": sorted(r[0] for r in res.value)}
            return res
        else:
            raise ValueError(f"partitioned workload has no op {f!r}")
        res.value = {**value, **(res.value or {})}
        return res
