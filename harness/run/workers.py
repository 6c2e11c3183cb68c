"""Controller-side handles on client worker processes."""

from __future__ import annotations

import json
import os
import selectors
import time
from pathlib import Path
from typing import Any

from harness.core.capacity import WORKER_START_TIMEOUT
from harness.core.errors import HarnessError
from harness.core.history import NO_REPLY
from harness.core.procs import ManagedProcess, SpawnRefused, foreign_python, python_argv
from harness.core.table import TableSpec
from harness.engines.base import ClientConfig
from harness.run.forkserver import ForkedProcess, ForkServer
from harness.run.worker_main import CONFIG_ENV, STOP


class WorkerDied(Exception):
    pass


class OpTimeout(Exception):
    pass


class Worker:
    """One worker process. `call` sends an op and waits for its reply."""

    def __init__(
        self,
        config: ClientConfig,
        workload: str,
        seed: int,
        isolation: str | None,
        table: TableSpec,
        log_path: Path,
        extra_env: dict[str, str] | None = None,
        forks: ForkServer | None = None,
    ):
        """`forks`: a worker fork server of the run, used unless the worker
        needs an environment that acts at exec (`extra_env`: the clock
        nemesis's LD_PRELOAD) or another interpreter."""
        self.config = config
        self.process = config.process
        self.node = config.node
        payload = {
            "client": config.to_json(),
            "workload": workload,
            "seed": seed,
            "isolation": isolation,
            "table": table.to_json(),
        }
        # Credentials reach the worker through its environment, never argv.
        env = {**os.environ, **(extra_env or {}), CONFIG_ENV: json.dumps(payload), "PYTHONUNBUFFERED": "1"}
        argv = python_argv("harness.run.worker_main")
        if config.python is not None:
            argv, env = foreign_python(config.python, argv, env)
        fork = None
        if forks is not None and not extra_env and config.python is None:

            def fork(env: dict[str, str], log: Path) -> ForkedProcess:
                return forks.spawn(env, log, WORKER_START_TIMEOUT)

        self._exec = (argv, env)
        self.proc = ManagedProcess(f"worker-{config.process}", argv, log_path, env=env, pipes=True, fork=fork)
        self._buf = b""
        self._sel: selectors.BaseSelector | None = None
        self._crashed = False

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def start(self, timeout: float) -> Worker:
        try:
            self.proc.start()
        except SpawnRefused:
            raise
        except HarnessError:
            if self.proc.fork is None:
                raise
            # The fork server failed (or is gone): a worker of its own.
            argv, env = self._exec
            self.proc = ManagedProcess(self.proc.name, argv, self.proc.log_path, env=env, pipes=True)
            self.proc.start()
        if self._crashed:  # crashed from another thread while its process was being started
            self.kill()
            raise HarnessError(f"client worker {self.process} was stopped as it started")
        assert self.proc.proc is not None and self.proc.proc.stdout is not None
        try:
            os.set_blocking(self.proc.proc.stdout.fileno(), False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self.proc.proc.stdout, selectors.EVENT_READ)
        except OSError as e:
            self.kill()
            raise SpawnRefused.of(f"client worker {self.process}", e) from None
        try:
            msg = self._recv(timeout)
        except (OpTimeout, WorkerDied) as e:
            self.kill()
            raise HarnessError(f"client worker {self.process} did not start: {e} (log: {self.proc.log_path})") from None
        if not msg.get("ready"):
            self.kill()
            raise HarnessError(f"client worker {self.process} could not open its session: {msg.get('error')}")
        return self

    def _recv(self, timeout: float) -> dict[str, Any]:
        if self._sel is None or self.proc.proc is None:
            raise WorkerDied("worker already stopped")
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise OpTimeout(f"{NO_REPLY} {timeout:.1f}s")
            if not self._sel.select(left):
                continue
            chunk = self.proc.proc.stdout.read()  # type: ignore[union-attr]
            if not chunk:
                if chunk is None:
                    continue
                raise WorkerDied(f"worker exited (code {self.proc.proc.poll()})")
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return json.loads(line)

    def call(self, op: dict[str, Any], timeout: float) -> dict[str, Any]:
        assert self.proc.proc is not None and self.proc.proc.stdin is not None
        try:
            self.proc.proc.stdin.write(json.dumps(op, separators=(",", ":")).encode() + b"\n")
            self.proc.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerDied(f"worker gone: {e}") from None
        return self._recv(timeout)

    def alive(self) -> bool:
        return self.proc.alive()

    def kill(self) -> None:
        """Kill and clean up; only from the thread that owns this worker."""
        self._close_selector()
        self.proc.kill()

    def crash(self) -> None:
        """SIGKILL only, safe from any thread: the owner's pending call (or
        start) then raises and the owner cleans up."""
        self._crashed = True
        self.proc.signal_kill()

    def stop(self, grace: float = 5.0) -> None:
        if self.proc.alive() and self.proc.proc is not None and self.proc.proc.stdin is not None:
            try:
                self.proc.proc.stdin.write(json.dumps({"f": STOP}).encode() + b"\n")
                self.proc.proc.stdin.flush()
                self.proc.proc.wait(grace)
            except Exception:
                pass
        self._close_selector()
        self.proc.stop(grace=1.0)

    def _close_selector(self) -> None:
        if self._sel is not None:
            self._sel.close()
            self._sel = None
