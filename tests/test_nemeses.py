"""Nemeses and their schedule: unit tests against a fake cluster (real child
processes for the signals, a fake proxy), checker tests of indeterminate and
failed-but-committed ops, and short real runs per fault family."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import subprocess
import sys
import tarfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from checkers import atomicity
from harness.core.errors import HarnessError
from harness.core.history import FAIL, INFO, INVOKE, OK
from nemeses import NEMESIS_NAMES, PROXY_NEMESES, make_nemeses, parse_nemeses
from nemeses.base import ClientProc, Nemesis, NemesisContext, NemesisError
from nemeses.clock import ClockNemesis, libfaketime
from nemeses.pause import PauseNemesis
from nemeses.process import KillMidOpNemesis, KillNemesis
from nemeses.s3 import PartitionNemesis, UnsafePutNemesis
from nemeses.schedule import NemesisSchedule
from tests.conftest import REPO, assert_only_known_findings, load_results, only_run_dir, run_cli, still_running
from tests.synth import SynthRun

# --- fakes -------------------------------------------------------------------------


def _sleeper() -> subprocess.Popen:
    """A real child in its own session, as the harness starts its workers."""
    return subprocess.Popen(["sleep", "60"], start_new_session=True)


def _state(pid: int) -> str:
    return psutil.Process(pid).status()


class FakeCluster:
    """Two client workers (real `sleep` processes) and, optionally, one server
    node n1 (also a real process) that can be killed and restarted."""

    def __init__(self, with_server: bool = False):
        self.procs = {0: _sleeper(), 1: _sleeper()}
        self.node_of = {0: "n1", 1: "n2"}
        self.server = _sleeper() if with_server else None
        self.restarts: list[tuple[str, dict[str, str] | None]] = []
        self.env: dict[str, dict[str, str]] = {}
        self.crashed: list[int] = []

    def nodes(self) -> list[str]:
        return ["n1", "n2"]

    def clients(self) -> list[ClientProc]:
        # Every client is in the middle of a VACUUM (what kill-mid-op waits for).
        return [
            ClientProc(p, self.node_of[p % 2], proc.pid, "vacuum")
            for p, proc in sorted(self.procs.items())
            if proc.poll() is None
        ]

    def crash_client(self, process: int) -> bool:
        proc = self.procs.get(process)
        if proc is None or proc.poll() is not None:
            return False
        proc.kill()
        proc.wait(5)
        self.crashed.append(process)
        # The runner continues the slot under process + concurrency.
        self.procs[process + 2] = _sleeper()
        self.node_of[process + 2] = self.node_of[process % 2]
        del self.procs[process]
        return True

    def server_nodes(self) -> list[str]:
        return ["n1"] if self.server is not None else []

    def server_pid(self, node: str) -> int | None:
        return self.server.pid if self.server is not None else None

    def server_alive(self, node: str) -> bool:
        return self.server is not None and self.server.poll() is None

    def kill_server(self, node: str) -> int | None:
        assert self.server is not None
        self.server.kill()
        self.server.wait(5)
        return self.server.pid

    def restart_server(self, node: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait(5)
        self.server = _sleeper()
        self.restarts.append((node, env))
        return {"restarted": True, "pid": self.server.pid}

    def set_node_env(self, node: str, env: dict[str, str] | None) -> None:
        if env:
            self.env[node] = env
        else:
            self.env.pop(node, None)

    def close(self) -> None:
        for p in [*self.procs.values(), *([self.server] if self.server else [])]:
            try:
                os.killpg(p.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            p.kill()
            p.wait(5)


class FakeProxy:
    def __init__(self) -> None:
        self.rules: dict[int, dict[str, Any]] = {}
        self.next = 1
        self.heals = 0

    def add_fault(self, kind: str, target: dict[str, Any] | None = None, **params: Any) -> int:
        rid, self.next = self.next, self.next + 1
        self.rules[rid] = {"id": rid, "kind": kind, "target": target or {}, "params": params, "applied": 0}
        return rid

    def faults(self) -> list[dict[str, Any]]:
        return list(self.rules.values())

    def remove_fault(self, rid: int) -> None:
        if self.rules.pop(rid, None) is None:
            raise HarnessError("404")

    def heal(self) -> dict[str, Any]:
        n = len(self.rules)
        self.rules.clear()
        self.heals += 1
        return {"removed": n, "released": []}


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, **ev: Any) -> None:
        with self.lock:
            self.events.append(ev)


@pytest.fixture
def cluster():
    c = FakeCluster(with_server=True)
    yield c
    c.close()


def ctx_for(cluster: Any, seed: int = 7, proxy: Any = None) -> NemesisContext:
    return NemesisContext(random.Random(seed), cluster, proxy or FakeProxy(), "s3")  # type: ignore[arg-type]


def run_schedule(nemeses: list[Nemesis], ctx: NemesisContext, seconds: float, interval: float = 0.2) -> Recorder:
    rec = Recorder()
    sched = NemesisSchedule(nemeses, ctx, rec, interval).start()
    time.sleep(seconds)
    sched.stop_and_heal()
    sched.stop_and_heal()  # idempotent: teardown calls it again
    return rec


def pairs(events: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    """(f, completion type, value) per op, checking each invoke is followed
    by its own completion before anything else of the nemesis happens."""
    out = []
    assert len(events) % 2 == 0, events
    for inv, done in zip(events[::2], events[1::2], strict=True):
        assert inv["type"] == INVOKE and done["type"] in (OK, INFO), (inv, done)
        assert inv["id"] == done["id"] and inv["f"] == done["f"] and inv["process"] == "nemesis"
        out.append((inv["f"], done["type"], done.get("value")))
    return out


# --- registry and CLI validation -------------------------------------------------------


def test_registry_lists_every_family() -> None:
    assert set(NEMESIS_NAMES) == {
        "none",
        "kill",
        "kill-node",
        "kill-mid-op",
        "pause",
        "clock",
        "partition",
        "s3-errors",
        "latency",
        "ambiguous",
        "unsafe-put",
        "ambiguous-5xx",
        "ambiguous-late",
        "stale-list",
        "coordinator-down",
        "kill-after-ratify",
    }
    assert parse_nemeses("kill, pause,kill,none") == ["kill", "pause"]
    assert parse_nemeses(None) == []
    with pytest.raises(HarnessError, match="unknown nemesis 'flood'; valid: none, kill"):
        parse_nemeses("kill,flood")
    assert {n.name for n in make_nemeses(sorted(PROXY_NEMESES), "s3")} == PROXY_NEMESES


def test_cli_rejects_bad_nemesis_setups(tmp_path: Path) -> None:
    res = run_cli("run", "--nemesis", "kill,flood", "--results-dir", str(tmp_path), "--no-progress")
    assert res.returncode == 2 and "unknown nemesis 'flood'; valid:" in res.stderr
    assert "unsafe-put" in res.stderr
    res = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--nemesis",
        "kill,partition",
        "--results-dir",
        str(tmp_path),
        "--no-progress",
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "'partition' needs S3 storage" in res.stderr
    res = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--nemesis",
        "clock",
        "--results-dir",
        str(tmp_path),
        "--no-progress",
        env={"DJ_LIBFAKETIME": str(tmp_path / "nope.so")},
    )
    assert res.returncode == 2 and "Debian package: faketime" in res.stderr, res.stderr
    res = run_cli("run", "--nemesis-interval", "0", "--results-dir", str(tmp_path), "--no-progress")
    assert res.returncode == 2 and "must be > 0" in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was started, no run folder


# --- the schedule ------------------------------------------------------------------------


def test_schedule_records_paired_start_stop_events_in_order_and_heals(cluster: FakeCluster) -> None:
    ctx = ctx_for(cluster)
    rec = run_schedule([KillNemesis(), PauseNemesis(), UnsafePutNemesis()], ctx, 1.6)
    ops = pairs(rec.events)
    assert ops[-1][0] == "heal"
    faults = ops[:-1]
    assert len(faults) >= 6, ops
    # Alternation: start-X is followed by stop-X before any other start.
    # A fault in effect when the schedule ended has its start only (heal stopped it).
    for (f1, t1, _), (f2, _, _) in zip(faults[::2], faults[1::2], strict=False):
        assert f1.startswith("start-") and t1 == OK
        assert f2 == "stop-" + f1[len("start-") :]
    assert {f for f, _, _ in faults} >= {"start-kill", "start-pause", "start-unsafe-put"}
    # Healed: no process left stopped, no proxy rule left, the server runs.
    for p in [*cluster.procs.values(), cluster.server]:
        assert _state(p.pid) != psutil.STATUS_STOPPED
    assert ctx.proxy.rules == {} and ctx.proxy.heals == 1  # type: ignore[union-attr]
    assert cluster.server_alive("n1")
    # Every server kill was followed by a restart, recorded with its new pid.
    kills = [v for f, _, v in faults if f == "start-kill" and v["target"] == "node"]
    assert len(cluster.restarts) == len(kills)
    for f, _, v in faults:
        if f == "start-pause":
            assert v["signal"] == "SIGSTOP" and v["pid"] > 0
        if f == "stop-pause":
            assert v["signal"] == "SIGCONT"
        if f == "start-unsafe-put":
            assert v["kind"] == "strip-if-none-match" and v["target"] == {"method": "PUT", "path_class": "commit"}


def _shape(ops: list[tuple[str, str, Any]]) -> list[tuple[str, Any]]:
    """What a schedule did, without pids (they differ between runs)."""
    out = []
    for f, _, v in ops:
        v = dict(v or {})
        for k in ("pid", "alive"):
            v.pop(k, None)
        out.append((f, v.get("target"), v.get("process"), v.get("node")))
    return out


def test_schedule_is_deterministic_for_a_seed() -> None:
    shapes = []
    for _ in range(2):
        c = FakeCluster(with_server=True)
        try:
            rec = run_schedule([KillNemesis(), PauseNemesis(), PartitionNemesis()], ctx_for(c, seed=42), 1.3)
        finally:
            c.close()
        shapes.append(_shape(pairs(rec.events)[:-1]))
    n = min(map(len, shapes))
    assert n >= 4, shapes
    assert shapes[0][:n] == shapes[1][:n]
    c = FakeCluster(with_server=True)
    try:
        other = _shape(
            pairs(run_schedule([KillNemesis(), PauseNemesis(), PartitionNemesis()], ctx_for(c, seed=43), 1.3).events)[
                :-1
            ]
        )
    finally:
        c.close()
    assert other[:n] != shapes[0][:n]  # the seed is what fixes it


def test_heal_stops_the_fault_in_effect_and_continues_paused_processes(cluster: FakeCluster) -> None:
    ctx = ctx_for(cluster)
    rec = Recorder()
    pause = PauseNemesis()
    # A fault of 1 s: the checks below run while it is on, even on a busy
    # machine (with 0.2 s, the schedule's stop-pause came first under load).
    sched = NemesisSchedule([pause], ctx, rec, 2.0).start()
    deadline = time.monotonic() + 5
    while not any(e["f"] == "start-pause" and e["type"] == OK for e in rec.events):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pid = next(e["value"]["pid"] for e in rec.events if e["f"] == "start-pause" and e["type"] == OK)
    # SIGSTOP takes effect when the kernel next schedules the target: on a
    # loaded machine the state lags the signal by a moment (seen: "running").
    while _state(pid) != psutil.STATUS_STOPPED and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(pid) == psutil.STATUS_STOPPED
    assert not any(e["f"] == "stop-pause" for e in rec.events), "the fault ended before the check"
    sched.stop_and_heal()  # in the middle of the fault
    assert _state(pid) != psutil.STATUS_STOPPED
    fs = [f for f, _, _ in pairs(rec.events)]
    assert fs == ["start-pause", "stop-pause", "heal"]


def test_a_fault_that_cannot_be_applied_is_recorded_info_and_the_schedule_goes_on() -> None:
    class Broken(Nemesis):
        name = "broken"

        def start(self, ctx: NemesisContext) -> dict[str, Any]:
            raise NemesisError("no target")

        def stop(self, ctx: NemesisContext) -> dict[str, Any]:
            raise AssertionError("never started, never stopped")

    c = FakeCluster()
    try:
        ops = pairs(run_schedule([Broken()], ctx_for(c), 0.7).events)
    finally:
        c.close()
    assert len(ops) >= 3 and ops[-1][0] == "heal"
    assert all(f == "start-broken" and t == INFO and "no target" in v["error"] for f, t, v in ops[:-1])


def test_kill_of_a_client_and_of_a_server_node(cluster: FakeCluster) -> None:
    ctx = ctx_for(cluster, seed=1)
    kill = KillNemesis()
    seen = set()
    for _ in range(12):
        v = kill.start(ctx)
        seen.add(v["target"])
        if v["target"] == "node":
            assert not cluster.server_alive("n1")
        else:
            assert v["process"] in cluster.crashed
        w = kill.stop(ctx)
        assert cluster.server_alive("n1")
        if v["target"] == "node":
            assert w["restarted"] is True and w["pid"] == cluster.server.pid  # type: ignore[union-attr]
    assert seen == {"client", "node"}
    cluster.kill_server("n1")  # dead, whoever killed it: heal restarts it
    assert kill.heal(ctx) is not None and cluster.server_alive("n1")


class LateSeenCluster(FakeCluster):
    """Clients in a VACUUM that began `began` seconds after the first look
    (negative: before it), shown only from `shown` seconds on: what a
    nemesis thread sees when it runs late on a loaded machine."""

    def __init__(self, began: float, shown: float) -> None:
        super().__init__()
        self.first: float | None = None
        self.began, self.shown = began, shown

    def clients(self) -> list[ClientProc]:
        now = time.monotonic()
        self.first = self.first if self.first is not None else now
        if now - self.first < self.shown:
            return []
        return [
            dataclasses.replace(c, op_id=f"{c.process}.1", op_started=self.first + self.began)
            for c in super().clients()
        ]


def test_kill_mid_op_kills_an_op_it_sees_late_but_not_one_begun_before_the_fault() -> None:
    def ctx(cluster: FakeCluster) -> NemesisContext:
        return NemesisContext(
            random.Random(3), cluster, None, "local", 0.4, frozenset({"vacuum"}), kill_after=(0.0, 0.02)
        )

    late = LateSeenCluster(began=0.01, shown=0.1)
    try:
        v = KillMidOpNemesis().start(ctx(late))
        # Begun inside the fault's window, first seen 90 ms in: killed at once.
        assert v["target"] == "client" and v["process"] in late.crashed and v["after_s"] >= 0.08, v
    finally:
        late.close()
    old = LateSeenCluster(began=-1.0, shown=0.0)
    try:
        with pytest.raises(NemesisError, match="no client ran vacuum"):
            KillMidOpNemesis().start(ctx(old))
        assert old.crashed == []  # a second into it when the fault began: left alone
    finally:
        old.close()


def test_partition_targets_nodes_or_single_delta_rs_clients() -> None:
    c = FakeCluster(with_server=False)
    try:
        ctx = ctx_for(c, seed=3)
        targets = [PartitionNemesis().rule(ctx)[0] for _ in range(30)]
    finally:
        c.close()
    assert any("client" in t for t in targets) and any("node" in t for t in targets)
    assert all(t.get("client") in (None, "0", "1") for t in targets)
    sail = FakeCluster(with_server=True)
    sail.node_of = {0: "n1", 1: "n1"}  # every client on the Sail node: only whole nodes
    try:
        ctx = ctx_for(sail, seed=3)
        assert all("node" in PartitionNemesis().rule(ctx)[0] for _ in range(20))
    finally:
        sail.close()


def test_clock_skews_a_node_through_libfaketime(cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = libfaketime()
    if lib is None:
        pytest.skip("libfaketime not installed (Debian package faketime; run .ci/setup-debian)")
    ctx = ctx_for(cluster, seed=5)
    clock = ClockNemesis()
    seen = set()
    for _ in range(6):
        v = clock.start(ctx)
        seen.add(v["node"])
        if v["node"] == "n1":
            # The server runs under the skew; its clients (Spark Connect
            # clients, writing no time into the table) keep the real clock.
            node, env = cluster.restarts[-1]
            assert node == "n1" and cluster.env == {}
        else:
            env = cluster.env[v["node"]]
            assert v["workers_restarted"]  # its workers respawn under the skew
        assert env["LD_PRELOAD"] == lib and int(env["FAKETIME"]) == v["offset_s"] != 0
        assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_FORCE_MONOTONIC_FIX"] == "0"
        clock.stop(ctx)
        assert cluster.env == {}
        if v["node"] == "n1":
            assert cluster.restarts[-1] == ("n1", None)  # restarted without the skew
    assert seen == {"n1", "n2"}
    # The skew really moves the wall clock of a process started with it.
    out = subprocess.run(
        ["date", "+%s"],
        env={**os.environ, **{k: v for k, v in env.items()}, "FAKETIME": "+7200"},
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert abs(int(out.stdout) - time.time() - 7200) < 60


# --- checkers: indeterminate and failed ops ------------------------------------------------

CONFLICT = {"class": "commit-conflict-unclassified", "claim": None, "raw": "version 3 already exists"}


def test_failed_but_committed_names_the_op_its_error_and_version() -> None:
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20, type=FAIL, error=CONFLICT)
    v = run.commit_op("0.1", [1, 2])
    res = atomicity.check(*run.build())
    [a] = res.anomalies
    assert a.kind == "failed-but-committed" and a.claim == "C6" and a.ops == ["0.1"] and a.versions == [v]
    assert "version 3 already exists" in a.explanation and f"version {v}" in a.explanation
    assert a.details["error"]["class"] == "commit-conflict-unclassified"


def test_failed_but_committed_of_a_row_less_op_found_through_commit_info() -> None:
    run = SynthRun()
    run.invoke("0.1", "delete", {"where": "k < 3"}, time=10)
    run.complete("0.1", FAIL, time=20, error=CONFLICT)
    v = run.commit(op="0.1")
    res = atomicity.check(*run.build())
    assert [a.kind for a in res.anomalies] == ["failed-but-committed"]
    assert res.anomalies[0].versions == [v] and "commitInfo" in res.anomalies[0].explanation


def test_a_failed_op_absent_from_the_log_and_info_ops_resolved_from_the_log() -> None:
    run = SynthRun()
    run.append("0.1", [1], start=10, end=20, type=FAIL, error=CONFLICT)  # really failed
    run.append("1.1", [2], start=10, end=30, type=INFO)  # committed after all
    run.append("2.1", [3], start=10, end=30, type=INFO)  # did not commit
    run.append("3.1", [4], start=10, end=None)  # never completed, did not commit
    run.invoke("4.1", "delete", {"where": "k < 0"}, time=15)  # no rows, no trace: may have committed
    run.complete("4.1", INFO, time=40)
    run.commit_op("1.1", [2])
    res = atomicity.check(*run.build())
    assert res.anomalies == [], res.explanation
    assert res.stats["info_resolution"] == {"committed": 1, "not_committed": 2, "may_have_committed": 1}
    assert "1 committed (whole), 2 not committed, 1 unresolved (may have committed)" in res.explanation


def test_lost_write_names_the_commit_that_replaced_it() -> None:
    """An overwritten commit (unsafe-put): the op was told version 1, and the
    log's version 1 is another op's."""
    from checkers import durability

    run = SynthRun()
    run.append("0.1", [1], start=10, end=20, version=1)
    run.append("1.1", [2], start=11, end=21, version=1)
    run.commit_op("1.1", [2], tag=True)
    res = durability.check(*run.build())
    [a] = res.anomalies
    assert (a.kind, a.claim, a.ops, a.versions) == ("lost-write", "C7", ["0.1"], [1])
    assert "version 1 is op 1.1's commit" in a.explanation and "nothing refused a second commit" in a.explanation


# --- real runs ---------------------------------------------------------------------------------


def _watch(proc: subprocess.Popen, stop: threading.Event, seen: set[int]) -> None:
    """Every descendant the run ever had: workers respawn, nodes restart."""
    while not stop.is_set():
        try:
            seen.update(p.pid for p in psutil.Process(proc.pid).children(recursive=True))
        except psutil.NoSuchProcess:
            return
        stop.wait(0.2)


def nemesis_run(
    results_dir: Path, *args: str, timeout: float = 400, interrupt_after: float | None = None
) -> tuple[int, str, Path, set[int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", *args, "--results-dir", str(results_dir), "--no-progress"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: set[int] = set()
    stop = threading.Event()
    t = threading.Thread(target=_watch, args=(proc, stop, seen), daemon=True)
    t.start()
    try:
        if interrupt_after is not None:
            time.sleep(interrupt_after)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    t.join(5)
    time.sleep(0.5)
    leftover = still_running(seen)
    assert leftover == [], f"processes left after the run: {leftover}"
    assert seen, "the run started no child process"
    return proc.returncode, out + err, only_run_dir(results_dir), seen


def nemesis_ops(run_dir: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    nem = [e for e in events if e["process"] == "nemesis"]
    assert len(nem) % 2 == 0
    out = []
    for inv, done in zip(nem[::2], nem[1::2], strict=True):
        assert inv["type"] == INVOKE and inv["id"] == done["id"] and inv["f"] == done["f"], (inv, done)
        out.append((inv, done))
    return out


def assert_sound_run(code: int, output: str, run_dir: Path, concurrency: int = 4) -> dict[str, Any]:
    """Exit 0/1/3 (never 2, 130 or a hang); nemesis starts and stops paired
    and healed last; every slot's ops counted."""
    assert code in (0, 1, 3), output
    ops = nemesis_ops(run_dir)
    fs = [inv["f"] for inv, _ in ops]
    assert fs and fs[-1] == "heal", fs
    started = [inv["f"][len("start-") :] for inv, done in ops if inv["f"].startswith("start-") and done["type"] == OK]
    stopped = [inv["f"][len("stop-") :] for inv, done in ops if inv["f"].startswith("stop-")]
    assert started and started == stopped, fs
    doc = load_results(run_dir)
    h = doc["history"]
    assert h["nemesis"]["started"] and h["nemesis"]["healed"] is True
    assert "nemesis: " in (run_dir / "summary.txt").read_text()
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    client = [e for e in events if isinstance(e["process"], int)]
    done = [e for e in client if e["type"] != INVOKE]
    assert (
        h["ok"] + h["fail"] + h["info"]
        == len(done)
        == h["ops"] - sum(1 for e in client if e["type"] == INVOKE and e["id"] not in {d["id"] for d in done})
    )
    assert {e["process"] % concurrency for e in done} == set(range(concurrency))
    # The final phase ran after the heal: final reads come later in the history.
    heal_index = next(done["index"] for inv, done in ops if inv["f"] == "heal")
    finals = [e for e in client if e["type"] == OK and e["f"] == "read" and (e.get("value") or {}).get("final")]
    assert finals and all(e["index"] > heal_index for e in finals), "final reads before the heal"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["spec"]["nemesis"] and spec["spec"]["nemesis_interval"] > 0
    assert "--nemesis " in spec["repro"] and "--nemesis-interval" in spec["repro"]
    return doc


