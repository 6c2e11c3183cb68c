"""The cells' table and ops, engine-free: what each op writes, and what it
does to the rows when run alone. Backends translate an :class:`OpPlan` into
engine calls; the runner compares a cell's final table with the allowed
serial orders (spec C14: the history order; C15: any order) computed here.

Table: ``id BIGINT, k BIGINT, p STRING, v BIGINT, writer STRING,
prev_writer STRING``, partitioned by ``p`` in the partitioned layouts. Two
setup commits (``setup.1``, ``setup.2``) load ids 1..8, each commit two rows
of partition 'a' and two of 'b', so every partition (and the unpartitioned
table) holds two files and OPTIMIZE has work to do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.core.table import Column, TableSpec
from harness.matrices.conformance import cells as C

COLUMNS = ("id", "k", "p", "v", "writer", "prev_writer")
TYPES = ("BIGINT", "BIGINT", "STRING", "BIGINT", "STRING", "STRING")
APP_ID = "dj-conformance-app"

Row = tuple  # in COLUMNS order


def table_spec(cell: C.Cell) -> TableSpec:
    props = {"delta.isolationLevel": cell.level}
    if cell.dv:
        props["delta.enableDeletionVectors"] = "true"
    return TableSpec(
        columns=tuple(Column(n, t) for n, t in zip(COLUMNS, TYPES, strict=True)),
        partition_by=("p",) if cell.partitioned else (),
        properties=tuple(sorted(props.items())),
    )


SETUP: tuple[tuple[str, list[Row]], ...] = tuple(
    (w, [(i, i, "a" if (i - 1) % 4 < 2 else "b", 0, w, None) for i in ids])
    for w, ids in (("setup.1", (1, 2, 3, 4)), ("setup.2", (5, 6, 7, 8)))
)


def initial_rows() -> list[Row]:
    return [r for _, rows in SETUP for r in rows]


@dataclass(frozen=True)
class OpPlan:
    """One transaction of a cell. `n` (1 winner, 2 loser) keeps new ids apart
    where two ops would otherwise write the same row by accident; MERGE's
    inserted id is shared on purpose (two MERGEs inserting one absent key)."""

    kind: str
    op_id: str
    part: str  # the partition its condition names
    n: int
    partitioned: bool

    @property
    def where(self) -> str | None:
        return None if self.kind == C.DELETE_ALL else f"p = '{self.part}'"

    def new_rows(self) -> list[Row]:
        """INSERT / app-txn rows."""
        base = 100 if self.kind == C.INSERT else 110
        return [(base + self.n, base + self.n, self.part, 0, self.op_id, None)]

    # INSERT ... SELECT: one row recording how many rows of its partition it read.
    def select_sql(self, table: str) -> str:
        return f"SELECT count(*) AS c FROM {table} WHERE {self.where}"

    def select_row(self, count: int) -> Row:
        return (120 + self.n, 120 + self.n, self.part, int(count), self.op_id, None)

    def insert_select_sql(self, table: str) -> str:
        """The whole INSERT ... SELECT's SELECT, for SQL engines: the same row
        as select_row(count of the partition's rows)."""
        i = 120 + self.n
        return (
            f"SELECT CAST({i} AS BIGINT) AS id, CAST({i} AS BIGINT) AS k, '{self.part}' AS p, count(*) AS v, "
            f"'{self.op_id}' AS writer, CAST(NULL AS STRING) AS prev_writer FROM {table} WHERE {self.where}"
        )

    # UPDATE
    def assignments(self) -> dict[str, str]:
        return {"v": "v + 1", "prev_writer": "writer", "writer": f"'{self.op_id}'"}

    # MERGE: one source row matches the partition's first row, one is absent.
    def merge_source(self) -> list[Row]:
        first, absent = (1, 130) if self.part == "a" else (3, 131)
        return [(first, first, self.part, 0, self.op_id, None), (absent, absent, self.part, 0, self.op_id, None)]

    def merge_on(self) -> str:
        on = "t.id = s.id AND t.p = s.p"
        return on if self.kind == C.MERGE_NOLIT else f"{on} AND t.p = '{self.part}'"

    def merge_set(self) -> dict[str, str]:
        return {"v": "t.v + 10", "prev_writer": "t.writer", "writer": "s.writer"}

    def merge_insert(self) -> dict[str, str]:
        return {c: f"s.{c}" for c in COLUMNS}

    def partition_filters(self) -> list[tuple[str, str, str]] | None:
        return [("p", "=", self.part)] if self.partitioned else None

    def properties(self) -> dict[str, str]:
        return {"delta.logRetentionDuration": f"interval {30 + self.n} days"}

    def column(self) -> Column:
        return Column(f"c{self.n}", "BIGINT")

    def history_value(self) -> dict[str, Any]:
        """What the op's invoke records for the serializability checker:
        the predicate it read (over p) and the keys it read."""
        v: dict[str, Any] = {"kind": self.kind, "partition": self.part}
        if self.kind in (C.UPDATE, C.DELETE, C.INSERT_SELECT):
            v["predicate"] = [self.part, self.part]
        if self.kind == C.DELETE_ALL:
            v["predicate"] = ["", "\uffff"]  # every partition value
        if self.kind in (C.MERGE, C.MERGE_NOLIT):
            v["read_keys"] = [r[0] for r in self.merge_source()]
        return v


def plans(cell: C.Cell) -> tuple[OpPlan, OpPlan]:
    pw, pl = cell.partitions()
    return (OpPlan(cell.winner, "1.1", pw, 1, cell.partitioned), OpPlan(cell.loser, "2.1", pl, 2, cell.partitioned))


def apply(plan: OpPlan, rows: list[Row]) -> list[Row]:
    """The rows after `plan` runs alone on `rows`."""
    k = plan.kind
    if k in (C.INSERT, C.APP_TXN):
        return rows + plan.new_rows()
    if k == C.INSERT_SELECT:
        return rows + [plan.select_row(sum(1 for r in rows if r[2] == plan.part))]
    if k == C.UPDATE:
        return [(r[0], r[1], r[2], r[3] + 1, plan.op_id, r[4]) if r[2] == plan.part else r for r in rows]
    if k == C.DELETE:
        return [r for r in rows if r[2] != plan.part]
    if k == C.DELETE_ALL:
        return []
    if k in (C.MERGE, C.MERGE_NOLIT):
        out = list(rows)
        for s in plan.merge_source():
            hits = [i for i, r in enumerate(out) if r[0] == s[0] and r[2] == s[2]]
            for i in hits:
                r = out[i]
                out[i] = (r[0], r[1], r[2], r[3] + 10, s[4], r[4])
            if not hits:
                out.append(s)
        return out
    return list(rows)  # OPTIMIZE, ALTER, CREATE: no row changes


def serial_outcomes(winner: OpPlan, loser: OpPlan, loser_committed: bool, level: str) -> dict[str, Counter]:
    """The row multisets the allowed serial orders produce, by order name.
    Serializable allows only the history order (spec C14); WriteSerializable
    any order of the writes (C15)."""
    s0 = initial_rows()
    if not loser_committed:
        return {"winner only": Counter(apply(winner, s0))}
    out = {"history order": Counter(apply(loser, apply(winner, s0)))}
    if level == C.WRITE_SERIALIZABLE:
        out["reversed order"] = Counter(apply(winner, apply(loser, s0)))
    return out
