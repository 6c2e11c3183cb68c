"""delta-spark on a Spark Connect JVM: its jars, its nodes, its client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from harness.core.errors import HarnessError
from harness.engines.jars import Versions, resolve
from tests.conftest import still_running

PINS = Versions(spark="4.0.5", scala="2.13", hadoop="3.4.1", delta="4.0.1")


def test_coordinates_follow_the_pins() -> None:
    assert PINS.coordinates(["delta"]) == ["io.delta:delta-spark_2.13:4.0.1", "io.delta:delta-storage:4.0.1"]
    assert PINS.coordinates(["s3"])[-1] == "org.apache.hadoop:hadoop-aws:3.4.1"
    assert "io.delta:delta-storage-s3-dynamodb:4.0.1" in PINS.coordinates(["dynamodb"])
    # Another pin gives other coordinates (and so another cache key): a jar
    # of the old release can never be picked up.
    newer = Versions(spark="4.1.0", scala="2.13", hadoop="3.4.2", delta="4.1.0")
    assert set(newer.coordinates(["s3"])).isdisjoint(PINS.coordinates(["s3"]))


def test_a_stale_jar_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "delta-spark_2.13-3.3.0.jar").write_bytes(b"")
    (tmp_path / "delta-storage-3.3.0.jar").write_bytes(b"")
    with pytest.raises(HarnessError) as e:
        resolve(["delta"], jar_dir=tmp_path)
    assert "lacks delta-spark_2.13-" in str(e.value) and "delta-spark_2.13-3.3.0.jar" in str(e.value)


def test_a_missing_jar_directory_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no such directory"):
        resolve(["delta"], jar_dir=tmp_path / "nope")


@pytest.mark.integration
def test_fetched_jars_are_cached_and_a_directory_of_them_works_offline(tmp_path: Path) -> None:
    fetched = resolve(["s3"])
    names = {p.name for p in fetched.jars}
    v = Versions.installed()
    assert f"delta-spark_{v.scala}-{v.delta}.jar" in names and f"hadoop-aws-{v.hadoop}.jar" in names
    assert not any(n.startswith(("scala-library", "jackson-")) for n in names), "Spark's own jars win"
    again = resolve(["s3"])
    assert again.jars == fetched.jars
    # An offline machine: the same jars copied into a directory.
    d = tmp_path / "jars"
    d.mkdir()
    for p in fetched.jars:
        os.symlink(p, d / p.name)
    local = resolve(["s3"], jar_dir=d)
    assert {p.name for p in local.jars} == names and local.describe()["source"] == "local directory"


@pytest.fixture(scope="module")
def recorded_archive(tmp_path_factory) -> dict:
    """A JVM that records a class archive of this module's own (whatever
    other tests' JVMs do with the machine's), then stops: what it was and
    what its stop left behind."""
    from harness.engines.cds import DIR_ENV, ENV
    from harness.engines.deltaspark import DeltaSparkEngine
    from harness.run.storage import LocalStorage

    root = tmp_path_factory.mktemp("cds-recorder")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DIR_ENV, str(root / "cds"))
        mp.delenv(ENV, raising=False)
        engine = DeltaSparkEngine()
        engine.expect_ops(frozenset())
        nodes = engine.start_nodes(1, LocalStorage(root / "t"), root / "logs", 300)
        try:
            java = psutil.Process(nodes[0].pid)
            seen = {
                "pids": [java.pid] + [c.pid for c in java.children(recursive=True)],
                "cmdline": java.cmdline(),
                "environ": [f"{k}={v}" for k, v in java.environ().items() if k == "SPARK_HOME"],
                "work": list(engine.workdirs),
            }
        finally:
            engine.stop_nodes()
    assert engine.cds is not None
    return {
        **seen,
        "log": (root / "logs" / "delta-spark-n1.log").read_text(),
        "archive": engine.cds.path,
        "cds_dir": root / "cds",
    }


@pytest.fixture(scope="module")
def local_node(tmp_path_factory, recorded_archive):
    """One node for the module, started on the archive the recorder left."""
    from harness.engines.cds import DIR_ENV, ENV
    from harness.engines.deltaspark import DeltaSparkEngine
    from harness.run.storage import LocalStorage

    root = tmp_path_factory.mktemp("delta-spark")
    storage = LocalStorage(root / "tables")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(DIR_ENV, str(recorded_archive["cds_dir"]))
        mp.delenv(ENV, raising=False)
        engine = DeltaSparkEngine()
        (node,) = engine.start_nodes(1, storage, root / "logs", 180)
    yield engine, node, storage
    engine.stop_nodes()


@pytest.mark.integration
def test_a_node_listens_on_loopback_only(local_node) -> None:
    engine, node, _ = local_node
    java = psutil.Process(node.pid)
    listening = [c.laddr for c in java.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN]
    assert listening, "the Spark Connect server listens somewhere"
    assert {a.ip for a in listening} <= {"127.0.0.1", "::ffff:127.0.0.1"}, listening
    assert node.url.startswith("sc://127.0.0.1:")


@pytest.mark.integration
def test_two_sessions_on_one_server_address_their_own_tables(local_node) -> None:
    from harness.core.table import Column, TableSpec
    from harness.engines import make_client

    engine, node, storage = local_node
    spec = TableSpec((Column("id", "BIGINT"), Column("writer", "STRING")))
    clients = [make_client(engine.client_config(node, i, storage, storage.table_uri(f"t{i}"), 60)) for i in (1, 2)]
    try:
        for i, c in enumerate(clients, start=1):
            c.open()
            c.create_table(spec)
            c.append([(i, f"{i}.1")], spec, "sql", f"{i}.1")
            c.update(f"id = {i}", {"writer": f"'{i}.2'"}, f"{i}.2")
        assert clients[0].read(["id", "writer"]).value == [(1, "1.2")]
        assert clients[1].read(["id", "writer"], via="sql").value == [(2, "2.2")]
    finally:
        for c in clients:
            c.close()
    # Each commit names its op in commitInfo.userMetadata (the checkers'
    # link from the log to the history), with its readVersion.
    from harness.deltalog import read_log

    log = read_log(storage.table_uri("t1"))
    infos = [log.commits[v].commit_info for v in (1, 2)]
    assert [i.get("userMetadata") for i in infos] == ["1.1", "1.2"]
    assert infos[1]["readVersion"] == 1 and infos[1]["operation"] == "UPDATE"


@pytest.mark.integration
def test_stopping_the_nodes_leaves_no_process_and_no_work_dir_and_the_next_jvm_maps_the_class_archive(
    recorded_archive: dict, local_node
) -> None:
    from harness.engines.cds import classpath_file, stable_spark_home
    from harness.engines.deltaspark import DeltaSparkEngine

    seen = recorded_archive
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in seen["cmdline"])
    assert still_running(seen["pids"]) == []
    assert not any(os.path.exists(w) for w in seen["work"])
    assert "Spark Connect server started" in seen["log"]
    archive = seen["archive"]
    # The archive and the class path it was recorded on: no lock, no tmp.
    assert archive.is_file() and sorted(p.name for p in archive.parent.iterdir()) == sorted(
        [archive.name, classpath_file(archive).name]
    )
    # Recorded on the linked copy of the virtualenv's Spark, which a new
    # virtualenv of the same pyspark finds again.
    home = DeltaSparkEngine().spark_versions().spark_home
    assert json.loads(classpath_file(archive).read_text())[0] == str(stable_spark_home(home)) != str(home)
    assert f"SPARK_HOME={stable_spark_home(home)}" in seen["environ"]
    # The next JVM (the module's node) maps the archive: the kernel's view of its memory.
    _, node, _ = local_node
    assert f"-XX:SharedArchiveFile={archive}" in psutil.Process(node.pid).cmdline()
    assert str(archive) in Path(f"/proc/{node.pid}/maps").read_text()


@pytest.mark.integration
def test_a_level_the_engine_refuses_ends_the_run_unknown_not_as_a_harness_error(tmp_path: Path) -> None:
    # delta-spark 4.0 refuses delta.isolationLevel = WriteSerializable (C13):
    # the run has no table to test, which is neither valid nor a harness fault.
    from tests.conftest import load_results, only_run_dir, run_cli

    res = run_cli(
        "run",
        "--workload",
        "append",
        "--engine",
        "delta-spark",
        "--storage",
        "local",
        "--isolation",
        "WriteSerializable",
        "--nodes",
        "1",
        "--time-limit",
        "3",
        "--results-dir",
        str(tmp_path),
        "--no-progress",
    )
    assert res.returncode == 3, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    assert "the engine refused to create the table" in res.stdout
    doc = load_results(only_run_dir(tmp_path))
    assert doc["verdict"] == "unknown"
    assert {c["verdict"] for c in doc["checkers"]} == {"unknown"}  # none passes vacuously
    assert "delta.isolationLevel must be Serializable" in doc["run"]["refused"]
    from harness.core.history import ErrorClass, load_history

    done = [e for e in load_history(only_run_dir(tmp_path) / "history.jsonl").events if e.type != "invoke"]
    assert [(e.f, e.type, e.error.cls if e.error else None) for e in done] == [
        ("create-table", "fail", ErrorClass.UNSUPPORTED)
    ]


def test_extra_spark_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.engines.deltaspark import SPARK_CONF_ENV, _env_conf

    monkeypatch.setenv(SPARK_CONF_ENV, "spark.sql.codegen.wholeStage=true  a.b=c=d")
    assert _env_conf() == {"spark.sql.codegen.wholeStage": "true", "a.b": "c=d"}
    monkeypatch.setenv(SPARK_CONF_ENV, "novalue")
    with pytest.raises(HarnessError, match="'novalue' is not key=value"):
        _env_conf()