COMMON = (
    "--workload",
    "append",
    "--concurrency",
    "4",
    "--time-limit",
    "10",
    "--nemesis-interval",
    "2.5",
    "--op-timeout",
    "15",
)


@pytest.mark.integration
@pytest.mark.parametrize(
    "engine, storage, nemesis",
    [
        ("delta-rs", "s3", "kill,pause"),
        ("delta-rs", "s3", "s3-errors,latency,ambiguous,partition"),
        ("delta-rs", "s3", "clock"),
        ("sail", "s3", "kill,pause"),
    ],
)
def test_real_run_per_fault_family(engine: str, storage: str, nemesis: str, results_dir: Path) -> None:
    if "clock" in nemesis and libfaketime() is None:
        pytest.skip("libfaketime not installed (Debian package faketime; run .ci/setup-debian)")
    code, out, run_dir, _ = nemesis_run(
        results_dir, "--engine", engine, "--storage", storage, "--nemesis", nemesis, "--seed", "11", *COMMON
    )
    doc = assert_sound_run(code, out, run_dir)
    started = doc["history"]["nemesis"]["started"]
    assert set(started) <= set(nemesis.split(","))
    if engine in ("sail", "delta-spark"):
        _assert_killed_nodes_came_back(run_dir)
    if "s3" in storage and any(n in nemesis for n in PROXY_NEMESES):
        assert json.loads((run_dir / "spec.json").read_text())["storage"]["proxy"] is True
    # These faults keep put-if-absent: they explain no anomaly.
    assert_only_known_findings(doc, run_dir, engine)


