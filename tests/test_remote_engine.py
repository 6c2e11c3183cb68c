"""--engine spark-connect: existing Spark Connect endpoints, nothing started."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from harness.core.errors import HarnessError
from tests.conftest import REPO, connect_servers, load_results, only_run_dir, run_cli, still_running

NO_ENV = {"DJ_SPARK_REMOTE": ""}  # a remote in the caller's environment must not leak in


def _closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _exit_2_one_line(res, needle: str) -> None:
    assert res.returncode == 2, (res.stdout, res.stderr)
    err = [line for line in res.stderr.strip().splitlines() if not line.startswith("run: ")]
    assert len(err) == 1, res.stderr
    assert needle in err[0], err[0]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--engine", "spark-connect", "--spark-remote", "http://127.0.0.1:15002"], "bad URL 'http://127.0.0.1:15002'"),
        (["--engine", "spark-connect", "--spark-remote", "sc://127.0.0.1"], "bad URL"),
        (["--engine", "spark-connect", "--spark-remote", "sc://127.0.0.1:99999"], "bad URL"),
        (["--engine", "spark-connect", "--spark-remote", "sc://h:1/path"], "bad URL"),
        (["--engine", "spark-connect", "--spark-remote", "sc://h:1/;token=secret"], "SPARK_CONNECT_AUTHENTICATE_TOKEN"),
        (["--engine", "spark-connect"], "--engine spark-connect needs --spark-remote"),
        (
            ["--engine", "delta-rs", "--spark-remote", "sc://127.0.0.1:15002"],
            "--spark-remote is for --engine spark-connect",
        ),
        (
            ["--engine", "spark-connect", "--spark-remote", "sc://127.0.0.1:15002", "--storage", "s3"],
            "cannot use --storage s3",
        ),
        (
            ["--engine", "spark-connect", "--spark-remote", "sc://127.0.0.1:15002", "--nemesis", "clock"],
            "--nemesis clock cannot skew a spark-connect node",
        ),
        (
            [
                "--engine",
                "spark-connect",
                "--spark-remote",
                "sc://127.0.0.1:15002",
                "--storage",
                "external-s3",
                "--nemesis",
                "partition",
            ],
            "cannot act on spark-connect",
        ),
    ],
)
def test_bad_remote_input_is_one_line_exit_2(args: list[str], needle: str, results_dir: Path) -> None:
    if "--storage" not in args:
        args = [*args, "--storage", "local"]
    res = run_cli("run", *args, "--results-dir", str(results_dir), "--no-progress", timeout=60, env=NO_ENV)
    _exit_2_one_line(res, needle)
    assert not list(results_dir.iterdir()), "refused before any run folder"


def test_an_unreachable_remote_is_exit_2_before_any_worker(results_dir: Path) -> None:
    url = f"sc://127.0.0.1:{_closed_port()}"
    res = run_cli(
        "run",
        "--engine",
        "spark-connect",
        "--spark-remote",
        url,
        "--storage",
        "local",
        "--time-limit",
        "1",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        timeout=60,
        env=NO_ENV,
    )
    _exit_2_one_line(res, f"spark-connect: cannot reach {url}: ")
    assert not list(results_dir.glob("*/*/logs/worker-*.log"))


def test_matrix_and_conformance_leave_spark_connect_out(results_dir: Path) -> None:
    res = run_cli("matrix", "--engines", "sail,spark-connect", "--results-dir", str(results_dir), timeout=60)
    _exit_2_one_line(res, "matrix cannot run spark-connect")
    res = run_cli("matrix", "--engines", "nope", "--results-dir", str(results_dir), timeout=60)
    _exit_2_one_line(res, "valid: delta-spark, sail, delta-rs")
    assert "spark-connect" not in res.stderr, "`all` would not include it"
    res = run_cli("conformance", "--engine", "spark-connect", "--results-dir", str(results_dir), timeout=60)
    _exit_2_one_line(res, "unknown engine 'spark-connect'")


def test_nodes_take_the_remotes_round_robin_and_nothing_is_started(tmp_path: Path) -> None:
    from harness.engines import make_client, make_engine
    from harness.engines.spark import DeltaSparkClient
    from harness.run.storage import LocalStorage

    listeners = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    try:
        urls = [f"sc://127.0.0.1:{s.getsockname()[1]}" for s in listeners]
        engine = make_engine("spark-connect", remotes=urls, log_store="dynamodb")  # delta-spark's options ignored
        storage = LocalStorage(tmp_path / "tables")
        nodes = engine.start_nodes(3, storage, tmp_path / "logs", timeout=5, first=4)
        assert [(n.name, n.url, n.pid) for n in nodes] == [
            ("n4", urls[0], None),
            ("n5", urls[1], None),
            ("n6", urls[0], None),
        ]
        assert engine.server("n4") is None  # kill/pause find no server process: they act on clients only
        with pytest.raises(HarnessError, match="not the harness's to restart"):
            engine.restart_node(nodes[0], storage, tmp_path / "logs", 5)
        engine.stop_nodes()
        cfg = engine.client_config(nodes[1], 7, storage, "s3://bucket/t", 30)
        assert (cfg.engine, cfg.url, cfg.table_uri) == ("spark-connect", urls[1], "s3a://bucket/t")
        client = make_client(cfg)
        assert isinstance(client, DeltaSparkClient) and client.name == "spark-connect"
        assert "Delta configured" in engine.capabilities.notes
        assert "remote cluster" in engine.commit_protocol(storage)
        assert set(engine.versions()) == {"pyspark"}
    finally:
        for s in listeners:
            s.close()


def test_make_engine_without_remotes_and_refused_storage() -> None:
    from harness.engines import make_engine
    from harness.engines.remote import check_nemeses, parse_remotes

    with pytest.raises(HarnessError, match="needs --spark-remote"):
        make_engine("spark-connect")
    assert parse_remotes(" sc://a:1 , sc://b.example:15002/;use_ssl=true;user_id=dj ") == [
        "sc://a:1",
        "sc://b.example:15002/;use_ssl=true;user_id=dj",
    ]
    with pytest.raises(HarnessError, match="session_id"):
        parse_remotes("sc://a:1/;session_id=x")
    assert check_nemeses(("delta-rs",), ["clock"], frozenset(), False) == []
    assert "client workers only" in check_nemeses(("spark-connect",), ["kill"], frozenset(), False)[0]
    # Mixed: the proxy's faults still reach the other engine's clients.
    assert (
        "other engines' clients"
        in check_nemeses(("spark-connect", "delta-rs"), ["partition"], frozenset({"partition"}), True)[0]
    )


def test_the_repro_command_names_the_remote() -> None:
    from harness.run.plan import RunSpec

    spec = RunSpec(engine="spark-connect", storage="local", spark_remote="sc://h:1,sc://g:2")
    assert "--spark-remote sc://h:1,sc://g:2" in spec.repro_command()
    assert "--spark-remote" not in RunSpec().repro_command()


# -- against a real Spark Connect server ------------------------------------------


def _connect_servers(procs) -> set[int]:
    return {p.pid for p in connect_servers(procs)}


@pytest.fixture(scope="module")
def remote_node(tmp_path_factory):
    """A delta-spark Spark Connect JVM the test starts: the "cluster"."""
    from harness.engines.deltaspark import DeltaSparkEngine
    from harness.run.storage import LocalStorage

    root = tmp_path_factory.mktemp("remote")
    engine = DeltaSparkEngine()
    (node,) = engine.start_nodes(1, LocalStorage(root / "tables"), root / "logs", 180)
    yield node
    engine.stop_nodes()
    assert not still_running([node.pid])


@pytest.mark.integration
def test_a_run_drives_a_remote_server_and_leaves_it_running(remote_node, results_dir: Path) -> None:
    before = _connect_servers(psutil.process_iter())
    assert remote_node.pid in before
    args = [
        "run",
        "--workload",
        "append",
        "--engine",
        "spark-connect",
        "--spark-remote",
        remote_node.url,
        "--storage",
        "local",
        "--time-limit",
        "5",
        "--concurrency",
        "2",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        "--seed",
        "2",
    ]  # seed 2: both slots begin with an append, even on a cold JVM
    # The run's own descendants, sampled while it runs: another test (or
    # person) on this machine may start JVMs of their own meanwhile.
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **NO_ENV},
    )
    seen: set[int] = set()
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            try:
                seen.update(_connect_servers(psutil.Process(proc.pid).children(recursive=True)))
            except psutil.Error:
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        done.set()
        sampler.join(5)
        if proc.poll() is None:
            proc.kill()
    res = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    assert res.returncode == 0, (res.stdout, res.stderr[-3000:])
    run_dir = only_run_dir(results_dir)
    assert load_results(run_dir)["verdict"] == "valid"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert [(n["engine"], n["url"], n["pid"]) for n in spec["nodes"]] == [("spark-connect", remote_node.url, None)] * 2
    assert "remote cluster" in spec["commit_protocols"]["spark-connect"]
    assert f"--spark-remote {remote_node.url}" in spec["repro"]
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    assert any(op["f"] == "append" and op["type"] == "ok" for op in history)
    # The run neither started a JVM nor stopped the remote one.
    assert not seen, f"the run started Spark Connect servers: {seen}"
    assert remote_node.pid in _connect_servers(psutil.process_iter())
    assert still_running([remote_node.pid]) == [remote_node.pid]
