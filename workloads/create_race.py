"""`create-race`: spec E6. In each round every client creates the same new
table at an empty path at once; exactly one may win.

Round n's table lives at ``<run table>/races/r<n>``, inside the run's table
folder, so the run's table snapshot carries every round along and the
checker reads each round's own log (``related_tables``). Per round a slot
issues three ops: ``create`` (error-if-exists, op id in commitInfo), then an
``append`` of one row into the round's table (so what each writer's commit
became is observable in the data), then a ``read`` of it.

Creates collide because they start together: rounds begin on a shared
wall-clock schedule, and a slot's generator sleeps until its round's start
before handing the create out, so the recorded invoke times are the real
start times. A slot that falls behind the schedule skips to the next round
that has not started yet, so its creates race again instead of arriving
late, and the schedule slows down (rounds further apart) until every slot
keeps up: an engine on S3 needs more time per round than one on a local
disk. Which rounds a slot joins thus depends on timing; everything that
happened is in the history.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from harness.core.table import Column, TableSpec, row_id
from harness.engines.base import EngineClient, OpResult
from workloads.base import OpSpec, SlotGenerator, Workload

PERIOD_S = 0.5  # first gap between rounds; grows while slots fall behind
MAX_PERIOD_S = 5.0
SLOWDOWN = 1.5
LEAD_S = 0.5  # from the first op request to round 0: every slot has asked by then
RACES_DIR = "races"


def race_table(n: int) -> str:
    return f"{RACES_DIR}/r{n}"


@dataclass
class _SlotState:
    round: int = -1
    phase: int = 0  # 0 create, 1 append, 2 read


class CreateRaceWorkload(Workload):
    name = "create-race"
    checkers = ("log-sanity", "create-race")
    primitives = {"create": "create-table-at", "append": "append", "read": "read"}
    # Folders (globs, relative to the run's table) whose logs the checkers get
    # as log.related.
    related_tables = (f"{RACES_DIR}/*",)
    row_key = "id"
    predicate_column = "id"

    def __init__(self, seed: int, isolation: str | None = None):
        super().__init__(seed, isolation)
        # Slot generators run in threads of the controller; they share the
        # round schedule.
        self._lock = threading.Lock()
        self._starts: list[float] = []  # wall-clock start of each round so far
        self._period = PERIOD_S
        self._slots: dict[int | str, _SlotState] = {}

    def table(self) -> TableSpec:
        return TableSpec(columns=(Column("id", "BIGINT"), Column("writer", "STRING")), properties=self.properties())

    def schedule(self, first: int, now: float) -> tuple[int, float]:
        """The first round >= `first` that has not started yet, and its start;
        rounds are scheduled as slots first ask for them."""
        with self._lock:
            n = first
            while n < len(self._starts) and self._starts[n] < now:
                n += 1
            if n > first:  # this slot missed a round: give rounds more time
                self._period = min(self._period * SLOWDOWN, MAX_PERIOD_S)
            while n >= len(self._starts):
                # Never "now": the slots still busy with the last round join
                # this one only if it starts a period after the first asks.
                prev = self._starts[-1] if self._starts else now + LEAD_S - self._period
                self._starts.append(max(prev, now) + self._period)
            return n, self._starts[n]

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        with self._lock:
            st = self._slots.setdefault(gen.slot, _SlotState())
        op_id = gen.next_id()
        if st.phase == 0:
            st.round, start = self.schedule(st.round + 1, time.time())
            # At most LEAD_S, or two periods, from now.
            time.sleep(max(0.0, start - time.time()))
            st.phase = 1
            return OpSpec("create", op_id, {"round": st.round, "table": race_table(st.round), "not_before": start})
        table = race_table(st.round)
        if st.phase == 1:
            st.phase = 2
            slot = gen.slot if isinstance(gen.slot, int) else 0
            return OpSpec(
                "append",
                op_id,
                {"round": st.round, "table": table, "ids": [row_id(slot + 1, gen.seq, 0)], "via": "dataframe"},
            )
        st.phase = 0
        return OpSpec("read", op_id, {"round": st.round, "table": table, "via": "dataframe"})

    def final_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        # The evidence is each round's log; the run's own table stays empty.
        return []

    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        value, f = op["value"], op["f"]
        uri = f"{client.config.table_uri.rstrip('/')}/{value['table']}"
        if f == "create":
            return client.create_table_at(uri, table, op["id"])
        # Path-based ops only (see EngineClient.at): "dataframe" on Spark.
        at = client.at(uri)
        if f == "append":
            rows = [(i, op["id"]) for i in value["ids"]]
            return at.append(rows, table, "dataframe", op["id"])
        if f == "read":
            res = at.read(["id", "writer"], "dataframe")
            res.value = {**value, "ids": sorted(r[0] for r in res.value)}
            return res
        raise ValueError(f"create-race workload has no op {f!r}")