# The faults that kill a server node, which their stop (or the heal) starts again.
KILLS = ("start-kill", "start-kill-after-ratify")


def _assert_killed_nodes_came_back(run_dir: Path) -> None:
    """A killed server node (a Sail server, a delta-spark JVM) was started
    again (new pid, own log), and clients of that node completed ops against
    it afterwards (at least its final read)."""
    ops = nemesis_ops(run_dir)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    for i, (inv, done) in enumerate(ops):
        if inv["f"] not in KILLS or done["type"] != OK or done["value"]["target"] != "node":
            continue
        node, name = done["value"]["node"], inv["f"][len("start-") :]
        stop = next(d for inv2, d in ops[i + 1 :] if inv2["f"] in (f"stop-{name}", "heal"))
        restart = stop["value"] if stop["f"] == f"stop-{name}" else stop["value"][name]["restarted"][node]
        assert restart["restarted"] is True and restart["pid"] != done["value"]["pid"]
        assert Path(restart["log"]).is_file() and ".r" in Path(restart["log"]).name
        after = [
            e
            for e in events
            if isinstance(e["process"], int) and e["node"] == node and e["type"] == OK and e["index"] > stop["index"]
        ]
        assert after, f"no op completed on {node} after its server was restarted"


# delta-spark: one Spark Connect JVM per node, two nodes, one client each
# (two JVMs and their clients already fill 2 cores). Measured here on a busy
# 2-core machine: a JVM restarted by a fault listens after 13-32 s, and its
# first op (no warm-up after a restart) took 11 s to over 30 s; hence longer
# op timeouts where a JVM restarts, so that the restarted node's first ops
# (and its final read, which the kill test needs) can complete. Seeds fix
# which faults happen: the schedule's draws depend only on the seed and on
# how many clients are alive.
DELTA_SPARK_RUNS: dict[str, tuple[str, ...]] = {
    # Seed 331: the first fault kills a node (a JVM) whatever the number of
    # live clients, and the next five are pauses (a JVM or a worker); so no
    # node is killed late in the run, which would leave a cold JVM for the
    # final read. Kill at 3 s, restart from 6 s (it took 13-32 s here), the
    # first pause 3 s after the restart: 45 s leave room for both.
    "kill,pause": ("--seed", "331", "--nemesis-interval", "6", "--time-limit", "45", "--op-timeout", "60"),
    # Seed 4: s3-errors on both nodes, latency on n2, ambiguous (commit PUTs
    # applied, their answers lost), a partition of n1, in that order, one
    # every 6 s (targets are whole nodes: a JVM holds one storage identity).
    # Ambiguous comes third, when both clients commit at their steady pace.
    "s3-errors,latency,ambiguous,partition": (
        "--seed",
        "4",
        "--nemesis-interval",
        "6",
        "--time-limit",
        "26",
        "--op-timeout",
        "15",
    ),
    # One skew: a node's JVM restarted under libfaketime at 6 s, restarted
    # without it 6 s after it listens (or by the heal at 30 s).
    "clock": ("--seed", "11", "--nemesis-interval", "12", "--time-limit", "30", "--op-timeout", "30"),
    # The commit coordinator's faults (coordinated commits, the default for
    # two JVMs). Seed 2: a JVM killed right after the coordinator ratified one
    # of its commits (at 4 s, started again at 8 s), then the coordinator
    # unreachable at 12 s and 20 s.
    "kill-after-ratify,coordinator-down": (
        "--seed",
        "2",
        "--nemesis-interval",
        "8",
        "--time-limit",
        "26",
        "--op-timeout",
        "60",
    ),
}


