"""`delta-jepsen matrix`: one real run per cell, summarised as a table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.matrices.workload import _supported
from tests.conftest import REPO, run_cli, still_running


def test_supported_says_which_ops_the_engine_could_not_run() -> None:
    assert _supported({"by_f": {"append": 5, "read": 2}, "error_classes_by_f": {}}) == "yes"
    partial = {"by_f": {"append": 5, "optimize": 3, "read": 2}, "error_classes_by_f": {"optimize": {"unsupported": 3}}}
    assert _supported(partial) == "partial (optimize unsupported)"
    none = {"by_f": {"merge": 4, "read": 2}, "error_classes_by_f": {"merge": {"unsupported": 4}}}
    assert _supported(none) == "no (merge unsupported)"


@pytest.mark.integration
def test_matrix_runs_every_cell_and_writes_the_table(tmp_path: Path) -> None:
    res = run_cli(
        "matrix",
        "--workloads",
        "register",
        "--engines",
        "delta-rs",
        "--time-limit",
        "2",
        "--concurrency",
        "2",
        "--storage",
        "local",
        "--jobs",
        "2",
        "--results-dir",
        str(tmp_path),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    [root] = (tmp_path / "matrix").iterdir()
    cells = json.loads((root / "matrix.json").read_text())
    assert [(c["workload"], c["engine"], c["isolation"]) for c in cells] == [
        ("register", "delta-rs", "Serializable"),
        ("register", "delta-rs", "WriteSerializable"),
    ]
    assert all(c["verdict"] == "VALID" and c["supported"] == "yes" and c["ops_per_s"] > 0 for c in cells)
    table = (root / "matrix.md").read_text()
    assert "| register | delta-rs | Serializable | yes | VALID |" in table
    assert table in res.stdout
    assert "[2/2] register delta-rs " in res.stderr and "ETA 0s" in res.stderr  # progress, one line per cell
    assert (root / "matrix.html").read_text().count('class="cell ') == 2


def test_matrix_rejects_unknown_names() -> None:
    res = run_cli("matrix", "--engines", "sail,nope")
    assert res.returncode == 2 and "unknown engine 'nope'; valid: delta-spark, sail, delta-rs" in res.stderr


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_the_matrix_stops_its_cells(sig: int, tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "matrix",
            "--workloads",
            "append",
            "--engines",
            "delta-rs",
            "--isolation",
            "Serializable",
            "--time-limit",
            "120",
            "--concurrency",
            "2",
            "--storage",
            "s3",
            "--results-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            hist = list(tmp_path.glob("matrix/*/cells/*/*/history.jsonl"))
            if hist and hist[0].read_text().count('"type":"ok"') >= 4:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the cell made no progress")
        children = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert len(children) >= 3  # the cell's run, moto, workers
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    time.sleep(0.5)
    leftover = still_running(children)
    assert leftover == [], f"processes left after {sig}: {leftover}"
