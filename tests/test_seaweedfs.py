"""SeaweedFS (`weed mini`) as the embedded S3 store: loopback only, atomic
put-if-absent, no process left behind, real runs on it, and a run whose
harness was SIGKILLed still judged from the data it left in its folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.run.storage import SeaweedS3
from harness.run.weed_metalog import replaced_objects
from tests.conftest import REPO, load_results, only_run_dir, run_cli, still_running
from tests.known import SEAWEED_DOUBLE_WIN


@pytest.fixture(scope="module")
def weed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedS3]:
    storage = SeaweedS3(tmp_path_factory.mktemp("weed-run"), prefix="t/")
    try:
        yield storage
    finally:
        storage.stop()


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def test_every_listening_socket_is_loopback(weed: SeaweedS3) -> None:
    assert weed.server.proc is not None and weed.server.proc.pid is not None
    listening = [
        (p.pid, c.laddr)
        for p in _tree(weed.server.proc.pid)
        for c in p.net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    # master, volume, filer, S3 and admin, each with its gRPC port
    assert len(listening) >= 8, listening
    assert all(addr.ip == "127.0.0.1" for _, addr in listening), listening
    assert weed.endpoint.startswith("http://127.0.0.1:")


def test_racing_put_if_absent_has_one_winner(weed: SeaweedS3) -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "s3", config=Config(max_pool_connections=64, retries={"max_attempts": 1}), **weed.reader_options()
    )
    racers, rounds, overlap = 8, 20, 5
    # SeaweedFS makes the losers of a race wait for its per-key lock, polled
    # once a second (1-4 s a round here): rounds on different keys overlap,
    # `overlap` at a time, and each key still has its 8 racers.
    outcomes = {r: [""] * racers for r in range(rounds)}

    def put(r: int, i: int, barrier: threading.Barrier) -> None:
        barrier.wait()
        try:
            client.put_object(Bucket=weed.bucket, Key=f"t/race/{r}", Body=f"racer {i}".encode(), IfNoneMatch="*")
            outcomes[r][i] = "won"
        except client.exceptions.ClientError as e:
            outcomes[r][i] = e.response["Error"]["Code"]

    t0 = time.time()
    for first in range(0, rounds, overlap):
        threads = []
        for r in range(first, min(first + overlap, rounds)):
            barrier = threading.Barrier(racers)
            threads += [threading.Thread(target=put, args=(r, i, barrier)) for i in range(racers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    # The filer's own metadata log: which key a second create replaced.
    replaced = {
        x.path
        for x in replaced_objects(weed.server.filer_address(), f"/buckets/{weed.bucket}/t/race/", time.time() - t0)
    }
    doubles = []
    for r, got in outcomes.items():
        assert set(got) <= {"won", "PreconditionFailed", "ConditionalRequestConflict"}, (r, got)
        winners = [i for i, x in enumerate(got) if x == "won"]
        assert winners, (r, got)
        body = client.get_object(Bucket=weed.bucket, Key=f"t/race/{r}")["Body"].read()
        assert body in {f"racer {i}".encode() for i in winners}, (r, body, got)
        # A key the store says it replaced is one two racers won, and no other.
        path = f"/buckets/{weed.bucket}/t/race/{r}"
        assert (path in replaced) == (len(winners) > 1), (r, got, sorted(replaced))
        if len(winners) > 1:
            doubles.append(f"round {r + 1}: racers {winners} all acknowledged")
    if doubles:
        # SeaweedFS's defect, not the harness's: seen once in about 700 rounds.
        pytest.xfail(f"{SEAWEED_DOUBLE_WIN}: {len(doubles)} of {rounds} rounds ({'; '.join(doubles)})")


def test_the_filer_log_shows_an_overwrite_and_not_a_tag_update_or_a_new_key(weed: SeaweedS3) -> None:
    client = weed.boto3_client()
    t0 = time.time()
    client.put_object(Bucket=weed.bucket, Key="t/meta/kept", Body=b"one")
    client.put_object(Bucket=weed.bucket, Key="t/meta/overwritten", Body=b"one")
    client.put_object(Bucket=weed.bucket, Key="t/meta/overwritten", Body=b"two")
    client.put_object(Bucket=weed.bucket, Key="t/meta/tagged", Body=b"one")
    client.put_object_tagging(Bucket=weed.bucket, Key="t/meta/tagged", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
    got = replaced_objects(weed.server.filer_address(), f"/buckets/{weed.bucket}/t/meta/", time.time() - t0)
    assert [x.path for x in got] == [f"/buckets/{weed.bucket}/t/meta/overwritten"], got
    assert got[0].old_fids != got[0].new_fids and got[0].ts_ns > t0 * 1e9


def test_stop_leaves_no_process_and_keeps_the_data(tmp_path: Path) -> None:
    storage = SeaweedS3(tmp_path, prefix="t/")
    stopped = False
    try:
        assert storage.server.proc is not None and storage.server.proc.pid is not None
        pids = [p.pid for p in _tree(storage.server.proc.pid)]
        storage.boto3_client().put_object(Bucket=storage.bucket, Key="t/kept", Body=b"kept")
        # No secret in what the run folder keeps (describe() goes to spec.json).
        assert storage._run_secret not in json.dumps(storage.describe())
        assert "delta-jepsen-secret" not in json.dumps(storage.describe())
        storage.stop()
        stopped = True
        assert still_running(pids) == []
    finally:
        if not stopped:
            storage.stop()
    # The data stays in the run folder: a fresh server on it still has it.
    again = SeaweedS3(tmp_path, prefix="t/")
    try:
        assert again.boto3_client().get_object(Bucket=again.bucket, Key="t/kept")["Body"].read() == b"kept"
    finally:
        again.stop()


def _assert_valid(res: subprocess.CompletedProcess[str], results_dir: Path) -> Path:
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict: VALID" in res.stdout
    run_dir = only_run_dir(results_dir)
    doc = load_results(run_dir)
    assert doc["verdict"] == "valid" and doc["history"]["ok"] > 0
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["storage"]["kind"] == "seaweedfs" and spec["storage"]["data_dir"] == "seaweedfs"
    assert (run_dir / "logs" / "seaweedfs.log").is_file() and (run_dir / "seaweedfs").is_dir()
    for f in run_dir.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl", ".txt", ".options"):
            assert "delta-jepsen-secret" not in f.read_text(errors="replace"), f
    return run_dir


@pytest.mark.integration
@pytest.mark.parametrize(
    "engine, workload, extra",
    [
        ("delta-rs", "append", []),
        ("sail", "append", []),
        ("delta-rs", "register", []),
        # One JVM: inside the contract of delta-spark's default S3 LogStore.
        # S3A's chunk-signed uploads reach SeaweedFS through the proxy, which
        # decodes them (SeaweedFS without logins refuses them).
        ("delta-spark", "append", ["--nodes", "1"]),
    ],
)
def test_short_run_on_seaweedfs_is_valid(engine: str, workload: str, extra: list[str], results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--engine",
        engine,
        "--workload",
        workload,
        "--storage",
        "seaweedfs",
        "--concurrency",
        "4",
        "--time-limit",
        "5",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        *extra,
    )
    _assert_valid(res, results_dir)
    # The store's own log of replaced commit files was read (none replaced: the run is valid).
    replaced = load_results(only_run_dir(results_dir))["store_replaced_commits"]
    assert replaced["read"] is True and replaced["versions"] == [], replaced
    if engine == "delta-spark":
        spec = json.loads((only_run_dir(results_dir) / "spec.json").read_text())
        assert spec["storage"]["proxy"] is True and spec["spec"]["s3_proxy"] is True


def _ok_appends(history: Path) -> int:
    n = 0
    for line in history.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line being written
        n += e.get("type") == "ok" and e.get("f") == "append"
    return n


def _weed_pids() -> set[int]:
    return {p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "weed"}


def _cmdline(pid: int) -> list[str]:
    try:
        p = psutil.Process(pid)
        return [] if p.status() == psutil.STATUS_ZOMBIE else p.cmdline()
    except psutil.Error:
        return []


@pytest.mark.integration
def test_sigkilled_harness_leaves_no_weed_and_check_judges_the_data(results_dir: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--engine",
            "delta-rs",
            "--storage",
            "seaweedfs",
            "--time-limit",
            "30",
            "--results-dir",
            str(results_dir),
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        deadline = time.monotonic() + 90
        ours: list[int] = []
        while time.monotonic() < deadline:
            runs = list(results_dir.glob("*/*/history.jsonl"))
            # Three acknowledged appends, so the store holds commits to lose
            # (five ok reads alone once left only version 0 to judge).
            if runs and _ok_appends(runs[0]) >= 3:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the run made no progress")
        ours = [p.pid for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "weed"]
        assert ours, "expected a weed process under the harness"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # PDEATHSIG takes weed down with the harness.
    deadline = time.monotonic() + 10
    while still_running(ours) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert still_running(ours) == []
    run_dir = only_run_dir(results_dir)
    assert not (run_dir / "table").exists()  # the harness died before copying it
    checked_at = time.time()  # the recovery reads the store's log after this
    res = run_cli("check", str(run_dir))
    assert res.returncode in (0, 1), res.stdout + res.stderr
    assert "No transaction log" not in res.stdout, res.stdout
    doc = load_results(run_dir)
    assert doc["log"]["latest_version"] >= 1
    assert doc["verdict"] in ("valid", "invalid"), doc["verdict"]
    assert (run_dir / "logs" / "seaweedfs-recover.log").is_file()
    # With no run.json, what the recovery read of the store's own log is what check reports.
    assert not (run_dir / "run.json").exists()
    replaced = doc["store_replaced_commits"]
    assert replaced["read"] is True, replaced
    # It read back to before the run created its table, not only the recovery's own minutes.
    assert replaced["window_s"] >= checked_at - (run_dir / "spec.json").stat().st_mtime, replaced
    # Neither the run's weed nor the one the check started runs on.
    assert [pid for pid in _weed_pids() if str(run_dir) in " ".join(_cmdline(pid))] == []


@pytest.mark.integration
def test_bench_storage_prints_ops_per_second_and_ratios_per_store() -> None:
    """The figures are the benchmark's to report (README, "Object stores");
    the test checks that each store ran and a ratio to local is printed."""
    import re

    res = run_cli(
        "bench-storage", "--workloads", "append", "--time-limit", "1", "--concurrency", "2", "--profile", timeout=600
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (row,) = [line for line in res.stdout.splitlines() if line.strip().startswith("delta-rs")]
    assert re.fullmatch(r"\s*delta-rs\s+append(\s+\d+\.\d){3}(\s+\d+\.\d\d){2}\s*", row), res.stdout
    # --profile: each S3 store behind the proxy, with the store's time per op
    # and per request class (a commit is a PUT of _delta_log/<v>.json).
    for store in ("moto", "seaweedfs"):
        (prof,) = [line for line in res.stdout.splitlines() if re.match(rf"\s*{store}\s+\d", line)]
        assert re.fullmatch(rf"\s*{store}(\s+\d+\.\d){{1}}\s+\d+\.\d\d(\s+\d+\.\d){{2}}\s+\d+%\s*", prof), res.stdout
    assert len(re.findall(r"^\s+PUT commit\s+\d+\.\d\d/op\s+\d+\.\d ms", res.stdout, re.M)) == 2, res.stdout
    assert re.search(r"moto as shipped: \d+\.\d ops/s; the harness's moto does \d+\.\d\dx that", res.stdout), res.stdout
    bad = run_cli("bench-storage", "--workloads", "nope")
    assert bad.returncode == 2 and "valid:" in bad.stderr and "Traceback" not in bad.stderr