@pytest.mark.integration
@pytest.mark.parametrize("nemesis", list(DELTA_SPARK_RUNS))
def test_real_run_per_fault_family_on_delta_spark(nemesis: str, results_dir: Path) -> None:
    if "clock" in nemesis and libfaketime() is None:
        pytest.skip("libfaketime not installed (Debian package faketime; run .ci/setup-debian)")
    code, out, run_dir, _ = nemesis_run(
        results_dir,
        "--engine",
        "delta-spark",
        "--storage",
        "s3",
        "--nemesis",
        nemesis,
        "--workload",
        "append",
        "--concurrency",
        "2",
        *DELTA_SPARK_RUNS[nemesis],
    )
    doc = assert_sound_run(code, out, run_dir, concurrency=2)
    started = doc["history"]["nemesis"]["started"]
    assert set(started) <= set(nemesis.split(","))
    spec = json.loads((run_dir / "spec.json").read_text())
    assert [n["engine"] for n in spec["nodes"]] == ["delta-spark", "delta-spark"]
    ops = nemesis_ops(run_dir)
    applied = [
        (inv["f"][len("start-") :], done["value"])
        for inv, done in ops
        if inv["f"].startswith("start-") and done["type"] == OK
    ]
    if "kill" in nemesis.split(","):
        # The seed's first fault: a JVM killed, then started again and used.
        assert any(f == "kill" and v["target"] == "node" for f, v in applied), applied
        assert "pause" in started, started
    _assert_killed_nodes_came_back(run_dir)
    if any(n in nemesis for n in PROXY_NEMESES):
        assert spec["storage"]["proxy"] is True
        assert set(started) == set(nemesis.split(",")), started  # the seed's four faults
        stats = json.loads((run_dir / "logs" / "s3proxy-stats.json").read_text())
        assert sum(stats["faults"].values()) > 0, stats["faults"]  # faults met real requests
    if nemesis == "clock":
        _assert_jvm_restarts_ran_on_the_skewed_clock(run_dir)
    if "kill-after-ratify" in nemesis:
        _assert_a_ratified_commit_outlived_its_jvm(doc, applied)
    assert_only_known_findings(doc, run_dir, "delta-spark")


