"""`delta-jepsen matrix`: one real run per cell, summarised as a table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.matrix import _supported
from tests.conftest import run_cli


def test_supported_says_which_ops_the_engine_could_not_run() -> None:
    assert _supported({"by_f": {"append": 5, "read": 2}, "error_classes_by_f": {}}) == "yes"
    partial = {"by_f": {"append": 5, "optimize": 3, "read": 2}, "error_classes_by_f": {"optimize": {"unsupported": 3}}}
    assert _supported(partial) == "partial (optimize unsupported)"
    none = {"by_f": {"merge": 4, "read": 2}, "error_classes_by_f": {"merge": {"unsupported": 4}}}
    assert _supported(none) == "no (merge unsupported)"


@pytest.mark.integration
def test_matrix_runs_every_cell_and_writes_the_table(tmp_path: Path) -> None:
    res = run_cli("matrix", "--workloads", "register", "--engines", "delta-rs", "--time-limit", "2",
                  "--concurrency", "2", "--storage", "local", "--jobs", "2", "--results-dir", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    [root] = (tmp_path / "matrix").iterdir()
    cells = json.loads((root / "matrix.json").read_text())
    assert [(c["workload"], c["engine"], c["isolation"]) for c in cells] == [
        ("register", "delta-rs", "Serializable"), ("register", "delta-rs", "WriteSerializable")]
    assert all(c["verdict"] == "VALID" and c["supported"] == "yes" and c["ops_per_s"] > 0 for c in cells)
    table = (root / "matrix.md").read_text()
    assert "| register | delta-rs | Serializable | yes | VALID |" in table
    assert table in res.stdout


def test_matrix_rejects_unknown_names() -> None:
    res = run_cli("matrix", "--engines", "sail,nope")
    assert res.returncode == 2 and "unknown engine 'nope'; valid: sail, delta-rs" in res.stderr
