"""Client workers forked from a process that has imported their libraries.

A Spark client worker spends about 1.5 s of CPU importing PySpark (pandas,
numpy, grpc) before it opens its session, and a run starts one per client,
again after every crash a nemesis causes. The fork server is started once
per run, imports the workers' modules, and forks a worker per request: the
worker runs ``harness.run.worker_main.main`` with the stdin, stdout, log
and environment it was given, exactly as a worker started on its own would.

Protocol, on a SOCK_SEQPACKET socket pair (one message per packet):
requests ``{"id", "env", "log"}`` carry the worker's stdin and stdout as
SCM_RIGHTS; the server answers ``{"id", "pid"}`` (or ``{"id", "error"}``)
and, when a worker exits, ``{"exit": pid, "code": n}``. ``{"ready": true}``
once its imports are done.

The server dies with the harness (PR_SET_PDEATHSIG, set by ManagedProcess),
and each worker with the server; a worker also starts its own session, so
ManagedProcess stops it (and only it) by process group, as it does a
worker started on its own. Workers with an environment that has to act at
exec (LD_PRELOAD of the clock nemesis) and workers of another interpreter
are started on their own, as are all of them with DJ_WORKER_FORK=0.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, die_with_parent, python_argv
from harness.run.worker_main import main as worker_main

FORK_ENV = "DJ_WORKER_FORK"
_READY_TIMEOUT = 60.0  # the server's imports, on a loaded machine
_MAX_MESSAGE = 1 << 20  # a request: the worker's whole environment


def enabled() -> bool:
    return os.environ.get(FORK_ENV, "1") != "0" and hasattr(socket, "send_fds") and sys.platform.startswith("linux")


class ForkedProcess:
    """What ManagedProcess and Worker use of a Popen, for a worker the fork
    server started: its pid, pipes, poll and wait. The exit code comes from
    the server, which reaps it; if the server is gone, so is the worker."""

    def __init__(self, server: ForkServer, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.server, self.pid, self.stdin, self.stdout = server, pid, stdin, stdout
        self.returncode: int | None = None
        self.args = ["forked", str(pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            self.server.wait_for_news(0.05)
        assert self.returncode is not None
        return self.returncode


class ForkServer:
    """The harness's side: starts the server, asks it for workers, keeps
    the exit codes it reports. Safe to use from several threads."""

    def __init__(self, preload: list[str], log_path: Path) -> None:
        self._ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        argv = python_argv("harness.run.forkserver", str(os.getpid()), str(theirs.fileno()), *preload)
        self.proc = ManagedProcess("worker fork server", argv, log_path, env=env, pass_fds=(theirs.fileno(),))
        try:
            self.proc.start()
        except BaseException:
            self._ours.close()
            raise
        finally:
            theirs.close()
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._seq = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self._closed = False
        self._broken = False
        self.ready = threading.Event()
        self._got = threading.Condition(self._lock)  # notified on every reply, exit and the end
        threading.Thread(target=self._read, name="fork-server-replies", daemon=True).start()

    def wait_ready(self, timeout: float = _READY_TIMEOUT) -> bool:
        """Whether it serves; once it has not (its imports outlasted the
        timeout, or a request went unanswered), it never will again:
        workers start on their own, and no caller waits on it twice."""
        if not self.ready.wait(timeout):
            self._broken = True
        return not (self._closed or self._broken)

    def _read(self) -> None:
        try:
            while True:
                data = self._ours.recv(_MAX_MESSAGE)
                if not data:
                    break
                msg = json.loads(data)
                with self._lock:
                    if msg.get("ready"):
                        self.ready.set()
                    elif "exit" in msg:
                        self._exits[msg["exit"]] = msg["code"]
                        self._got.notify_all()
                    elif "id" in msg:
                        self._replies[msg["id"]] = msg
                        self._got.notify_all()
        except (OSError, ValueError):
            pass
        with self._lock:
            self._closed = True
            self._got.notify_all()
        self.ready.set()  # a waiter sees _closed

    def spawn(self, env: dict[str, str], log_path: Path, timeout: float) -> ForkedProcess:
        """A worker with this environment, its stderr appended to log_path."""
        if self._broken or self._closed:
            raise HarnessError("the worker fork server does not serve")
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            with self._lock:
                self._seq += 1
                seq = self._seq
            req = json.dumps({"id": seq, "env": env, "log": str(log_path)}).encode()
            with self._send_lock:
                socket.send_fds(self._ours, [req], [in_r, out_w])
        except OSError as e:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise HarnessError(f"the worker fork server is gone: {e}") from None
        os.close(in_r)
        os.close(out_w)
        deadline = time.monotonic() + timeout
        with self._lock:
            while seq not in self._replies and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._got.wait(left)
            reply = self._replies.pop(seq, None)
        if reply is None or "pid" not in reply:
            # Its workers run on (they would die with it); new ones start on their own.
            self._broken = True
            os.close(in_w)
            os.close(out_r)
            why = "no answer" if reply is None else reply.get("error")
            raise HarnessError(f"the worker fork server did not start a worker: {why}")
        return ForkedProcess(self, reply["pid"], open(in_w, "wb"), open(out_r, "rb"))

    def wait_for_news(self, timeout: float) -> None:
        """Until a reply or an exit arrives, or `timeout` seconds pass."""
        with self._lock:
            self._got.wait(timeout)

    def exit_code(self, pid: int) -> int | None:
        with self._lock:
            if pid in self._exits:
                return self._exits[pid]
            closed = self._closed
        if closed:
            # The server is gone and its workers with it (PR_SET_PDEATHSIG).
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return -signal.SIGKILL
        return None

    def close(self) -> None:
        try:
            self._ours.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.proc.stop(grace=2.0)
        self._ours.close()


# -- the server ----------------------------------------------------------------------------


def _child(req: dict[str, Any], fds: list[int], server: int) -> None:
    """The forked worker: its own session, pipes, log and environment, then
    the worker's main; never returns."""
    code = 1
    try:
        os.setsid()
        die_with_parent()
        if os.getppid() != server:  # the server died before the line above
            os._exit(1)
        log = os.open(req["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fds[0], 0)
        os.dup2(fds[1], 1)
        os.dup2(log, 2)
        for fd in (*fds, log):
            os.close(fd)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        os.environ.clear()
        os.environ.update(req["env"])
        code = worker_main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker's log says why; the harness sees it exit
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _reap(conn: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        try:
            conn.send(json.dumps({"exit": pid, "code": os.waitstatus_to_exitcode(status)}).encode())
        except OSError:
            return


def serve(fd: int, preload: list[str]) -> None:
    import gc
    import importlib

    conn = socket.socket(fileno=fd)
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - a worker then imports it itself, and fails there if it must
            print(f"fork server: could not import {name}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
    # Objects imported so far are never collected in a worker: a collection
    # would touch, and so copy, every page of them.
    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the harness stops it, in order
    conn.send(b'{"ready": true}')
    me = os.getpid()
    while True:
        ready, _, _ = select.select([conn], [], [], 0.1)
        _reap(conn)
        if not ready:
            continue
        try:
            msg, fds, _flags, _addr = socket.recv_fds(conn, _MAX_MESSAGE, 2)
        except OSError:
            return
        if not msg:
            return  # the harness closed its end
        req = json.loads(msg)
        try:
            pid = os.fork()
        except OSError as e:
            for f in fds:
                os.close(f)
            conn.send(json.dumps({"id": req["id"], "error": f"fork: {e}"}).encode())
            continue
        if pid == 0:
            conn.close()
            _child(req, fds, me)
        for f in fds:
            os.close(f)
        conn.send(json.dumps({"id": req["id"], "pid": pid}).encode())


if __name__ == "__main__":
    if os.getppid() != int(sys.argv[1]):  # the harness died before PR_SET_PDEATHSIG was set
        sys.exit(1)
    serve(int(sys.argv[2]), sys.argv[3:])