def _assert_a_ratified_commit_outlived_its_jvm(doc: dict[str, Any], applied: list[tuple[str, Any]]) -> None:
    """kill-after-ratify killed a JVM whose commit the coordinator had just
    ratified (the proxy held the answer to a ratifying UpdateItem, then the
    node was killed): the op it ran is indeterminate, and the log holds its
    commit, so the checkers resolve it as committed, whole."""
    kills = [v for f, v in applied if f == "kill-after-ratify"]
    assert kills and all(k["signal"] == "SIGKILL" and k["held"]["method"] == "UpdateItem" for k in kills), applied
    atomicity = next(c for c in doc["checkers"] if c["checker"] == "atomicity")
    assert atomicity["stats"]["info_resolution"]["committed"] >= 1, atomicity["explanation"]
    assert doc["log"]["coordination"]["state_kept"] is True


SPARK_STARTED = re.compile(
    r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}) INFO SparkConnectServer: "
    r"Spark Connect server started at",
    re.M,
)


def _assert_jvm_restarts_ran_on_the_skewed_clock(run_dir: Path) -> None:
    """The clock nemesis restarted a delta-spark JVM under libfaketime, and
    that JVM really ran (it started its Spark Connect server) on the skewed
    clock: its log's own timestamp of that line is the real time of the
    restart plus the offset. The restart that ends the skew is on real time."""
    ops = nemesis_ops(run_dir)
    restarts = []  # (invoke wall, completion wall, offset, restart)
    for inv, done in ops:
        if done["type"] != OK:
            continue
        v = done["value"] or {}
        if inv["f"] in ("start-clock", "stop-clock") and "server" in v:
            restarts.append((inv["wall"], done["wall"], v["offset_s"], v["server"]))
        elif inv["f"] == "heal" and "server" in v.get("clock", {}):
            restarts.append((inv["wall"], done["wall"], 0, v["clock"]["server"]))
    offsets = [off for _, _, off, _ in restarts]
    assert offsets and offsets[0] != 0 and offsets[-1] == 0, restarts  # skewed, then back
    for t0, t1, offset, restart in restarts:
        assert restart["restarted"] is True
        m = SPARK_STARTED.search(Path(restart["log"]).read_text(errors="replace"))
        assert m, f"no start line in {restart['log']}"
        logged = datetime.strptime(m.group(1), "%y/%m/%d %H:%M:%S.%f").timestamp()  # the JVM's local time
        assert t0 + offset - 2 <= logged <= t1 + offset + 2, (m.group(0), t0, t1, offset)


