"""Replay a schedule on a fresh table and judge it with the checker that
found the anomaly.

Control is snapshot pinning, as in the conformance matrix: each transaction
gets its own table object, loaded when the schedule says its snapshot was
taken and never refreshed, so its commit is checked by the engine against
everything committed since. The replay is a run folder of its own (history,
spec, table, results), so `delta-jepsen check` and report.html open it.

delta-rs: its table objects are the snapshots. Sail refreshes its snapshot
per statement, so the proxy pins and holds it (`sail_replay`). delta-spark
is reported as not replayable yet, never as not reproducing.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.base import Verdict
from harness.check.pipeline import check_run
from harness.core.errors import HarnessError
from harness.core.history import INVOKE, HistoryWriter
from harness.core.table import Column, TableDeclaration, TableSpec
from harness.deltalog import copy_table, read_log
from harness.engines.base import ClientConfig
from harness.engines.deltars import DeltaRsClient
from harness.repro.extract import op_versions
from harness.repro.recording import record_reply
from harness.repro.sail_replay import run_sail_events
from harness.repro.schedule import PIN, NotReplayable, Schedule, Txn
from harness.run.storage import LocalStorage, open_storage
from harness.run.worker_main import run_op
from workloads import make_workload

REPLAYABLE_ENGINES = ("delta-rs", "sail")


# The engine primitives a workload's op calls: what the standalone script
# re-issues, argument for argument.
PRIMITIVES = (
    "append",
    "update",
    "delete",
    "merge",
    "insert_select",
    "optimize",
    "set_properties",
    "add_columns",
    "append_idempotent",
    "read",
)


class _PinnedDeltaRs(DeltaRsClient):
    """A delta-rs client whose table object stays at the snapshot `pin` took,
    recording each primitive call (name, arguments) it makes."""

    calls: list[dict[str, Any]]

    def pin(self) -> int:
        from deltalake import DeltaTable

        self.dt = DeltaTable(self.config.table_uri, storage_options=self.options or None)
        return self.dt.version()

    def _table(self) -> Any:
        if self.dt is None:
            self.pin()
        self.last_read_version = self.dt.version()
        return self.dt


def _plain(x: Any) -> Any:
    if isinstance(x, TableSpec):
        return None
    if isinstance(x, Column):
        return [x.name, x.type]
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


def _recorded(name: str) -> Any:
    base = getattr(DeltaRsClient, name)
    sig = inspect.signature(base)

    def call(self: _PinnedDeltaRs, *args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = {k: _plain(v) for k, v in bound.arguments.items() if k not in ("self", "table", "op_id")}
        self.calls.append({"primitive": name, "args": arguments})
        return base(self, *args, **kwargs)

    return call


for _name in PRIMITIVES:
    setattr(_PinnedDeltaRs, _name, _recorded(_name))


@dataclass
class Attempt:
    """One replay: whether the anomaly showed, and whether the control took."""

    reproduced: bool
    controlled: bool
    run_dir: str
    seconds: float
    control_notes: list[str] = field(default_factory=list)
    found: list[dict[str, Any]] = field(default_factory=list)  # the matching anomalies
    verdict: str = "unknown"
    outcomes: dict[str, str] = field(default_factory=dict)  # op id -> ok / fail / info
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # op id -> primitive calls

    def to_json(self) -> dict[str, Any]:
        return {
            "reproduced": self.reproduced,
            "controlled": self.controlled,
            "run_dir": self.run_dir,
            "seconds": self.seconds,
            "control_notes": self.control_notes,
            "verdict": self.verdict,
            "outcomes": self.outcomes,
            "calls": self.calls,
            "found": [{k: a.get(k) for k in ("kind", "claim", "ops", "versions", "explanation")} for a in self.found],
        }


def _matches(anomaly: dict[str, Any], target: dict[str, Any], replayed: set[str]) -> bool:
    """Same kind, and made by the replayed transactions: setup rows carry
    the run's writers, so an anomaly already in the rows the table starts
    from (two elements the run put at one position, say) names only ops the
    replay did not run, and is not a reproduction."""
    named = set(anomaly.get("ops") or [])
    return anomaly.get("kind") == target.get("kind") and (not named or bool(named & replayed))


def replay(schedule: Schedule, run_dir: Path, *, write_report: bool = False, controls: Any = None) -> Attempt:
    """Run `schedule` once in `run_dir` (created; must not exist). A Sail
    schedule runs on `controls` (a SailControls, shared by the replays of
    one reproduce)."""
    if schedule.engine not in REPLAYABLE_ENGINES:
        raise NotReplayable(
            f"replay controls {', '.join(REPLAYABLE_ENGINES)} so far; a {schedule.engine} run cannot be replayed yet"
        )
    t0 = time.monotonic()
    run_dir.mkdir(parents=True)
    (run_dir / "logs").mkdir()
    table = TableSpec.from_json(schedule.table)
    workload = make_workload(schedule.workload, schedule.seed or 0, schedule.isolation)
    checker = schedule.anomaly["checker"]
    (run_dir / "spec.json").write_text(
        json.dumps(
            {
                "spec": {
                    "workload": schedule.workload,
                    "engine": schedule.engine,
                    "storage": "s3" if schedule.fault or schedule.engine == "sail" else "local",
                },
                "table": schedule.table,
                "checkers": [checker],
                "replay_of": schedule.anomaly,
                "fault": schedule.fault,
            },
            indent=2,
        )
    )
    if schedule.engine == "sail":
        if controls is None:
            raise NotReplayable("a Sail replay needs its servers (SailControls)")
        if schedule.fault:
            raise NotReplayable("a Sail replay re-applies no storage fault yet")
        uri, notes, outcomes, calls = run_sail_events(schedule, controls, table, workload, run_dir)
        copy_table(uri, run_dir / "table", controls.storage.reader_options())
    else:
        # A fault is re-applied where it happened: on S3, behind the fault proxy.
        storage = open_storage("s3", run_dir, proxy=True) if schedule.fault else LocalStorage(run_dir)
        try:
            uri = storage.table_uri("table")
            notes, outcomes, calls, pinned = _run_events(schedule, storage, uri, table, workload, run_dir)
            if schedule.fault:
                copy_table(uri, run_dir / "table", storage.reader_options())
        finally:
            storage.stop()
        notes += _verify(str(run_dir / "table"), pinned)
    report = check_run(run_dir, write=write_report)
    found = [
        a
        for r in report.results
        if r.checker == checker
        for a in (x.to_json() for x in r.anomalies)
        if _matches(a, schedule.anomaly, {t.op_id for t in schedule.txns})
    ]
    verdict = report.verdict.value if report.verdict is not Verdict.VALID or not found else "invalid"
    return Attempt(
        reproduced=bool(found) and not notes,
        controlled=not notes,
        run_dir=str(run_dir),
        seconds=round(time.monotonic() - t0, 3),
        control_notes=notes,
        found=found,
        verdict=verdict,
        outcomes=outcomes,
        calls=calls,
    )


def _run_events(
    schedule: Schedule, storage: Any, uri: str, table: TableSpec, workload: Any, run_dir: Path
) -> tuple[list[str], dict[str, str], dict[str, list[dict[str, Any]]], dict[str, tuple[Any, int]]]:
    """Create the table, the setup commits, then the snapshots and commits in
    the schedule's order, each recorded in the replay's history."""

    def client(process: int | str) -> _PinnedDeltaRs:
        options = storage.deltars_options(str(process), "n1") if schedule.fault else {}
        cfg = ClientConfig(engine="delta-rs", node="n1", process=process, table_uri=uri, storage_options=options)
        c = _PinnedDeltaRs(cfg)
        c.calls = []
        c.open()
        return c

    notes: list[str] = []
    outcomes: dict[str, str] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    pinned: dict[str, tuple[_PinnedDeltaRs, int]] = {}
    with HistoryWriter(run_dir / "history.jsonl") as h:
        setup = client("setup")
        decl = TableDeclaration.from_json(schedule.declaration)
        value = {**schedule.declaration, **table.to_json()} if decl.table is not None else schedule.declaration
        op = {"f": "create-table", "id": "setup.1", "value": value}
        record_reply(h, "setup", op, run_op(setup, workload, table, op), "n1")
        for i, rows in enumerate(schedule.setup, start=2):
            op_id = f"setup.{i}"
            res = setup.append([tuple(r) for r in rows], table, "dataframe", op_id)
            h.record(process="setup", type=INVOKE, f="setup-append", id=op_id, value={"rows": len(rows)})
            h.record(process="setup", type="ok", f="setup-append", id=op_id, version=res.version)
        if schedule.fault:
            f = schedule.fault
            # Every replay client runs on n1: a fault aimed at one node or
            # client in the run is aimed at all of them here.
            target = {k: v for k, v in (f.get("target") or {}).items() if k not in ("node", "client")}
            storage.proxy.add_fault(f["kind"], target, **(f.get("params") or {}))
            h.record(process="nemesis", type=INVOKE, f=f"start-{f.get('nemesis')}", id="nemesis.1")
            h.record(process="nemesis", type="ok", f=f"start-{f.get('nemesis')}", id="nemesis.1", value=f)
        expected = len(schedule.setup)  # the replay's latest version
        process = {t.op_id: i for i, t in enumerate(schedule.txns)}
        straddles = _straddles(schedule)
        done: set[str] = set()

        def execute(txn: Txn) -> dict[str, Any]:
            c, _ = pinned[txn.op_id]
            op = {"f": txn.f, "id": txn.op_id, "value": txn.value}
            h.record(process=process[txn.op_id], type=INVOKE, f=txn.f, id=txn.op_id, value=txn.value, node="n1")
            reply = run_op(c, workload, table, op)
            record_reply(h, process[txn.op_id], op, reply, "n1")
            outcomes[txn.op_id] = reply["type"]
            calls[txn.op_id] = list(c.calls)
            return reply

        for kind, txn in schedule.events():
            if kind == PIN:
                c = client(process[txn.op_id])
                v = c.pin()
                if v != expected:
                    notes.append(f"{txn.op_id}'s snapshot is at version {v}, not {expected}")
                pinned[txn.op_id] = (c, v)
                if txn.f == "read":
                    execute(txn)
                continue
            if txn.op_id in done:
                continue
            owner = straddles.get(txn.op_id)
            if owner is not None and owner.op_id in pinned:
                # The acknowledged commit the log lost: its owner's commit PUT
                # was in flight across it (held here), then replaced it.
                notes += _straddle(
                    storage.proxy, str(process[owner.op_id]), lambda t=owner: execute(t), lambda t=txn: execute(t)
                )
                done.add(owner.op_id)
            else:
                execute(txn)
            if outcomes.get(txn.op_id) == "ok" and txn.f != "read":
                # Under a fault a commit may replace another: the log, not
                # the count of acknowledgements, says where the table is.
                expected = pinned[txn.op_id][0].dt.version() if schedule.fault else expected + 1
        if schedule.fault:
            storage.proxy.heal()
            h.record(process="nemesis", type=INVOKE, f=f"stop-{schedule.fault.get('nemesis')}", id="nemesis.2")
            h.record(process="nemesis", type="ok", f=f"stop-{schedule.fault.get('nemesis')}", id="nemesis.2")
    return notes, outcomes, calls, pinned


HOLD_TIMEOUT_S = 30.0


def _straddles(schedule: Schedule) -> dict[str, Txn]:
    """lost txn -> the txn whose commit replaced it, where a fault lets one
    commit replace another (the store applied a PUT it should have refused)."""
    if not schedule.fault:
        return {}
    owners = {t.commit_version: t for t in schedule.txns if t.commit_version is not None}
    return {t.op_id: owners[t.lost_version] for t in schedule.txns if t.lost_version in owners}


def _straddle(proxy: Any, owner_client: str, owner: Any, lost: Any) -> list[str]:
    """Run `owner` until its commit PUT is held, `lost` to completion, then
    release the owner's PUT; returns what did not go as scheduled."""
    hold = proxy.hold_next_commit(owner_client)
    thread = threading.Thread(target=owner, daemon=True)
    thread.start()
    notes = []
    try:
        held = proxy.wait_hold(owner_client, HOLD_TIMEOUT_S)
    except HarnessError as e:
        notes.append(f"the replacing commit was never held: {e}")
        held = None
    finally:
        if held is None:
            proxy.remove_fault(hold)
    lost()
    if held is not None:
        proxy.release(held["id"])
    thread.join(HOLD_TIMEOUT_S + 30)
    if thread.is_alive():
        notes.append("the replacing commit did not finish")
    return notes


def _verify(uri: str, pinned: dict[str, tuple[Any, int]]) -> list[str]:
    """The control took: each commit that records its read version read the
    snapshot it was pinned at."""
    log = read_log(uri)
    notes = []
    for op_id, v in op_versions(log).items():
        rv = log.commits[v].read_version
        if op_id in pinned and rv is not None and rv != pinned[op_id][1]:
            notes.append(f"{op_id} committed version {v} having read {rv}, not its pinned {pinned[op_id][1]}")
    return notes
