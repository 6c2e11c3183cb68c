"""Releases of the Spark Connect engines in environments of their own:
delta-spark 3.3.2 on Spark 3.5 (Scala 2.12 jars, its Connect server fetched
beside Delta's, held to loopback by the bind shim), and an older Sail with
pyspark 3.5's client. Real servers, real runs, a real conformance cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import REPO, connect_servers, only_run_dir, run_cli

pytestmark = pytest.mark.integration


def _local_run(engine: str, workload: str, seconds: int, results: Path, *extra: str) -> tuple[str, dict[str, Any]]:
    """A short run on a local directory; its stdout and spec.json (the run
    folder is named by the run's first line, on stderr)."""
    out = run_cli(
        "run",
        "--engine",
        engine,
        "--workload",
        workload,
        "--storage",
        "local",
        "--time-limit",
        str(seconds),
        "--results-dir",
        str(results),
        *extra,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    line = next(ln for ln in out.stderr.splitlines() if ln.startswith("run: "))
    return out.stdout, json.loads((REPO / line.split()[1] / "spec.json").read_text())


def test_a_delta_spark_3_3_run_and_conformance_cell_are_judged(tmp_path: Path) -> None:
    # One JVM: two, racing, are the conformance cell's below.
    stdout, spec = _local_run("delta-spark==3.3.2", "list-append", 8, tmp_path, "--nodes", "1")
    assert "verdict: VALID" in stdout
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
    stdout, spec = _local_run("sail==0.6.6", "bank", 5, tmp_path)
    # 0.6 has no UPDATE: every transfer is reported unsupported, never a crash.
    assert "not tested, the engine cannot run them" in stdout and "transfer x" in stdout
    assert spec["versions"]["pysail"] == "0.6.6" and spec["versions"]["pyspark"] == "3.5.4"


def test_an_older_sail_release_reproduces_its_lost_append(tmp_path: Path) -> None:
    """A list-append run on Sail 0.6.6 loses appends (INSERT ... SELECTs of
    one list both commit, as in the pinned release); `reproduce` replays the
    pair on 0.6.6's own servers and client, through a worker in its
    environment, and the script runs there too."""
    flags = "--engine sail==0.6.6 --workload list-append --concurrency 4 --time-limit 6 --no-progress".split()
    out = run_cli("run", *flags, "--results-dir", str(tmp_path / "results"), timeout=600)
    run_dir = only_run_dir(tmp_path / "results")
    assert out.returncode == 1 and "duplicate-position" in out.stdout, out.stdout[-3000:] + out.stderr[-3000:]

    out = run_cli("reproduce", str(run_dir), "--anomaly", "duplicate-position", "--repeat", "2", timeout=900)
    assert out.returncode == 1, out.stdout[-3000:] + out.stderr[-3000:]
    assert "standalone script shows the anomaly" in out.stdout, out.stdout
    (folder,) = (run_dir / "repro").iterdir()
    outcome = json.loads((folder / "outcome.json").read_text())
    assert outcome["reproduced_before_shrink"] == 2 and outcome["uncontrolled"] == 0
    assert "pip install pysail==0.6.6 pyspark[connect]~=3.5.0" in (folder / "reproduce.py").read_text()
    assert "- Engine: sail==0.6.6; versions: pysail 0.6.6, pyspark 3.5.4" in (folder / "REPORT.md").read_text()
    assert "Spark Connect server on 127.0.0.1" in (folder / "servers" / "logs" / "sail-n1.log").read_text()


# By-hand checks of what older Sail releases were found doing in runs, each a
# few lines against one server of the release alone (soak: not in CI).
_DELETE_RACE = """
import sys, threading
from pyspark.sql.connect.session import SparkSession
url, loc = sys.argv[1], sys.argv[2]
s0 = SparkSession(connection=url)
s0.sql(f"CREATE TABLE t (id BIGINT, k BIGINT) USING delta LOCATION '{loc}'").collect()
s0.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, {k})" for k in range(8))).collect()
def writer(k):
    s = SparkSession(connection=url)
    s.sql(f"CREATE TABLE IF NOT EXISTS t USING delta LOCATION '{loc}'").collect()
    for _ in range(15):
        try:  # the row goes back only where its DELETE committed
            s.sql(f"DELETE FROM t WHERE k = CAST({k} AS BIGINT)").collect()
            s.sql(f"INSERT INTO t VALUES ({k}, {k})").collect()
        except Exception:
            pass
ts = [threading.Thread(target=writer, args=(k,)) for k in (1, 2)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(r[0] for r in s0.sql("SELECT id FROM t GROUP BY id HAVING count(*) > 1").collect()))
import os; os._exit(0)
"""
_MERGE_RACE = """
import sys, threading
from pyspark.sql.connect.session import SparkSession
url, loc = sys.argv[1], sys.argv[2]
s0 = SparkSession(connection=url)
s0.sql(f"CREATE TABLE t (k BIGINT, v BIGINT) USING delta LOCATION '{loc}'").collect()
s0.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, 0)" for k in range(4))).collect()
def writer():
    s = SparkSession(connection=url)
    s.sql(f"CREATE TABLE IF NOT EXISTS t USING delta LOCATION '{loc}'").collect()
    for i in range(40):
        try:
            s.sql(f"MERGE INTO t USING (SELECT * FROM VALUES ({i % 4}, {i}) AS src(k, v)) s ON t.k = s.k "
                  "WHEN MATCHED THEN UPDATE SET v = s.v "
                  "WHEN NOT MATCHED THEN INSERT (k, v) VALUES (s.k, s.v)").collect()
        except Exception:
            pass
ts = [threading.Thread(target=writer) for _ in range(2)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(r[0] for r in s0.sql("SELECT k FROM t GROUP BY k HAVING count(*) > 1").collect()))
import os; os._exit(0)
"""


@pytest.mark.soak
@pytest.mark.parametrize(
    "release,script,dirty",
    [
        # 0.5.3: two DELETEs of different rows of one file both commit, each
        # writing back the file's other rows: rows no statement touched repeat.
        ("0.5.3", _DELETE_RACE, True),
        ("0.6.6", _DELETE_RACE, False),
        # 0.6.6: two MERGEs of one key both commit, the later removing nothing.
        ("0.6.6", _MERGE_RACE, True),
        ("0.7.2", _MERGE_RACE, False),
    ],
)
def test_concurrent_writers_on_older_sail_releases(tmp_path: Path, release: str, script: str, dirty: bool) -> None:
    import subprocess

    from harness.core.procs import foreign_python
    from harness.engines.sail import SailEngine
    from harness.run.storage import LocalStorage

    engine = SailEngine(release)
    (node,) = engine.start_nodes(1, LocalStorage(tmp_path / "tables"), tmp_path / "logs", 120)
    seen = []
    try:
        assert engine.env is not None
        # A race: up to five rounds, each on a fresh table, until one shows it.
        for i in range(5):
            argv, env = foreign_python(
                engine.env.python, ["python", "-c", script, node.url or "", str(tmp_path / f"t{i}")]
            )
            out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
            seen.append(out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-500:])
            if seen[-1] != "[]":
                break
    finally:
        engine.stop_nodes()
    assert (seen[-1] != "[]") == dirty, seen


def test_delta_spark_3_3_replays_a_store_race_and_a_held_commit(tmp_path: Path) -> None:
    """delta-spark replays run in the release's environment, each transaction
    held at the proxy where its commit begins. Two schedules of two blind
    appends that both read version 1:
    - as a store race leaves them (two drivers on the single-driver LogStore:
      0.1 acknowledged version 2, then replaced by 1.1's PUT of it): the
      existence check finds version 2 free, the PUT is held until 0.1 wrote
      it, and overwrites it, so the acknowledged write is lost again;
    - as the engine orders them: 1.1's existence check of version 2 is held
      until 0.1 committed it, finds it, and delta-spark commits version 3
      after its conflict check, having read version 1.
    While they run, the release's JVMs show its own Spark, on loopback only."""
    from harness.deltalog import read_log
    from harness.engines.releases import EngineRelease
    from harness.repro.extract import op_versions
    from harness.repro.replay import replay
    from harness.repro.replay_worker import spark_controls
    from harness.repro.schedule import Schedule, Txn
    from workloads import make_workload

    def schedule(second: Txn) -> Schedule:
        version = 3 if second.commit_version else 2
        first = Txn("1.1", "append", {"ids": [1001, 2001], "via": "dataframe"}, "ok", 1, commit_version=version)
        return Schedule(
            engine="delta-spark==3.3.2",
            workload="append",
            isolation=None,
            table=make_workload("append", 1, None).table().to_json(),
            declaration={"default_isolation": "Serializable"},
            base_version=1,
            setup=[[[1, "setup"]]],
            txns=[first, second],
            anomaly={
                "checker": "durability",
                "kind": "lost-write",
                "claim": "C7",
                "ops": ["0.1", "1.1"],
                "versions": [],
            },
            seed=1,
        )

    second = {"f": "append", "value": {"ids": [1002, 2002], "via": "dataframe"}, "outcome": "ok", "read_version": 1}
    raced = schedule(Txn("0.1", **second, lost_version=2))
    ordered = schedule(Txn("0.1", **second, commit_version=2))
    with spark_controls(EngineRelease("delta-spark", "3.3.2"), tmp_path / "servers") as controls:
        lost = replay(raced, tmp_path / "raced", controls=controls)
        kept = replay(ordered, tmp_path / "ordered", controls=controls)
        jvms = connect_servers(psutil.Process().children(recursive=True))
        _assert_release_spark_on_loopback_only(jvms)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in jvms), jvms
    assert lost.controlled and lost.reproduced, lost.to_json()
    assert kept.controlled and not kept.reproduced and kept.verdict == "valid", kept.to_json()
    log = read_log(str(tmp_path / "ordered" / "table"))
    assert op_versions(log) == {"setup.2": 1, "0.1": 2, "1.1": 3} and log.commits[3].read_version == 1
    commit = (tmp_path / "ordered" / "table" / "_delta_log" / f"{3:020d}.json").read_text()
    assert '"engineInfo":"Apache-Spark/3.5.4 Delta-Lake/3.3.2"' in commit


def _assert_release_spark_on_loopback_only(jvms: list[psutil.Process]) -> None:
    """delta-spark 3.3.2's nodes run the release's own Spark 3.5 and its
    Connect server, and listen on loopback only: Spark 3.5's Connect server
    has no binding address, the bind shim holds it."""
    assert jvms, "the replay's Spark Connect JVMs are running"
    for java in jvms:
        listening = [
            c.laddr
            for p in (java, *java.children(recursive=True))
            for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening, "the Spark Connect server listens somewhere"
        assert {a.ip for a in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
        classpath = " ".join(java.cmdline()) + " " + java.environ().get("SPARK_DIST_CLASSPATH", "")
        assert "delta-spark_2.12-3.3.2.jar" in classpath and "spark-connect_2.12-3.5.4.jar" in classpath, classpath
