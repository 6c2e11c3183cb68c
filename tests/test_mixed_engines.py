"""Mixed-engine mode (`--engine sail,delta-rs`): clients of both engines on one table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.deltalog import read_log
from tests.conftest import load_results, only_run_dir, run_cli
from tests.known import Known, RunView, assert_only_known, versions_of


@pytest.mark.integration
def test_sail_and_delta_rs_append_to_one_table(results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--workload",
        "append",
        "--engine",
        "sail,delta-rs",
        "--storage",
        "local",
        "--concurrency",
        "4",
        "--time-limit",
        "5",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = only_run_dir(results_dir)
    assert run_dir.parent.name == "append-sail+delta-rs"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert {n["engine"] for n in spec["nodes"]} == {"sail", "delta-rs"}
    assert set(spec["engines"]) == {"sail", "delta-rs"}
    assert "--engine sail,delta-rs" in spec["repro"]
    # Both engines really committed to the same log.
    log = read_log(str(run_dir / "table"))
    engines = {str((c.commit_info or {}).get("engineInfo", "")).split(":")[0] for c in log.commits.values()}
    assert {"sail-delta-lake", "delta-rs"} <= engines, engines
    doc = load_results(run_dir)
    assert doc["verdict"] == "valid", doc["checkers"]
    assert doc["history"]["ok"] > 10


def test_unknown_engine_in_a_list_exits_2(results_dir: Path) -> None:
    res = run_cli("run", "--engine", "sail,spark-jvm", "--results-dir", str(results_dir), "--no-progress")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "unknown engine 'spark-jvm'" in res.stderr and "sail, delta-rs" in res.stderr


def test_a_commit_without_a_level_is_judged_by_its_own_engines_default(tmp_path: Path) -> None:
    """Mixed runs: a commit whose table carried no isolation level is judged by
    the default of the engine that committed it (spec C13), found via its node."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, write_deltalake

    from checkers.serializability import extract
    from tests.synth import SynthRun

    schema = pa.schema([("k", pa.int64()), ("writer", pa.string()), ("prev_writer", pa.string())])
    uri = str(tmp_path / "t")
    DeltaTable.create(uri, schema)  # no delta.isolationLevel
    for k, op in ((1, "a"), (2, "b")):
        write_deltalake(
            uri,
            pa.Table.from_pylist([{"k": k, "writer": op, "prev_writer": None}], schema=schema),
            mode="append",
            commit_properties=CommitProperties(custom_metadata={"dj.op": op}),
        )
    run = SynthRun()
    run.invoke(
        "setup.1",
        "create-table",
        {
            "default_isolation": "WriteSerializable",
            "node_engines": {"n1": "sail", "n2": "delta-rs"},
            "default_isolation_by_engine": {"sail": "WriteSerializable", "delta-rs": "Serializable"},
        },
        time=0,
        process="setup",
    )
    run.complete("setup.1", "ok", time=1)
    for n, (op, node) in enumerate((("a", "n1"), ("b", "n2"))):
        run.invoke(op, "append", {}, time=10 + 10 * n, process=n)
        run.complete(op, "ok", time=15 + 10 * n)
        for ev in run.events[-2:]:
            ev["node"] = node
    h = extract(run.history(), read_log(uri))
    assert {t.id: t.isolation for t in h.txns} == {"a": "WriteSerializable", "b": "Serializable"}
    assert h.assumed_default_level == "Serializable/WriteSerializable"


# delta-spark's engineInfo: "Apache-Spark/<spark> Delta-Lake/<delta>".
ENGINE_INFO_PREFIX = {"delta-spark": "Apache-Spark/", "delta-rs": "delta-rs:", "sail": "sail-delta-lake:"}


