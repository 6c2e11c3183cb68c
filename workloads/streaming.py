"""`streaming`: a Structured Streaming query reads the table while writers
append to it, and writes a sink table (spec C18, T5).

Writers append rows (1-3 per op) and now and then add a column (`ALTER
TABLE ADD COLUMNS`, a metadata change). Slot 0 runs the stream: each
`stream` op starts the query from its checkpoint, lets it run micro-batches
for a couple of seconds, and stops it, as a job restarted now and then
would; a query that fails (as C18 says it must when it reaches a metadata
change) fails the op, and the next op starts it again. The query writes
`id` and `writer` into the sink table (the folder `stream/sink` inside the
table), its checkpoint in `stream/checkpoint`, both in the run's store.
After the run, slot 0 drains the stream (every row the table has by then),
so the sink must hold each of the table's rows exactly once (spec T5),
also when a node was killed mid-batch and the query restarted from its
checkpoint.
"""

from __future__ import annotations

from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

STREAM_DIR = "stream"
SINK = f"{STREAM_DIR}/sink"
CHECKPOINT = f"{STREAM_DIR}/checkpoint"
STREAM_SECONDS = 6.0
MAX_BATCH = 3
COLUMN_PREFIX = "c_"
# Slot 1's op of this number always adds a column (C18 is then exercised
# by every run that gets that far).
EARLY_COLUMN_AT = 4

# Cumulative op mixes: the writers', and the stream's slot 0.
_WRITER_MIX = (("append", 0.84), ("add-column", 0.92), ("read", 1.0))
_STREAM_MIX = (("stream", 0.85), ("append", 1.0))


def stream_uris(client: EngineClient) -> tuple[str, str]:
    """The sink table's and the query checkpoint's URIs, inside the table's folder."""
    base = client.config.table_uri.rstrip("/")
    return f"{base}/{SINK}", f"{base}/{CHECKPOINT}"


class StreamingWorkload(Workload):
    name = "streaming"
    checkers = ("log-sanity", "durability", "atomicity", "duplicates", "read-validity", "streaming")
    primitives = {"append": "append", "add-column": "add-columns", "read": "read", "stream": "stream"}
    related_tables = (SINK,)
    # The query's first batch starts about 3 s into a stream op, the next
    # every 250 ms: a kill this far in lands in a running query.
    kill_during = ("stream",)
    kill_after = (3.0, 5.0)
    row_key = "id"
    predicate_column = "id"

    def table(self) -> TableSpec:
        return TableSpec(columns=(Column("id", "BIGINT"), Column("writer", "STRING")), properties=self.properties())

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        f = gen.pick(_STREAM_MIX if gen.slot == 0 else _WRITER_MIX)
        if gen.slot == 1 and gen.seq == EARLY_COLUMN_AT:
            f = "add-column"  # every run changes the metadata under a running query at least once
        if f == "read":
            return self.read_op(gen, op_id)
        if f == "stream":
            return OpSpec(f, op_id, {"seconds": STREAM_SECONDS})
        slot = gen.slot if isinstance(gen.slot, int) else 0
        if f == "add-column":
            return OpSpec(f, op_id, {"column": f"{COLUMN_PREFIX}{slot}_{gen.seq}"})
        ids = [row_id(slot + 1, gen.seq, j) for j in range(rng.randint(1, MAX_BATCH))]
        return OpSpec(f, op_id, {"ids": ids, "via": rng.choice(VIAS)})

    def final_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        ops = super().final_ops(gen)
        if gen.slot == 0:
            # The drain: whatever the table has by now reaches the sink.
            ops.insert(0, OpSpec("stream", gen.next_id(), {"seconds": 0, "final": True}))
        return ops

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f, op_id = op["value"], op["f"], op["id"]
        if f == "append":
            return client.append([(i, op_id) for i in value["ids"]], table, value["via"], op_id)
        if f == "add-column":
            res = client.add_columns([Column(value["column"], "STRING")], op_id)
            res.value = value
            return res
        if f == "read":
            return self.read_ids(client, value)
        if f == "stream":
            sink, checkpoint = stream_uris(client)
            res = client.stream(sink, checkpoint, ["id", "writer"], float(value["seconds"]), op_id)
            res.value = {**value, **(res.value or {})}
            return res
        raise ValueError(f"streaming workload has no op {f!r}")
