"""Mixed-engine mode (`--engine sail,delta-rs`): clients of both engines on one table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.deltalog import read_log
from tests.conftest import load_results, only_run_dir, run_cli


@pytest.mark.integration
def test_sail_and_delta_rs_append_to_one_table(results_dir: Path) -> None:
    res = run_cli("run", "--workload", "append", "--engine", "sail,delta-rs", "--storage", "local",
                  "--concurrency", "4", "--time-limit", "5", "--results-dir", str(results_dir), "--no-progress")
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
        write_deltalake(uri, pa.Table.from_pylist([{"k": k, "writer": op, "prev_writer": None}], schema=schema),
                        mode="append", commit_properties=CommitProperties(custom_metadata={"dj.op": op}))
    run = SynthRun()
    run.invoke("setup.1", "create-table", {"default_isolation": "WriteSerializable",
                                            "node_engines": {"n1": "sail", "n2": "delta-rs"},
                                            "default_isolation_by_engine": {"sail": "WriteSerializable",
                                                                            "delta-rs": "Serializable"}},
               time=0, process="setup")
    run.complete("setup.1", "ok", time=1)
    for n, (op, node) in enumerate((("a", "n1"), ("b", "n2"))):
        run.invoke(op, "append", {}, time=10 + 10 * n, process=n)
        run.complete(op, "ok", time=15 + 10 * n)
        for ev in run.events[-2:]:
            ev["node"] = node
    h = extract(run.history(), read_log(uri))
    assert {t.id: t.isolation for t in h.txns} == {"a": "WriteSerializable", "b": "Serializable"}
    assert h.assumed_default_level == "Serializable/WriteSerializable"
