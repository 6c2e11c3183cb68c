"""The worker's op dispatch, with a real delta-rs client on a local table."""

from __future__ import annotations

from pathlib import Path

from harness.engines import make_client
from harness.engines.base import ClientConfig
from harness.worker import run_op
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
