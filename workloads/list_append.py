"""`list-append`: Elle's list-append, on rows.

A key's list is the set of its element rows, ordered by `pos`. Each write
transaction appends one element to each of 1-3 keys, as ONE engine
transaction that reads the lists it extends, so every element records what
was read: `pos` is the length of the list read, `prev_writer` the writer of
its last element (NULL for an empty list), `writer` the op, which is the
element. The statement, the same text on every engine::

    INSERT INTO t (id, k, pos, writer, prev_writer)
    SELECT s.id, s.k, COALESCE(c.n, 0), '<op id>', c.w
    FROM (VALUES (<id>, <k>), ...) AS s(id, k)
    LEFT JOIN (<each key's tail: pos + 1 and writer>) c ON s.k = c.k

Spec M-table: an INSERT whose subquery reads the target table is no blind
append and behaves like MERGE, so two such appends to one key must conflict
(M3). Spark engines (Sail) run it as one SQL statement. delta-rs has no
INSERT ... SELECT in its Python API: its client runs the SELECT on its table
snapshot v and commits the result from that same snapshot as
``MERGE ... ON t.k = s.k AND t.pos = s.pos WHEN NOT MATCHED THEN INSERT``.
The MERGE reads exactly what the SELECT read (the table at v), and a
concurrent append of the same (k, pos) changes its outcome, so the engine's
own conflict detection is what keeps the lists linear; a plain append of the
computed rows would be blind (C9) and hide exactly that check.

Reads return every key's list. The op's invocation names the keys it reads
(`read_keys`), so the serializability checker, with `k` as the row key,
sees each append as a read-modify-write of its key's list (prev_writer is
the version read; an append to an empty list read the key absent), and a
lost append as G-single. The `list-append` checker names it directly.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

KEYS = 6
MAX_KEYS_PER_TXN = 3
READ_FRACTION = 0.25
COLUMNS = ["id", "k", "pos", "writer", "prev_writer"]


def append_select(op_id: str, ids: list[int], keys: list[int]) -> str:
    """The SELECT of one list-append transaction; `{table}` is the target.
    Portable between Spark SQL and DataFusion (no MAX_BY); a tail shared by
    two elements (after a lost append) still yields one row per key."""
    src = ", ".join(f"({int(i)}, {int(k)})" for i, k in zip(ids, keys, strict=True))
    in_keys = ", ".join(str(int(k)) for k in keys)
    return (
        f"SELECT s.id, s.k, COALESCE(c.n, 0) AS pos, '{op_id}' AS writer, c.w AS prev_writer "
        f"FROM (VALUES {src}) AS s(id, k) "
        "LEFT JOIN (SELECT a.k, a.pos + 1 AS n, MIN(a.writer) AS w FROM {table} a "
        f"JOIN (SELECT k, MAX(pos) AS p FROM {{table}} WHERE k IN ({in_keys}) GROUP BY k) m "
        "ON a.k = m.k AND a.pos = m.p GROUP BY a.k, a.pos) c ON s.k = c.k"
    )


class ListAppendWorkload(Workload):
    name = "list-append"
    checkers = (
        "log-sanity",
        "durability",
        "atomicity",
        "duplicates",
        "read-validity",
        "serializability",
        "list-append",
    )
    primitives = {"append": "insert_select", "read": "read"}
    # A key's list is one logical row whose versions are its elements.
    row_key = "k"
    predicate_column = "k"

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(
                Column("id", "BIGINT"),
                Column("k", "BIGINT"),
                Column("pos", "BIGINT"),
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
        keys = sorted(gen.rng.sample(range(KEYS), gen.rng.randint(1, MAX_KEYS_PER_TXN)))
        return OpSpec(
            "append", op_id, {"ids": [row_id(slot + 1, gen.seq, j) for j in range(len(keys))], "read_keys": keys}
        )

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if f == "append":
            res = client.insert_select(
                COLUMNS, append_select(op["id"], value["ids"], value["read_keys"]), ["k", "pos"], op["id"]
            )
            res.value = {**value, **(res.value or {})}
            return res
        if f == "read":
            res = client.read(["id", "k", "pos", "writer"], value.get("via", "dataframe"))
            lists: dict[int, list[list[Any]]] = {}
            for _, k, pos, w in sorted(res.value, key=lambda r: (r[1], r[2], str(r[3]))):
                lists.setdefault(int(k), []).append([int(pos), w])
            res.value = {**value, "ids": sorted(r[0] for r in res.value), "lists": sorted(lists.items())}
            return res
        raise ValueError(f"list-append workload has no op {f!r}")