@pytest.mark.integration
@pytest.mark.parametrize(
    "storage, protocol",
    [
        ("local", "HDFSLogStore"),
        ("s3", "S3SingleDriverLogStore"),
    ],
)
def test_delta_spark_delta_rs_and_sail_append_to_one_table(storage: str, protocol: str, results_dir: Path) -> None:
    """All three engines as clients of one table, delta-spark first (it
    creates the table). Seed 7: slot 0, on delta-spark's node, starts with
    appends, so delta-spark commits workload ops even on a slow machine."""
    engines = ("delta-spark", "delta-rs", "sail")
    res = run_cli(
        "run",
        "--workload",
        "append",
        "--engine",
        ",".join(engines),
        "--nodes",
        "3",
        "--storage",
        storage,
        "--concurrency",
        "3",
        "--time-limit",
        "8",
        "--seed",
        "7",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode in (0, 1), res.stdout + res.stderr  # 1: invalid, judged below
    run_dir = only_run_dir(results_dir)
    assert run_dir.parent.name == "append-delta-spark+delta-rs+sail"
    spec = json.loads((run_dir / "spec.json").read_text())
    assert {n["name"]: n["engine"] for n in spec["nodes"]} == {"n1": "delta-spark", "n2": "delta-rs", "n3": "sail"}
    assert set(spec["engines"]) == set(engines)
    # Each engine's commit protocol, in spec.json and one summary line each.
    protocols = spec["commit_protocols"]
    assert set(protocols) == set(engines), protocols
    assert protocols["delta-spark"].startswith(protocol), protocols
    summary = (run_dir / "summary.txt").read_text()
    for e in engines:
        assert f"commit protocol: {e}: {protocols[e]}" in summary, summary
    assert summary.count("commit protocol:") == 3, summary
    # Every engine really committed workload ops (version 0 is delta-spark's
    # create-table) to the same log.
    log = read_log(str(run_dir / "table"))
    infos = [str((c.commit_info or {}).get("engineInfo", "")) for v, c in log.commits.items() if v > 0]
    committed = {e for e, prefix in ENGINE_INFO_PREFIX.items() if any(i.startswith(prefix) for i in infos)}
    assert committed == set(engines), sorted(set(infos))
    assert str((log.commits[0].commit_info or {}).get("engineInfo", "")).startswith("Apache-Spark/")
    # Each node acknowledged ops of its own.
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    ok_by_node = {e["node"] for e in events if isinstance(e["process"], int) and e["type"] == "ok"}
    assert ok_by_node == {"n1", "n2", "n3"}
    doc = load_results(run_dir)
    assert res.returncode == (1 if doc["verdict"] == "invalid" else 0), res.stdout + res.stderr
    # delta-spark's LogStore and the others' create-if-absent are two commit
    # primitives: outside contract on either store, whatever the verdict.
    assert doc["contract"]["inside"] is False
    assert f"delta-spark commits through {protocol} and " in doc["contract"]["outside"], doc["contract"]
    assert_only_known(doc, run_dir, [MIXED_PRIMITIVES_LOST_COMMIT])
    assert doc["verdict"] == "valid", doc["checkers"]


def _replaced_by_delta_spark(view: RunView, a: dict[str, Any]) -> str | None:
    """delta-spark's default LogStores commit by an existence check, then a
    write that replaces: on S3 a plain PUT (S3SingleDriverLogStore, no
    If-None-Match), on a local directory Hadoop's rename (HDFSLogStore;
    reproduced by delaying the JVM's rename(2) with strace while delta-rs
    committed that version). Mutual exclusion holds only inside its own
    JVM. When another engine's commit of version v lands between the two,
    delta-spark's replaces it: an acknowledged write is lost (spec C7; and
    C11, writers on several clusters), and a reader that saw the replaced
    commit disagrees with the log. None when the run shows exactly that:
    the loser is another engine's op, each version it was told now holds a
    delta-spark commit."""
    label = str((a.get("details") or {}).get("outside_contract", ""))
    if "S3SingleDriverLogStore" not in label and "HDFSLogStore" not in label:
        return "not labelled outside contract for S3SingleDriverLogStore or HDFSLogStore"
    node_engine = {n["name"]: n["engine"] for n in json.loads(view.text("spec.json"))["nodes"]}
    log = view.log
    if a["kind"] != "lost-write":
        # A read of a replaced commit: it names a version at or after one a
        # lost write was told.
        told = [v for _, x in view.anomalies() if x["kind"] == "lost-write" for v in versions_of(x)]
        seen = versions_of(a)
        if not told:
            return "no lost write in this run was told a version"
        if seen and max(seen) < min(told):
            return f"it names versions {seen}, all before the first replaced one ({min(told)})"
        return None
    (op,) = a["ops"]
    engine = node_engine.get(str(view.invokes.get(op, {}).get("node")))
    if engine in (None, "delta-spark"):
        return f"op {op} ran on {engine}, not on a put-if-absent engine"
    for v in versions_of(a):
        info = str((log.commits[v].commit_info or {}).get("engineInfo", "")) if v in log.commits else ""
        if not info.startswith(ENGINE_INFO_PREFIX["delta-spark"]):
            return f"version {v}, told to op {op}, holds no delta-spark commit ({info!r})"
    return None


MIXED_PRIMITIVES_LOST_COMMIT = Known(
    "delta-spark:C7,C11:single-driver-lost-commit",
    "C7, C11",
    "outside contract: delta-spark's S3SingleDriverLogStore (S3) or HDFSLogStore (a local directory) beside "
    "writers that create a commit only if absent, another engine's acknowledged commit replaced by delta-spark's",
    frozenset({"lost-write", "read-version-mismatch", "state-never-existed", "stale-read"}),
    _replaced_by_delta_spark,
    always=False,  # 2 of 6 runs of this test on s3; rare on a local directory (the window is inside one call)
)
