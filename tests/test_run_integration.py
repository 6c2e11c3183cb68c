"""Real runs: real engines (Sail via PySpark, delta-rs) on real storage
(moto_server out of process, or a local directory)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness.core.procs import owned_tempdir
from tests.conftest import REPO, assert_valid_run_folder, load_results, only_run_dir, run_cli, still_running

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    "engine, storage, extra",
    [
        ("delta-rs", "local", []),
        ("delta-rs", "s3", []),
        ("sail", "s3", ["--nodes", "2"]),
        ("sail", "local", ["--nodes", "1"]),
        # delta-spark on a local directory: the register run in
        # test_workloads_integration, held to the same checks.
        # One JVM on S3 (inside the contract of delta-spark's default S3
        # LogStore) runs in test_external_s3_endpoint_from_the_standard_aws_environment.
        # Two JVMs: coordinated commits, the default where several clusters write.
        ("delta-spark", "s3", ["--nodes", "2"]),
    ],
)
def test_short_run_is_valid(engine: str, storage: str, extra: list[str], results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--engine",
        engine,
        "--storage",
        storage,
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        *extra,
    )
    run_dir, doc = assert_valid_run_folder(res, results_dir)
    assert {c["checker"]: c["verdict"] for c in doc["checkers"]} == {
        "log-sanity": "valid",
        "durability": "valid",
        "atomicity": "valid",
        "duplicates": "valid",
        "read-validity": "valid",
        "serializability": "valid",
        "exception-classes": "valid",
        "liveness": "valid",
    }
    spec = json.loads((run_dir / "spec.json").read_text())
    if engine == "delta-spark" and storage == "s3":
        # Two clusters on S3: coordinated commits, named, inside the contract,
        # and the coordinator's state kept beside the table.
        assert spec["spec"]["log_store"] == "coordinated"
        assert spec["commit_protocols"]["delta-spark"].startswith("coordinated commits")
        assert spec["contract"] == [] and doc["contract"]["inside"] is True
        assert doc["log"]["coordination"]["state_kept"] is True
        assert doc["log"]["coordination"]["ratified_version"] == doc["log"]["latest_version"]
        assert "coordinated commits" in res.stdout


def _descendants(pid: int) -> list[int]:
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize("engine", ["sail", "delta-rs", "delta-spark"])
def test_sigint_leaves_no_process_and_a_checkable_history(engine: str, results_dir: Path, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--engine",
            engine,
            "--nodes",
            "1",  # what is tested is the stop, not the node count
            "--concurrency",
            "3",
            "--time-limit",
            "120",
            "--results-dir",
            str(results_dir),
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        deadline = time.monotonic() + 120
        hist = None
        while time.monotonic() < deadline:
            runs = list(results_dir.glob("*/*/history.jsonl"))
            text = runs[0].read_text() if runs else ""
            # setup + 5 client ops, an append among them: a slow first append
            # can leave 5 reads of version 0 before any commit.
            if text.count('"type":"ok"') >= 6 and '"type":"ok","f":"append"' in text:
                hist = runs[0]
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        assert hist is not None, "the run made no progress"
        children = _descendants(proc.pid)
        assert children, "expected moto/Sail/worker processes"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    time.sleep(0.5)
    leftover = still_running(children)
    assert leftover == [], f"processes left after SIGINT: {leftover}"
    assert [p.name for p in scratch.iterdir() if p.name.startswith("dj-")] == [], "scratch dirs left after SIGINT"
    run_dir = hist.parent
    res = run_cli("check", str(run_dir))
    assert res.returncode in (0, 1, 3), res.stdout + res.stderr
    assert "interrupted" in res.stdout
    doc = load_results(run_dir)
    assert doc["history"]["ok"] >= 5
    assert doc["log"]["latest_version"] >= 1


@pytest.mark.integration
def test_sigkill_of_the_harness_leaves_no_jvm_and_the_next_start_removes_its_scratch(
    results_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--engine",
            "delta-spark",
            "--nodes",
            "1",  # one JVM shows what a SIGKILL leaves as well as two
            "--concurrency",
            "2",
            "--time-limit",
            "120",
            "--results-dir",
            str(results_dir),
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            runs = list(results_dir.glob("*/*/history.jsonl"))
            if runs and runs[0].read_text().count('"type":"ok"') >= 3:
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.2)
        else:
            pytest.fail("the run made no progress")
        children = _descendants(proc.pid)
        assert children, "expected JVM and worker processes"
        proc.kill()
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 15
    while still_running(children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert still_running(children) == [], "processes outlived a SIGKILLed harness"
    left = [p for p in scratch.iterdir() if p.name.startswith(f"dj-spark-n1-{proc.pid}-")]
    assert left, "expected the killed harness's JVM scratch dir (nothing could remove it)"
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    owned_tempdir("dj-spark-n1-")
    assert not any(p.exists() for p in left), "the next start left a dead harness's scratch dir"


def _worker_pids(pid: int) -> list[int]:
    """Client workers: started on their own, or forked by the run's worker
    fork server (its children; the server itself is no worker)."""
    out = []
    for p in psutil.Process(pid).children(recursive=True):
        try:
            parent = p.parent()
            forked = parent is not None and parent.pid != pid and "harness.run.forkserver" in " ".join(parent.cmdline())
            if "harness.run.worker_main" in " ".join(p.cmdline()) or forked:
                out.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def test_killed_worker_leaves_info_and_a_new_process_takes_over(results_dir: Path) -> None:
    """Jepsen's semantics: the in-flight op of a crashed process is info, and
    its slot continues under a new process id."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--engine",
            "delta-rs",
            "--storage",
            "local",
            "--concurrency",
            "2",
            "--time-limit",
            "12",
            "--results-dir",
            str(results_dir),
            "--no-progress",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            hist = list(results_dir.glob("*/*/history.jsonl"))
            if hist and hist[0].read_text().count('"type":"ok"') >= 10:
                break
            time.sleep(0.1)
        victims = _worker_pids(proc.pid)
        assert victims
        for _ in range(3):  # a few kills, so some land while an op is in flight
            for pid in _worker_pids(proc.pid):
                os.kill(pid, signal.SIGKILL)
            time.sleep(1.5)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out + err
    events = [json.loads(line) for line in hist[0].read_text().splitlines()]
    crashed = [e for e in events if e["type"] == "info" and e["error"]["class"] == "crash"]
    assert crashed, "a killed worker's in-flight op must be recorded info"
    procs = {e["process"] for e in events if isinstance(e["process"], int)}
    assert procs - {0, 1}, f"new process ids expected after crashes, saw {procs}"
    # After an op of process p is info, p never invokes again, and its slot
    # goes on under p + concurrency (2).
    retired = {e["process"] for e in crashed}
    assert all(p + 2 in procs for p in retired), (sorted(retired), sorted(procs))
    for p in retired:
        last_info = max(e["index"] for e in crashed if e["process"] == p)
        assert not [e for e in events if e["process"] == p and e["index"] > last_info]


