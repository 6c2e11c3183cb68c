"""A child process spoken to in JSON lines: it writes one ``{"ready": true,
...}`` line when it can take work, then answers each line it reads on stdin
with one line on stdout. Every wait has a deadline; a worker that misses
one is stopped, and the next request starts a new one.

The conformance matrix's cell worker and the replay worker of the Spark
Connect engines' releases both run this way: in an engine release's own
environment, out of the harness's process.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from harness.core.procs import ManagedProcess


class WorkerNotReady(Exception):
    pass


class WorkerLost(Exception):
    """The worker died, or gave no answer in time (it is stopped)."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


class LineWorker:
    def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.name, self.argv, self.log, self.env = name, argv, log, env
        self.proc: ManagedProcess | None = None
        self.lines: queue.Queue[str | None] = queue.Queue()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def start(self, ready_timeout: float, doing: str = "start") -> dict[str, Any]:
        """Start the process; its ready line. `doing` names, in the error,
        what it failed to do in time."""
        self.lines = queue.Queue()
        self.proc = ManagedProcess(self.name, self.argv, self.log, env=self.env, pipes=True).start()
        out, lines = self.proc.proc.stdout, self.lines  # type: ignore[union-attr]

        def pump() -> None:
            for raw in out:  # type: ignore[union-attr]
                lines.put(raw.decode())
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            ready = self.lines.get(timeout=ready_timeout)
        except queue.Empty:
            self.stop()
            raise WorkerNotReady(
                f"the {self.name} did not {doing} within {ready_timeout:.0f} s (see {self.log})"
            ) from None
        hello = json.loads(ready) if ready is not None else {}
        if not hello.get("ready"):
            self.stop()
            raise WorkerNotReady(f"the {self.name} died before it was ready (see {self.log})")
        return hello

    def ask(self, msg: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; its answer within `timeout` seconds, or
        WorkerLost (and the worker stopped)."""
        assert self.proc is not None and self.proc.proc is not None and self.proc.proc.stdin is not None
        try:
            self.proc.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise WorkerLost(f"no result within {timeout:.0f} s (worker replaced)", timeout=True) from None
        except BrokenPipeError:
            line = None
        if line is None:
            self.stop()
            raise WorkerLost(f"the worker died (see {self.log.parent}/{self.log.name})")
        return json.loads(line)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace=2.0)
            self.proc = None

    def finish(self, timeout: float) -> None:
        """End of input: the worker closes what it owns (its servers stop and
        remove their scratch dirs) and exits; stop() only if it does not."""
        p = self.proc.proc if self.proc is not None else None
        if p is not None and p.poll() is None and p.stdin is not None:
            try:
                p.stdin.close()
                p.wait(timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.stop()
