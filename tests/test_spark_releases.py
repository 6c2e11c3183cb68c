"""Releases of the Spark Connect engines in environments of their own:
delta-spark 3.3.2 on Spark 3.5 (Scala 2.12 jars, its Connect server fetched
beside Delta's, held to loopback by the bind shim), and an older Sail with
pyspark 3.5's client. Real servers, real runs, a real conformance cell."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.integration


def _run_dir(stdout: str) -> Path:
    line = next(ln for ln in stdout.splitlines() if ln.startswith("run: "))
    return REPO / line.split()[1]


def test_delta_spark_3_3_runs_its_own_spark_on_loopback_only(tmp_path: Path) -> None:
    from harness.engines.deltaspark import DeltaSparkEngine
    from harness.run.storage import LocalStorage

    engine = DeltaSparkEngine(release="3.3.2")
    storage = LocalStorage(tmp_path / "tables")
    (node,) = engine.start_nodes(1, storage, tmp_path / "logs", 240)
    try:
        java = psutil.Process(node.pid)
        jvms = [java, *java.children(recursive=True)]
        listening = [c.laddr for p in jvms for c in p.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
        assert listening, "the Spark Connect server listens somewhere"
        # Spark 3.5's Connect server has no binding address: the shim holds it.
        assert {a.ip for a in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
        versions = engine.versions()
        assert (versions["pyspark"], versions["delta-spark"]) == ("3.5.4", "3.3.2")
        assert "delta-spark_2.12-3.3.2.jar" in versions["spark-jars"]
        assert "spark-connect_2.12-3.5.4.jar" in versions["spark-jars"]
    finally:
        engine.stop_nodes()
    assert not java.is_running() or java.status() == psutil.STATUS_ZOMBIE


def test_a_delta_spark_3_3_run_and_conformance_cell_are_judged(tmp_path: Path) -> None:
    out = run_cli(
        "run",
        "--engine",
        "delta-spark==3.3.2",
        "--workload",
        "list-append",
        "--storage",
        "local",
        "--time-limit",
        "8",
        "--results-dir",
        str(tmp_path),
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "verdict: VALID" in out.stdout
    spec = json.loads((_run_dir(out.stdout) / "spec.json").read_text())
    assert spec["versions"]["delta-spark"] == "3.3.2" and spec["versions"]["pyspark"] == "3.5.4"
    # One cell on S3 behind the fault proxy, the loser's existence check held
    # until the winner committed: conflict detection of 3.3.2 judged.
    cell = "^unpartitioned/Serializable/delete>delete$"
    out = run_cli(
        "conformance", "--engine", "delta-spark==3.3.2", "--cells", cell, "--results-dir", str(tmp_path), timeout=600
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "1 cells" in out.stdout and "conforms 1" in out.stdout, out.stdout


def test_an_older_sail_runs_with_the_ops_it_has(tmp_path: Path) -> None:
    out = run_cli(
        "run",
        "--engine",
        "sail==0.6.6",
        "--workload",
        "bank",
        "--storage",
        "local",
        "--time-limit",
        "5",
        "--results-dir",
        str(tmp_path),
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # 0.6 has no UPDATE: every transfer is reported unsupported, never a crash.
    assert "not tested, the engine cannot run them" in out.stdout and "transfer x" in out.stdout
    spec = json.loads((_run_dir(out.stdout) / "spec.json").read_text())
    assert spec["versions"]["pysail"] == "0.6.6" and spec["versions"]["pyspark"] == "3.5.4"
