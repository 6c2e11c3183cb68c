"""Replay a schedule on a fresh table and judge it with the checker that
found the anomaly.

Control is snapshot pinning, as in the conformance matrix: each transaction
gets its own table object, loaded when the schedule says its snapshot was
taken and never refreshed, so its commit is checked by the engine against
everything committed since. The replay is a run folder of its own (history,
spec, table, results), so `delta-jepsen check` and report.html open it.

delta-rs: its table objects are the snapshots. Sail and delta-spark take a
snapshot per statement, so the proxy holds (and for Sail pins) it
(`connect_replay`; a release other than the pinned one replays in a worker
in its own environment, `replay_worker`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.base import Verdict
from harness.check.pipeline import check_run
from harness.core.table import TableSpec
from harness.deltalog import copy_table, read_log
from harness.engines import ENGINE_NAMES
from harness.engines.releases import parse_engine_release
from harness.repro.deltars_events import run_events
from harness.repro.extract import op_versions
from harness.repro.release_replay import replay_in_release
from harness.repro.schedule import NotReplayable, Schedule
from harness.run.storage import LocalStorage, open_storage
from workloads import make_workload

REPLAYABLE_ENGINES = ("delta-rs", "sail", "delta-spark")
CONNECT_ENGINES = ("sail", "delta-spark")


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
    """Run `schedule` once in `run_dir` (created; must not exist). A Sail or
    delta-spark schedule runs on `controls` (harness.repro.replay_worker.spark_controls,
    shared by the replays of one reproduce)."""
    er = parse_engine_release(schedule.engine, ENGINE_NAMES)
    if er.name not in REPLAYABLE_ENGINES:
        raise NotReplayable(
            f"replay controls {', '.join(REPLAYABLE_ENGINES)} so far; a {schedule.engine} run cannot be replayed yet"
        )
    if er.release is not None and schedule.fault:
        raise NotReplayable(f"a replay of {er} re-applies no storage fault yet (only the pinned release does)")
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
                    "storage": "s3" if schedule.fault or er.name in CONNECT_ENGINES else "local",
                },
                "table": schedule.table,
                "checkers": [checker],
                "replay_of": schedule.anomaly,
                "fault": schedule.fault,
            },
            indent=2,
        )
    )
    if er.name in CONNECT_ENGINES:
        if controls is None:
            raise NotReplayable(f"a {er.name} replay needs its servers (harness.repro.replay_worker.spark_controls)")
        if schedule.fault:
            raise NotReplayable(f"a {er.name} replay re-applies no storage fault yet")
        uri, notes, outcomes, calls = controls.replay(schedule, run_dir)
        copy_table(uri, run_dir / "table", controls.reader_options())
    elif er.release is not None:
        notes, outcomes, calls, pinned = replay_in_release(er, schedule, run_dir)
        notes += _verify(str(run_dir / "table"), pinned)
    else:
        # A fault is re-applied where it happened: on S3, behind the fault proxy.
        storage = open_storage("s3", run_dir, proxy=True) if schedule.fault else LocalStorage(run_dir)
        try:
            uri = storage.table_uri("table")
            notes, outcomes, calls, clients = run_events(schedule, storage, uri, table, workload, run_dir)
            if schedule.fault:
                copy_table(uri, run_dir / "table", storage.reader_options())
        finally:
            storage.stop()
        pinned = {op_id: v for op_id, (_c, v) in clients.items()}
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


def _verify(uri: str, pinned: dict[str, int]) -> list[str]:
    """The control took: each commit that records its read version read the
    snapshot it was pinned at."""
    log = read_log(uri)
    notes = []
    for op_id, v in op_versions(log).items():
        rv = log.commits[v].read_version
        if op_id in pinned and rv is not None and rv != pinned[op_id]:
            notes.append(f"{op_id} committed version {v} having read {rv}, not its pinned {pinned[op_id]}")
    return notes