def test_op_timeout_turns_hung_ops_into_info(results_dir: Path) -> None:
    # Sail ops take ~100 ms here; a 20 ms per-op timeout makes ops hang past it.
    res = run_cli(
        "run",
        "--engine",
        "sail",
        "--nodes",
        "1",
        "--concurrency",
        "2",
        "--time-limit",
        "8",
        "--op-timeout",
        "0.02",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode in (0, 3), res.stdout + res.stderr
    doc = load_results(only_run_dir(results_dir))
    assert doc["history"]["info"] > 0
    assert doc["history"]["error_classes"].get("timeout", 0) == doc["history"]["info"]
    # Indeterminate ops may or may not have committed: never a violation.
    assert doc["verdict"] != "invalid", doc


@pytest.mark.parametrize("engine", ["delta-rs", "delta-spark"])
def test_external_s3_endpoint_from_the_standard_aws_environment(engine: str, results_dir: Path, tmp_path: Path) -> None:
    """--storage external-s3 against an S3 server the user runs (here: a
    moto_server this test starts, standing in for MinIO)."""
    import boto3

    from harness.core.procs import ManagedProcess, venv_bin

    server = ManagedProcess(
        "moto", [venv_bin("moto_server"), "-H", "127.0.0.1", "-p", "0"], tmp_path / "moto.log"
    ).start()
    try:
        port = server.wait_for_log(r"Running on http://127\.0\.0\.1:(\d+)", 30).group(1)
        endpoint = f"http://127.0.0.1:{port}"
        env = {
            "AWS_ACCESS_KEY_ID": "user-key",
            "AWS_SECRET_ACCESS_KEY": "user-secret-xyz",
            "AWS_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
            "DJ_S3_BUCKET": "users-bucket",
        }
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="user-key",
            aws_secret_access_key="x",
            region_name="us-east-1",
        ).create_bucket(Bucket="users-bucket")
        res = run_cli(
            "run",
            "--engine",
            engine,
            "--storage",
            "external-s3",
            "--concurrency",
            "2",
            "--nodes",
            "1",
            "--time-limit",
            "3",
            "--results-dir",
            str(results_dir),
            "--no-progress",
            env=env,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        run_dir = only_run_dir(results_dir)
        assert load_results(run_dir)["history"]["ok"] > 0
        spec = (run_dir / "spec.json").read_text()
        assert "users-bucket" in spec
        for f in run_dir.rglob("*"):  # the secret is in no file of the run, logs included
            if f.is_file():
                assert b"user-secret-xyz" not in f.read_bytes(), f
        objs = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="user-key",
            aws_secret_access_key="x",
            region_name="us-east-1",
        ).list_objects_v2(Bucket="users-bucket")
        assert any("_delta_log/" in o["Key"] for o in objs.get("Contents", []))
    finally:
        server.stop()


def test_external_s3_without_credentials_is_bad_input(results_dir: Path) -> None:
    env = {k: "" for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    res = run_cli("run", "--storage", "external-s3", "--s3-bucket", "b", "--results-dir", str(results_dir), env=env)
    assert res.returncode == 2
    assert "AWS_ACCESS_KEY_ID" in res.stderr.strip().splitlines()[-1]
