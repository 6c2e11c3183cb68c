"""The worker fork server: real delta-rs workers on a local table, forked
from one process that imported their libraries, each in a session of its
own, reaped with their exit codes; gone with the server; and a worker
started on its own when the server is not there."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from harness.run.forkserver import ForkServer
from harness.run.plan import RunSpec, TestPlan
from harness.run.storage import open_storage
from harness.run.workers import Worker, WorkerDied
from tests.conftest import still_running

pytestmark = pytest.mark.integration


def _worker(tmp_path: Path, process: int, forks: ForkServer | None, extra_env: dict[str, str] | None = None) -> Worker:
    plan = TestPlan.build(RunSpec(workload="append", engine="delta-rs", storage="local", seed=1))
    storage = open_storage("local", tmp_path, prefix="t/")
    (node,) = plan.engine.start_nodes(1, storage, tmp_path / "logs", 30)
    cfg = plan.engine.client_config(node, process, storage, storage.table_uri("table"), 30)
    return Worker(cfg, "append", 1, None, plan.table, tmp_path / "logs" / f"worker-{process}.log", extra_env, forks)


def test_workers_are_forked_run_ops_and_exit_with_their_codes(tmp_path: Path) -> None:
    forks = ForkServer(["deltalake", "pyarrow"], tmp_path / "logs" / "fork-server.log")
    try:
        assert forks.wait_ready(60)
        server = forks.proc.pid
        a, b = _worker(tmp_path, 0, forks).start(60), _worker(tmp_path, 1, forks).start(60)
        for w in (a, b):
            p = psutil.Process(w.pid)
            assert p.ppid() == server  # forked, not started on its own
            assert os.getpgid(w.pid) == w.pid  # a session of its own: stopped by process group
        assert a.call({"f": "create-table", "id": "setup.1", "value": None}, 60)["type"] == "ok"
        reply = b.call({"f": "append", "id": "1.1", "value": {"ids": [1, 2], "via": "sql"}}, 60)
        assert reply["type"] == "ok", reply
        a.stop()
        assert a.proc.proc is not None and a.proc.proc.returncode == 0  # STOP: main returned 0
        b.crash()
        assert b.proc.proc is not None and b.proc.proc.wait(10) == -signal.SIGKILL
        with pytest.raises(WorkerDied):
            b.call({"f": "read", "id": "1.2", "value": None}, 10)
        b.kill()
        # The server's own process group holds no worker: stopping it stops only it.
        assert {c.pid for c in psutil.Process(server).children()} == set()
    finally:
        forks.close()


def test_workers_die_with_the_server_and_start_on_their_own_without_it(tmp_path: Path) -> None:
    forks = ForkServer(["deltalake"], tmp_path / "logs" / "fork-server.log")
    try:
        assert forks.wait_ready(60)
        w = _worker(tmp_path, 0, forks).start(60)
        os.kill(forks.proc.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while still_running([w.pid]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert still_running([w.pid]) == []  # PR_SET_PDEATHSIG: no orphan
        assert w.proc.proc is not None and w.proc.proc.wait(5) is not None
        w.kill()
        # The server is gone: the next worker is started on its own.
        again = _worker(tmp_path, 1, forks).start(60)
        try:
            assert "harness.run.worker_main" in " ".join(psutil.Process(again.pid).cmdline())
            assert again.call({"f": "create-table", "id": "setup.1", "value": None}, 60)["type"] == "ok"
        finally:
            again.stop()
        # An environment that must act at exec (the clock nemesis's
        # LD_PRELOAD) is never given to a forked worker.
        live = ForkServer(["deltalake"], tmp_path / "logs" / "fork-server-2.log")
        try:
            assert live.wait_ready(60)
            own = _worker(tmp_path, 2, live, extra_env={"DJ_TEST_MARK": "1"}).start(60)
            try:
                assert psutil.Process(own.pid).ppid() != live.proc.pid
            finally:
                own.stop()
        finally:
            live.close()
    finally:
        forks.close()
