"""The worker's op dispatch, with a real delta-rs client on a local table."""

from __future__ import annotations

from pathlib import Path

from harness.engines import make_client
from harness.engines.base import ClientConfig
from harness.run.worker_main import run_op
from workloads import make_workload


def _client(tmp_path: Path):
    client = make_client(ClientConfig(engine="delta-rs", node="n1", process=0, table_uri=str(tmp_path / "t")))
    client.open()
    return client


def test_an_op_the_engine_cannot_run_is_reported_unsupported(tmp_path: Path) -> None:
    client = _client(tmp_path)
    wl = make_workload("append", 1)
    reply = run_op(client, wl, wl.table(), {"f": "optimize-zorder", "id": "0.1", "value": None})
    assert reply["type"] == "fail"
    assert reply["error"]["class"] == "unsupported"
    assert "delta-rs" in reply["error"]["raw"]


def test_a_table_with_an_identity_column_is_unsupported_where_the_engine_cannot_declare_one(tmp_path: Path) -> None:
    from harness.engines.deltaspark import capabilities_of

    client = _client(tmp_path)
    wl = make_workload("identity", 1)
    reply = run_op(client, wl, wl.table(), {"f": "create-table", "id": "setup.1", "value": None})
    assert reply["type"] == "fail" and reply["error"]["class"] == "unsupported"
    assert reply["error"]["raw"] == "delta-rs cannot run 'create-table' (it has no identity-columns)"
    assert not (tmp_path / "t").exists()
    # delta-spark: from 4.4 on, whose SQL CREATE TABLE declares one.
    assert "identity-columns" not in capabilities_of(None).ops
    assert "identity-columns" not in capabilities_of("4.0.1").ops
    assert "identity-columns" in capabilities_of("4.4.0").ops


def test_ops_run_and_report_versions(tmp_path: Path) -> None:
    client = _client(tmp_path)
    wl = make_workload("append", 1)
    table = wl.table()
    assert run_op(client, wl, table, {"f": "create-table", "id": "setup.1", "value": None})["version"] == 0
    ok = run_op(client, wl, table, {"f": "append", "id": "0.1", "value": {"ids": [1, 2], "via": "sql"}})
    assert ok["type"] == "ok" and ok["version"] == 1
    read = run_op(client, wl, table, {"f": "read", "id": "0.2", "value": {"via": "dataframe"}})
    assert read["value"]["ids"] == [1, 2] and read["version"] == 1


def test_an_engine_error_is_classified_not_raised(tmp_path: Path) -> None:
    client = _client(tmp_path)
    wl = make_workload("append", 1)
    # No table yet: the engine raises, the worker reports a classified fail.
    reply = run_op(client, wl, wl.table(), {"f": "append", "id": "0.1", "value": {"ids": [1], "via": "sql"}})
    assert reply["type"] in ("fail", "info")
    assert reply["error"]["class"] == "not-a-conflict"
    assert reply["error"]["raw"]


def test_a_bug_in_the_harness_is_a_harness_fault_not_an_engine_error(tmp_path: Path) -> None:
    """A KeyError raised by the harness's own code (here: an op whose value
    lacks a key the workload reads) is no answer of the engine: an info op
    of class harness-fault naming the place."""
    client = _client(tmp_path)
    wl = make_workload("append", 1)
    table = wl.table()
    run_op(client, wl, table, {"f": "create-table", "id": "setup.1", "value": None})
    reply = run_op(client, wl, table, {"f": "append", "id": "0.1", "value": {"via": "sql"}})  # no "ids"
    assert reply["type"] == "info", reply
    assert reply["error"]["class"] == "harness-fault"
    assert reply["error"]["raw"].startswith("KeyError: 'ids' (at workloads/")
    # The same type raised inside the engine's library stays the engine's.
    try:
        {}["x"]
    except KeyError as e:
        from harness.run.worker_main import harness_fault

        assert harness_fault(e) is None  # raised in this test file, not harness code


def test_a_harness_fault_makes_a_run_unknown_and_is_named(tmp_path: Path) -> None:
    import json
    import shutil

    from harness.bench.synth_run import write_run
    from harness.check.pipeline import check_run

    run = tmp_path / "run"
    write_run(run, 50, seed=3)
    lines = (run / "history.jsonl").read_text().splitlines()
    assert check_run(run).verdict.value == "valid"
    last = json.loads(lines[-1])
    t = last["time"] + 1
    for type_, extra in (
        ("invoke", {}),
        ("info", {"error": {"class": "harness-fault", "raw": "TypeError: boom (at harness/x.py:1)"}}),
    ):
        lines.append(
            json.dumps(
                {
                    "index": len(lines),
                    "time": t,
                    "process": 0,
                    "type": type_,
                    "f": "txn",
                    "id": "0.999",
                    "value": None,
                    **extra,
                }
            )
        )
    (run / "history.jsonl").write_text("\n".join(lines) + "\n")
    report = check_run(run)
    assert report.verdict.value == "unknown"
    assert "harness fault (a bug in delta-jepsen" in report.summary and "op 0.999" in report.summary
    assert report.doc["history"]["harness_faults"][0]["op"] == "0.999"
    shutil.rmtree(run)
