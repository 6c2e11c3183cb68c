"""`delta-jepsen reproduce`: replay an anomaly K times, shrink it, replay
the shrunk schedule K times, and write `repro/anomaly-N/` in the run folder:
schedule.json (original and shrunk), shrink.json (every step tried), the
standalone script and the bug report draft."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from harness.core.procs import die_with_parent
from harness.engines import ENGINE_NAMES
from harness.engines.envs import ensure
from harness.engines.releases import env_request, parse_engine_release
from harness.repro.extract import AnomalyRef, extract
from harness.repro.replay import CONNECT_ENGINES, Attempt, replay
from harness.repro.replay_worker import spark_controls
from harness.repro.report import bug_report
from harness.repro.sail_script import sail_schedule_script
from harness.repro.schedule import Schedule
from harness.repro.shrink import Step, shrink_schedule
from harness.repro.standalone import REPORT_NAME, SCRIPT_NAME, deltars_script

SCRIPT_TIMEOUT_S = 300.0


@dataclass
class Outcome:
    """What reproduce found; `exit_code` follows check: 1 the anomaly shows
    (the engine broke a guarantee), 3 it did not (or could not be controlled)."""

    anomaly: AnomalyRef
    original: Schedule
    shrunk: Schedule
    repeat: int
    before: list[Attempt]
    after: list[Attempt] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    shrink_seconds: float = 0.0
    out_dir: Path | None = None
    script: dict[str, Any] | None = None
    script_note: str | None = None  # why there is no script, where one reproduced

    @staticmethod
    def _count(attempts: list[Attempt]) -> int:
        return sum(1 for a in attempts if a.reproduced)

    @property
    def reproduced(self) -> int:
        return self._count(self.after or self.before)

    @property
    def uncontrolled(self) -> int:
        return sum(1 for a in self.before + self.after if not a.controlled)

    @property
    def exit_code(self) -> int:
        return 1 if self.reproduced else 3

    def to_json(self) -> dict[str, Any]:
        return {
            "anomaly": {"number": self.anomaly.number, "checker": self.anomaly.checker, **self.original.anomaly},
            "repeat": self.repeat,
            "reproduced_before_shrink": self._count(self.before),
            "reproduced_after_shrink": self._count(self.after) if self.after else None,
            "uncontrolled": self.uncontrolled,
            "size_before": self.original.size(),
            "size_after": self.shrunk.size(),
            "shrink_steps": len(self.steps),
            "shrink_seconds": round(self.shrink_seconds, 3),
            "schedule": self.shrunk.describe(),
            "script": self.script,
            "script_note": self.script_note,
            "attempts_before": [a.to_json() for a in self.before],
            "attempts_after": [a.to_json() for a in self.after],
        }


def reproduce(
    run_dir: Path, number: int, repeat: int, *, shrink: bool = True, log: Any = print, budget: int = 150
) -> Outcome:
    schedule, ref, _ = extract(run_dir, number)
    out = run_dir / "repro" / f"anomaly-{ref.number}"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        er = parse_engine_release(schedule.engine, ENGINE_NAMES)
        controls = stack.enter_context(spark_controls(er, out / "servers")) if er.name in CONNECT_ENGINES else None
        outcome = _reproduce(schedule, ref, out, repeat, shrink, log, budget, partial(replay, controls=controls))
    _write(outcome, run_dir)
    return outcome


def _reproduce(
    schedule: Schedule, ref: AnomalyRef, out: Path, repeat: int, shrink: bool, log: Any, budget: int, replay: Any
) -> Outcome:
    log(f"anomaly {ref.label()}")
    log(f"schedule: {len(schedule.txns)} transaction(s), {len(schedule.setup)} setup file(s), {schedule.rows} row(s)")
    before = [replay(schedule, out / "attempts" / f"original-{k}") for k in range(1, repeat + 1)]
    outcome = Outcome(ref, schedule, schedule, repeat, before, out_dir=out)
    log(f"replayed {repeat} time(s): reproduced in {outcome._count(before)}, uncontrolled in {outcome.uncontrolled}")
    best = next((a for a in before if a.reproduced), None)
    if best is not None and shrink:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="dj-shrink-") as tmp:
            counter = iter(range(1, 10**6))

            def reproduces(candidate: Schedule) -> bool:
                d = Path(tmp) / f"step-{next(counter)}"
                a = replay(candidate, d)
                shutil.rmtree(d, ignore_errors=True)
                return a.reproduced

            outcome.shrunk, outcome.steps = shrink_schedule(schedule, reproduces, budget=budget)
        outcome.shrink_seconds = time.monotonic() - t0
        log(
            f"shrunk in {len(outcome.steps)} step(s), {outcome.shrink_seconds:.1f} s: "
            f"{_size(schedule)} -> {_size(outcome.shrunk)}"
        )
        outcome.after = [replay(outcome.shrunk, out / "attempts" / f"shrunk-{k}") for k in range(1, repeat + 1)]
        log(f"the shrunk schedule reproduced in {outcome._count(outcome.after)} of {repeat}")
    return outcome


def _size(s: Schedule) -> str:
    return f"{len(s.txns)} txn(s) / {len(s.setup)} file(s) / {s.rows} row(s)"


def _write(outcome: Outcome, run_dir: Path) -> None:
    out = outcome.out_dir
    assert out is not None
    (out / "schedule.json").write_text(
        json.dumps({"original": outcome.original.to_json(), "shrunk": outcome.shrunk.to_json()}, indent=2, default=str)
    )
    (out / "shrink.json").write_text(json.dumps([s.to_json() for s in outcome.steps], indent=2))
    source = next((a for a in outcome.after + outcome.before if a.reproduced), None)
    if source is not None:
        calls = source.calls
        if source in outcome.before and outcome.after:
            calls = next((a.calls for a in outcome.after if a.calls), calls)
        # An op whose primitive call is not recorded (an overwrite computes
        # its rows in the worker) cannot be written out as a script.
        unrecorded = [t.op_id for t in outcome.shrunk.txns if t.f != "read" and not calls.get(t.op_id)]
        er = parse_engine_release(outcome.shrunk.engine, ENGINE_NAMES)
        # A delta-rs script calls the pinned release's API; a Sail script is
        # SQL, and runs in the release's own environment.
        text = (
            deltars_script(outcome.shrunk, calls, str(run_dir))
            if outcome.shrunk.engine == "delta-rs" and not unrecorded
            else sail_schedule_script(outcome.shrunk, calls, str(run_dir))
            if er.name == "sail"
            else None
        )
        if text is not None:
            script = out / SCRIPT_NAME
            script.write_text(text)
            script.chmod(0o755)
            outcome.script = run_script(script, ensure(env_request(er)).python if er.release is not None else None)
        elif er.release is not None and er.name == "delta-rs":
            outcome.script_note = (
                f"the standalone script calls the pinned deltalake's API; {er} has no standalone form yet "
                "(the replays above ran in its own environment)"
            )
        elif unrecorded and outcome.shrunk.engine == "delta-rs":
            outcome.script_note = (
                f"{', '.join(unrecorded)} made no primitive call the replay could record (an overwrite computes "
                "its rows in the worker), so the schedule has no standalone form"
            )
        elif er.name == "sail":
            outcome.script_note = (
                "the Sail script orders two transactions in time (one SQL statement each, the later an "
                "INSERT ... SELECT that took its snapshot before the other committed); this schedule is no such pair"
            )
    (out / "outcome.json").write_text(json.dumps(outcome.to_json(), indent=2, default=str))
    (out / REPORT_NAME).write_text(bug_report(outcome.to_json(), outcome.shrunk, run_dir))


def run_script(script: Path, python: str | None = None) -> dict[str, Any]:
    """Run the standalone script (with this interpreter unless told): its exit
    code and output go into the report."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [python or sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT_S,
            cwd=script.parent,
            preexec_fn=die_with_parent,  # no orphan script if the harness is killed
        )
    except subprocess.TimeoutExpired:
        return {"exit_code": None, "output": f"timed out after {SCRIPT_TIMEOUT_S:.0f} s", "seconds": SCRIPT_TIMEOUT_S}
    return {
        "exit_code": p.returncode,
        "output": (p.stdout + (p.stderr[-2000:] if p.returncode not in (0, 1) else "")).strip(),
        "seconds": round(time.monotonic() - t0, 2),
    }
