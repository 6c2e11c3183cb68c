"""`maintenance`: time travel, RESTORE, VACUUM and checkpoints beside writers.

Writers append rows (1-3 per op) and delete the rows of one `k`, so the
log both adds files and removes them. Meanwhile:
- time-travel reads ask for the table as of a version a few versions back
  (`read-as-of`; the worker resolves "n back" against the newest version
  it sees), and must get exactly the state the log gives that version, or
  an error once VACUUM has deleted its files (spec T1); others ask for it
  as of a time a few seconds back (`read-as-of-time`), which the engine
  resolves to the newest version committed by then;
- slot 0 alone runs the maintenance proper, one op at a time, as an
  operator's job would: RESTORE to a version a few back (spec T3), VACUUM
  (spec T2), an explicit checkpoint where the engine has one. The table
  writes a checkpoint every 4 commits on its own (`delta.checkpointInterval`),
  and each must equal the replay of the commits up to it (spec C4).

VACUUM runs mostly with retention 0 and the retention check off (as users
do in tests) in the mode that deletes only files the log removed
(delta-spark's LITE, delta-rs' default): the files of older versions go,
so time travel to them must fail, while files of writers not yet committed
are never touched. Now and then it runs in full mode (untracked files too)
with a 1-hour retention, which a short run's files are all younger than.
Retention 0 in full mode would delete the files of writers not yet
committed, the documented reason for the retention check, so the workload
does not run it.

The table keeps its log entries for 1 second only (`delta.logRetentionDuration`):
log cleanup, automatic after a checkpoint or the operator's `cleanup`,
deletes the commits a checkpoint stands in for once they are that old, so
time travel to their versions may fail with an error (spec T1), and no
commit above the newest checkpoint may go (spec C4: the table would not
read whole).

The run keeps a copy of every data file and every commit as it appears
(the run folder's `kept/`), so the checkers still see the rows of files
VACUUM deleted and replay the commits log cleanup deleted, and know which
went.
"""

from __future__ import annotations

import time
from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import VIAS, OpSpec, SlotGenerator, Workload

KEY_SPACE = 8
MAX_BATCH = 3
MAX_BACK = 6
MAX_SECONDS_BACK = 4.0
CHECKPOINT_INTERVAL = 4

# Cumulative op mixes: writers, and the operator's slot 0.
_WRITER_MIX = (("append", 0.55), ("delete", 0.65), ("read", 0.75), ("read-as-of", 0.9), ("read-as-of-time", 1.0))
_OPERATOR_MIX = (
    ("append", 0.30),
    ("read-as-of", 0.40),
    ("read-as-of-time", 0.45),
    ("restore", 0.60),
    ("vacuum", 0.75),
    ("vacuum-full", 0.82),
    ("checkpoint", 0.92),
    ("cleanup", 0.96),
    ("read", 1.0),
)
# Log entries a checkpoint stands in for go after this long (log cleanup:
# automatic after a checkpoint where the engine does it, delta-rs, or the
# `cleanup` op). delta-spark rounds the cut-off down to a whole day, so it
# deletes nothing in a run.
LOG_RETENTION = "interval 1 seconds"


class MaintenanceWorkload(Workload):
    name = "maintenance"
    checkers = ("log-sanity", "read-validity", "time-travel", "restore", "vacuum")
    primitives = {
        "append": "append",
        "delete": "delete",
        "read": "read",
        "read-as-of": "read-as-of",
        "read-as-of-time": "read-as-of-time",
        "restore": "restore",
        "vacuum": "vacuum",
        "vacuum-full": "vacuum",
        "checkpoint": "checkpoint",
        "cleanup": "cleanup",
    }
    row_key = "id"
    predicate_column = "k"
    deletes_data_files = ("vacuum", "vacuum-full", "cleanup")
    kill_during = ("restore", "vacuum", "vacuum-full", "checkpoint", "cleanup")
    _since_ms: int | None = None  # when this worker ran its first op

    def table(self) -> TableSpec:
        return TableSpec(
            columns=(Column("id", "BIGINT"), Column("k", "BIGINT"), Column("writer", "STRING")),
            properties=(
                ("delta.checkpointInterval", str(CHECKPOINT_INTERVAL)),
                ("delta.logRetentionDuration", LOG_RETENTION),
                *self.properties(),
            ),
        )

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        op_id = gen.next_id()
        rng = gen.rng
        mix = _OPERATOR_MIX if gen.slot == 0 else _WRITER_MIX
        f = gen.pick(mix)
        slot = gen.slot if isinstance(gen.slot, int) else 0
        if f == "read":
            return self.read_op(gen, op_id)
        if f == "append":
            n = rng.randint(1, MAX_BATCH)
            ids = [row_id(slot + 1, gen.seq, j) for j in range(n)]
            keys = [rng.randrange(KEY_SPACE) for _ in range(n)]
            return OpSpec("append", op_id, {"ids": ids, "keys": keys, "via": rng.choice(VIAS)})
        if f == "delete":
            return OpSpec("delete", op_id, {"key": rng.randrange(KEY_SPACE)})
        if f == "read-as-of":
            return OpSpec(f, op_id, {"back": rng.randint(0, MAX_BACK), "via": rng.choice(VIAS)})
        if f == "read-as-of-time":
            back = round(rng.uniform(0, MAX_SECONDS_BACK), 3)
            return OpSpec(f, op_id, {"seconds_back": back, "via": rng.choice(VIAS)})
        if f == "restore":
            return OpSpec(f, op_id, {"back": rng.randint(1, MAX_BACK)})
        if f == "vacuum":
            return OpSpec(f, op_id, {"retention_hours": 0, "full": False})
        if f == "vacuum-full":
            return OpSpec(f, op_id, {"retention_hours": 1, "full": True})
        return OpSpec(f, op_id, {})

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        if self._since_ms is None:
            self._since_ms = int(time.time() * 1000)
        if f == "append":
            rows = [(i, k, op["id"]) for i, k in zip(value["ids"], value["keys"], strict=True)]
            return client.append(rows, table, value["via"], op["id"])
        if f == "read":
            return self.read_ids(client, value)
        if f == "read-as-of":
            version = max(0, client.latest_version() - int(value["back"]))
            res = client.read_as_of(["id"], version, value.get("via", "dataframe"))
            return OpResult(value={**value, "version": version, "ids": sorted(r[0] for r in res.value)})
        if f == "read-as-of-time":
            # Never before this worker's first op: the table existed by then.
            at = max(self._since_ms or 0, int(time.time() * 1000) - int(float(value["seconds_back"]) * 1000))
            res = client.read_as_of_time(["id"], at, value.get("via", "dataframe"))
            ids = sorted(r[0] for r in res.value)
            return OpResult(value={**value, "timestamp_ms": at, "resolved": res.version, "ids": ids})
        if f == "delete":
            res = client.delete(f"k = {int(value['key'])}", op["id"])
        elif f == "restore":
            target = max(0, client.latest_version() - int(value["back"]))
            res = client.restore(target, op["id"])
            res.value = {"target": target, **(res.value or {})}
        elif f in ("vacuum", "vacuum-full"):
            res = client.vacuum(int(value["retention_hours"]), bool(value["full"]), op["id"])
        elif f == "checkpoint":
            res = client.checkpoint(op["id"])
        elif f == "cleanup":
            res = client.cleanup_log(op["id"])
        else:
            raise ValueError(f"maintenance workload has no op {f!r}")
        res.value = {**value, **(res.value or {})}
        return res
