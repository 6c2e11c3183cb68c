"""A delta-rs schedule replayed on an engine release other than the pinned
one: its events run in the release's own environment
(``python -m harness.repro.release_replay RUN_DIR``, the schedule on
stdin), the table on a local directory in the replay's folder; the
controller then judges the table as for any replay.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, foreign_python, python_argv
from harness.core.table import TableSpec
from harness.engines.envs import ensure
from harness.engines.releases import EngineRelease, env_request
from harness.repro.deltars_events import run_events
from harness.repro.schedule import Schedule
from harness.run.storage import LocalStorage
from workloads import make_workload

REPLAY_TIMEOUT_S = 300.0
RESULT = "replay-events.json"


def replay_in_release(
    er: EngineRelease, schedule: Schedule, run_dir: Path
) -> tuple[list[str], dict[str, str], dict[str, list[dict[str, Any]]], dict[str, int]]:
    """Run `schedule`'s events on `er` in its environment; what run_events
    returns, each pinned snapshot as its version."""
    env = ensure(env_request(er))
    argv, penv = foreign_python(env.python, python_argv("harness.repro.release_replay", str(run_dir)))
    schedule_file = run_dir / "logs" / "schedule.json"
    schedule_file.write_text(json.dumps(schedule.to_json()))
    proc = ManagedProcess(f"replay on {er}", [*argv, str(schedule_file)], run_dir / "logs" / "replay.log", env=penv)
    proc.run(REPLAY_TIMEOUT_S, f"the replay on {er}")
    result = run_dir / "logs" / RESULT
    if not result.is_file():
        raise HarnessError(f"the replay on {er} ended without a result (log: {proc.log_path})")
    doc = json.loads(result.read_text())
    return doc["notes"], doc["outcomes"], doc["calls"], {k: int(v) for k, v in doc["pinned"].items()}


def main(run_dir: Path, schedule_file: Path) -> int:
    schedule = Schedule.from_json(json.loads(schedule_file.read_text()))
    table = TableSpec.from_json(schedule.table)
    workload = make_workload(schedule.workload, schedule.seed or 0, schedule.isolation)
    storage = LocalStorage(run_dir)
    try:
        uri = storage.table_uri("table")
        notes, outcomes, calls, clients = run_events(schedule, storage, uri, table, workload, run_dir)
    finally:
        storage.stop()
    pinned = {op_id: v for op_id, (_c, v) in clients.items()}
    doc = {"notes": notes, "outcomes": outcomes, "calls": calls, "pinned": pinned}
    (run_dir / "logs" / RESULT).write_text(json.dumps(doc, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