@pytest.mark.integration
def test_sigint_during_a_pause_continues_and_stops_everything(results_dir: Path) -> None:
    """Ctrl-C in the middle of the run: exit 130, the partial history
    checked, nothing left behind (and so nothing left SIGSTOPped)."""
    code, out, run_dir, seen = nemesis_run(
        results_dir,
        "--engine",
        "delta-rs",
        "--storage",
        "s3",
        "--nemesis",
        "pause",
        "--nemesis-interval",
        "1",
        "--workload",
        "append",
        "--concurrency",
        "2",
        "--time-limit",
        "60",
        interrupt_after=22,
    )
    assert code == 130, out
    fs = [inv["f"] for inv, _ in nemesis_ops(run_dir)]
    assert "start-pause" in fs and fs[-1] == "heal", fs


@pytest.mark.integration
@pytest.mark.parametrize(("engine", "storage"), [("delta-rs", "s3"), ("sail", "seaweedfs")])
def test_unsafe_put(engine: str, storage: str, results_dir: Path) -> None:
    """Commit PUTs without If-None-Match: an engine that relies on
    put-if-absent alone lets a writer overwrite another's commit, and the
    durability checker must report the acknowledged write lost (spec C7).
    On SeaweedFS the store's own log shows each commit file so replaced;
    the fault, not the store, explains them, and the loss stays reported."""
    code, out, run_dir, _ = nemesis_run(
        results_dir,
        "--engine",
        engine,
        "--storage",
        storage,
        "--nemesis",
        "unsafe-put",
        "--seed",
        "5",
        "--workload",
        "append",
        "--concurrency",
        "4",
        "--time-limit",
        "15",
        "--nemesis-interval",
        "2",
    )
    doc = assert_sound_run(code, out, run_dir)
    stats = json.loads((run_dir / "logs" / "s3proxy-stats.json").read_text())
    stripped = stats["faults"].get("strip-if-none-match", 0)
    durability = next(c for c in doc["checkers"] if c["checker"] == "durability")
    # Both engines commit with If-None-Match (put-if-absent) and nothing else:
    # stripped, a racing writer's commit replaces another's (measured: delta-rs
    # 1.6.6 lost 3 of 35 and Sail 0.7.2 2 of 28 acknowledged appends in such runs).
    assert stripped > 0 and stats["if_none_match_puts"] > 0, stats
    assert durability["verdict"] == "invalid", out
    lost = [a for a in durability["anomalies"] if a["kind"] == "lost-write"]
    assert lost and all(a["claim"] == "C7" for a in lost), out
    # The commit that replaced another is a whole commit of its own op: the
    # log stays contiguous and parseable (what was lost is only the overwritten one).
    sanity = next(c for c in doc["checkers"] if c["checker"] == "log-sanity")
    assert sanity["verdict"] == "valid", out
    replaced = doc["store_replaced_commits"]
    if storage != "seaweedfs":
        assert replaced is None
        return
    # Each replacing write lost one op's commit, acknowledged or not (a
    # version written three times lost two).
    assert replaced["read"] is True and len(replaced["replacements"]) >= len(lost), replaced
    assert sorted({r["version"] for r in replaced["replacements"]}) == replaced["versions"], replaced
    assert all(v <= doc["log"]["latest_version"] for v in replaced["versions"]), replaced
    assert replaced["anomalies_excused"] == 0 and "outside the contract" in replaced["not_excused_because"]
    assert "the store's own log shows the commit file of version(s) " in out, out
    # The report says it too, where a person reads the run.
    from tests.browser import chromium_path, static_server, visit

    chromium_path()
    with static_server(run_dir) as base:
        v = visit(f"{base}/report.html", run_dir.parent / "report.png", ["#store-replaced", "#outside-contract"])
    assert not v.console_errors and not v.page_errors, (v.console_errors, v.page_errors)
    assert v.counts == {"#store-replaced": 1, "#outside-contract": 1}, v.counts


