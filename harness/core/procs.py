"""Child processes the harness starts (moto, Sail nodes, client workers).

Every child is registered so that a normal exit, an exception, SIGINT or
SIGTERM stops all of them; and each child asks the kernel to SIGKILL it if
the harness itself dies (PR_SET_PDEATHSIG), so even `kill -9` of the harness
leaves no orphan behind.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from harness.core.errors import HarnessError

_PR_SET_PDEATHSIG = 1
# Helper processes (a check's log readers, its plots) run at this niceness:
# the process that parses and checks goes first, by far (at 5 it got
# 0.8 of a core while two readers ran: a core shared with one of them).
HELPER_NICE = 19

# The errors of a process or thread the OS would not start, and the limit each means.
_REFUSALS = {
    errno.EAGAIN: "too many processes and threads: ulimit -u",
    errno.EMFILE: "too many open files: ulimit -n",
    errno.ENFILE: "the system's open-file table is full",
    errno.ENOMEM: "out of memory",
}


class SpawnRefused(HarnessError):
    """The OS would not start a child, or a thread to drive one: this
    machine's limits, not the engine's."""

    @classmethod
    def of(cls, what: str, e: OSError | RuntimeError) -> SpawnRefused:
        # Python says only "can't start new thread" when pthread_create fails,
        # which it does at the process limit (EAGAIN) unless memory runs out.
        code = e.errno if isinstance(e, OSError) else errno.EAGAIN
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        limit = _REFUSALS.get(code) if code is not None else None
        return cls(f"the OS refused to start {what}: {why}" + (f" ({limit})" if limit else ""))


def die_with_parent() -> None:
    """This process is killed when its parent's spawning thread ends (Linux)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass  # not Linux: the registry below still stops children on exit


class ManagedProcess:
    """A child process with its own log file, a readiness probe and a hard stop."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: str | os.PathLike[str],
        env: dict[str, str] | None = None,
        pipes: bool = False,
        cwd: str | None = None,
        pass_fds: Sequence[int] = (),
        fork: Callable[[dict[str, str], Path], Any] | None = None,
    ):
        """`fork`: started by calling it with the environment and the log
        path (harness.run.forkserver), not by exec; what it returns stands
        in for the Popen."""
        self.name = name
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = env
        self.pipes = pipes
        self.cwd = cwd
        self.pass_fds = tuple(pass_fds)
        self.fork = fork
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_start = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.fork is not None:
            self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
            self.proc = self.fork(dict(os.environ) if self.env is None else self.env, self.log_path)
            REGISTRY.add(self)
            return self
        try:
            self._log = open(self.log_path, "ab")
            # A process started again on the same log appends to it: readiness
            # is judged on what this start wrote (a stale "listening on" line
            # of the previous process would name a dead port).
            self._log_start = self._log.tell()
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE if self.pipes else subprocess.DEVNULL,
                stdout=subprocess.PIPE if self.pipes else self._log,
                stderr=self._log,
                env=self.env,
                cwd=self.cwd,
                # Own session: a terminal's Ctrl-C reaches only the harness, which
                # then stops children in order (workers before servers).
                start_new_session=True,
                preexec_fn=die_with_parent,
                pass_fds=self.pass_fds,
            )
        except OSError as e:
            if self._log is not None:
                self._log.close()
            if e.errno in _REFUSALS:
                raise SpawnRefused.of(self.name, e) from None
            raise
        REGISTRY.add(self)
        return self

    def wait_for_log(self, pattern: str, timeout: float) -> re.Match[str]:
        """Wait until the log matches `pattern` (e.g. the port a server bound)."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while True:
            with open(self.log_path, "rb") as fh:
                fh.seek(self._log_start)
                text = fh.read().decode(errors="replace")
            m = rx.search(text)
            if m:
                return m
            if self.proc is not None and self.proc.poll() is not None:
                raise HarnessError(
                    f"{self.name} exited with code {self.proc.returncode} before it was ready (log: {self.log_path})"
                )
            if time.monotonic() > deadline:
                raise HarnessError(f"{self.name} not ready after {timeout:.0f}s (log: {self.log_path})")
            time.sleep(0.02)

    def run(self, timeout: float, what: str) -> int:
        """Start, wait for the exit, stop (its process group too); the exit
        code. Longer than `timeout` seconds: stopped, and a HarnessError
        naming `what` and the log."""
        self.start()
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{what} took over {timeout:.0f} s (log: {self.log_path})") from None
        finally:
            self.stop(grace=1.0)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal_kill(self) -> None:
        """Only send SIGKILL: safe from any thread. The thread that owns the
        process sees its pipes close and cleans up itself."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        """SIGKILL at once (a crash, as a nemesis or a timed-out op needs)."""
        self.signal_kill()
        self._reap(5)

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the child's process group, then SIGKILL after `grace` seconds."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            self.kill()
        self._reap(5)

    def _reap(self, timeout: float) -> None:
        if self.proc is None:  # never started: only its log to close
            if self._log is not None and not self._log.closed:
                self._log.close()
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        # Grandchildren (if any) share the process group: end them too.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self._log is not None and not self._log.closed:
            self._log.close()
        REGISTRY.discard(self)


class _Registry:
    def __init__(self) -> None:
        self._procs: set[ManagedProcess] = set()
        self._lock = threading.Lock()

    def add(self, p: ManagedProcess) -> None:
        with self._lock:
            self._procs.add(p)

    def discard(self, p: ManagedProcess) -> None:
        with self._lock:
            self._procs.discard(p)

    def live(self) -> list[ManagedProcess]:
        with self._lock:
            return list(self._procs)

    def stop_all(self) -> None:
        for p in self.live():
            p.kill()


REGISTRY = _Registry()
atexit.register(REGISTRY.stop_all)


def install_signal_handlers() -> None:
    """SIGTERM behaves like Ctrl-C: unwind through the runner's cleanup."""

    def _term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _term)


# Set in a process that runs under an engine release's interpreter: the
# harness's own, for the helpers it starts (moto, the fault proxy) that need
# the harness's packages and none of the release's.
HARNESS_PYTHON_ENV = "DJ_HARNESS_PYTHON"


def harness_python() -> str:
    import sys

    return os.environ.get(HARNESS_PYTHON_ENV) or sys.executable


def python_argv(module: str, *args: str) -> list[str]:
    return [harness_python(), "-m", module, *args]


# The checkout: harness/core/procs.py is three levels below it.
PROJECT = str(Path(__file__).resolve().parents[2])


def foreign_python(python: str, argv: list[str], env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """`argv` (from python_argv) run by another environment's interpreter (an
    engine release's, harness.engines.envs): the project's code on its path,
    none of this environment's packages."""
    out = {k: v for k, v in (os.environ if env is None else env).items() if k != "VIRTUAL_ENV"}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (PROJECT, out.get("PYTHONPATH")) if p)
    out[HARNESS_PYTHON_ENV] = harness_python()
    return [python, *argv[1:]], out


def venv_bin(name: str) -> str:
    """A console script installed beside this interpreter (moto_server, sail)."""
    import shutil
    import sys

    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise HarnessError(f"{name} not found; install the project with: pip install -e '.[dev]'")
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_tempdir(prefix: str) -> str:
    """A fresh temp dir whose name carries this process's pid.

    PDEATHSIG takes a child down with a SIGKILLed harness, but nothing then
    removes the child's scratch files; so each new one first removes the
    dirs of `prefix` whose owner is gone.
    """
    root = Path(tempfile.gettempdir())
    for d in root.glob(f"{prefix}*"):
        owner = d.name[len(prefix) :].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not _alive(int(owner)):
            shutil.rmtree(d, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")
