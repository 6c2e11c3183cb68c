"""Replays of a Spark Connect engine's release other than the pinned one.

The release's servers speak to the pyspark client of its own environment
(pyspark 3.5's before Sail 0.7 and delta-spark 4.0), so the replay runs
there: a worker process
in that environment owns moto, the proxy and the servers for the whole
`reproduce`, and replays one schedule at a time; the controller copies each
replay's table and judges it, as for any replay.

Protocol (JSON lines, harness.core.lineworker): stdout ``{"ready": true}``;
stdin ``{"schedule": {...}, "run_dir": "<dir>"}``, stdout ``{"uri": ...,
"reader_options": {...}, "notes": [...], "outcomes": {...}, "calls":
{...}}`` or ``{"error": "..."}``.

Usage: ``python -m harness.repro.replay_worker --engine sail==0.6.6 --root DIR``
(or ``delta-spark==3.3.2``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.lineworker import LineWorker, WorkerLost, WorkerNotReady
from harness.core.procs import foreign_python, python_argv
from harness.engines.envs import ensure
from harness.engines.releases import EngineRelease, env_request
from harness.repro.connect_replay import CONTROLS
from harness.repro.schedule import NotReplayable, Schedule

START_TIMEOUT_S = 300.0  # the environment exists by then; this is the worker's imports
REPLAY_TIMEOUT_S = 600.0  # servers start on the first replay that needs them
FINISH_TIMEOUT_S = 60.0


class ReleaseControls:
    """The controller's side: what ConnectControls offers a replay, served
    by a worker in `er`'s environment."""

    def __init__(self, er: EngineRelease, root: Path) -> None:
        self.er, self.root = er, root
        self.worker: LineWorker | None = None
        self.options: dict[str, str] | None = None

    def __enter__(self) -> ReleaseControls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> LineWorker:
        env = ensure(env_request(self.er))
        self.root.mkdir(parents=True, exist_ok=True)
        argv, penv = foreign_python(
            env.python,
            python_argv("harness.repro.replay_worker", "--engine", str(self.er), "--root", str(self.root)),
        )
        worker = LineWorker(f"replay worker of {self.er}", argv, self.root / "replay-worker.log", env=penv)
        try:
            worker.start(START_TIMEOUT_S)
        except WorkerNotReady as e:
            raise HarnessError(str(e)) from None
        return worker

    def replay(self, schedule: Schedule, run_dir: Path) -> tuple[str, list[str], dict[str, str], dict[str, Any]]:
        if self.worker is None or not self.worker.alive():
            self.worker = self._start()
        try:
            reply = self.worker.ask({"schedule": schedule.to_json(), "run_dir": str(run_dir)}, REPLAY_TIMEOUT_S)
        except WorkerLost as e:
            raise HarnessError(f"the replay on {self.er}: {e}") from None
        if "not_replayable" in reply:
            raise NotReplayable(reply["not_replayable"])
        if "error" in reply:
            raise HarnessError(f"the replay on {self.er} failed: {reply['error']} (log: {self.worker.log})")
        self.options = reply.get("reader_options")
        return reply["uri"], reply["notes"], reply["outcomes"], reply["calls"]

    def reader_options(self) -> dict[str, str] | None:
        return self.options

    def close(self) -> None:
        if self.worker is not None:
            self.worker.finish(FINISH_TIMEOUT_S)
            self.worker = None


def spark_controls(er: EngineRelease, root: Path) -> Any:
    """The controls of a `reproduce` on `er`'s servers: in this process for
    the pinned release, through a worker in its environment for another."""
    if er.release is None:
        return CONTROLS[er.name](root)
    return ReleaseControls(er, root)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr  # engine chatter must not corrupt the protocol
    name, _, release = args.engine.partition("==")
    if name not in CONTROLS:
        raise SystemExit(f"no replay worker for {args.engine}")
    with CONTROLS[name](Path(args.root), release or None) as controls:
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            msg = json.loads(line)
            reply: dict[str, Any]
            try:
                schedule = Schedule.from_json(msg["schedule"])
                uri, notes, outcomes, calls = controls.replay(schedule, Path(msg["run_dir"]))
                reply = {
                    "uri": uri,
                    "reader_options": controls.reader_options(),
                    "notes": notes,
                    "outcomes": outcomes,
                    "calls": calls,
                }
            except NotReplayable as e:
                reply = {"not_replayable": str(e)}
            except Exception as exc:  # noqa: BLE001 - one failed replay must not end the reproduce
                reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
            out.write(json.dumps(reply, default=str) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