def _stored(name: str, dest: Path) -> Path:
    """A real run folder kept in tests/fixtures (tar.gz), unpacked at `dest`."""
    dest.mkdir()
    with tarfile.open(REPO / "tests" / "fixtures" / f"{name}.tar.gz") as tar:
        tar.extractall(dest, filter="data")
    return dest


@pytest.mark.parametrize(
    ("fixture", "known"),
    [
        # Two delta-spark JVMs on S3SingleDriverLogStore: op 0.2's commit of version 1 replaced by n2's.
        ("two-jvm-single-driver", "delta-spark:C7,C11:single-driver-lost-commit"),
        # Coordinated commits under `ambiguous`: txn e7df90a0 at versions 3, 4 and 6, and four more such.
        ("coordinator-ambiguous", "delta-spark:C4,C6:coordinator-commits-again"),
    ],
)
def test_a_fault_run_is_known_only_with_the_evidence_of_each_anomaly(
    fixture: str, known: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard the real fault runs use, on real stored runs: each shows one
    known delta-spark deviation, named by the xfail; the same run with one
    more anomaly planted fails; a delta-rs run may show none of them."""
    from harness.check.pipeline import check_run
    from tests.known import PLANT_ENV

    run = _stored(fixture, tmp_path / "run")
    doc = check_run(run).doc
    with pytest.raises(pytest.xfail.Exception, match=re.escape(f"[{known}]")):
        assert_only_known_findings(doc, run, "delta-spark")
    with pytest.raises(AssertionError, match="no known deviation explains"):
        assert_only_known_findings(doc, run, "delta-rs")
    monkeypatch.setenv(PLANT_ENV, "log-in-commit-timestamp")
    with pytest.raises(AssertionError, match="log-in-commit-timestamp"):
        assert_only_known_findings(doc, run, "delta-spark")


def test_each_anomaly_needs_its_own_evidence(tmp_path: Path) -> None:
    """One anomaly stripped of its evidence is no longer excused, whatever
    the others show: the evidence is matched anomaly by anomaly."""
    from harness.check.pipeline import check_run

    run = _stored("coordinator-ambiguous", tmp_path / "run")
    doc = check_run(run).doc
    dups = [a for c in doc["checkers"] for a in c["anomalies"] if a["kind"] == "duplicate-commit"]
    assert len(dups) >= 2
    dups[-1]["details"].pop("same_transaction")
    with pytest.raises(AssertionError, match="different transaction ids"):
        assert_only_known_findings(doc, run, "delta-spark")
    # And without the fault that explains them, none is.
    (run / "logs" / "s3proxy-stats.json").write_text(json.dumps({"faults": {"latency": 3}}))
    doc = check_run(run).doc
    with pytest.raises(AssertionError, match="no ambiguous fault was applied"):
        assert_only_known_findings(doc, run, "delta-spark")
