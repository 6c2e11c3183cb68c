"""`delta-jepsen check` on stored runs: truncated and corrupt histories are
checked as far as they go and reported as such; an anomaly planted in a real
run's table is found."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import load_results, only_run_dir, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("results")
    res = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--concurrency",
        "3",
        "--time-limit",
        "3",
        "--results-dir",
        str(results),
        "--no-progress",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return only_run_dir(results)


def _copy(run: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(run, dst, symlinks=True)
    return dst


def test_truncated_history_is_checked_as_far_as_it_goes(real_run: Path, tmp_path: Path) -> None:
    run = _copy(real_run, tmp_path)
    hist = run / "history.jsonl"
    text = hist.read_text()
    hist.write_text(text[: len(text) - 40])  # cut the last line in half
    res = run_cli("check", str(run))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "truncated line: checked as far as it goes" in res.stdout
    assert load_results(run)["history"]["truncated"] is True


def test_corrupt_history_line_makes_a_clean_run_unknown(real_run: Path, tmp_path: Path) -> None:
    run = _copy(real_run, tmp_path)
    hist = run / "history.jsonl"
    lines = hist.read_text().splitlines(keepends=True)
    lines[len(lines) // 2] = "{this is not json\n"
    hist.write_text("".join(lines))
    res = run_cli("check", str(run))
    assert res.returncode == 3, res.stdout + res.stderr
    assert "history problem: line" in res.stdout


def test_a_row_deleted_from_a_data_file_is_a_lost_write(real_run: Path, tmp_path: Path) -> None:
    """Tamper with the stored table: drop a row of an acknowledged append."""
    run = _copy(real_run, tmp_path)
    doc = load_results(run)
    assert doc["verdict"] == "valid"
    files = sorted((run / "table").glob("*.parquet"))
    victim = files[len(files) // 2]
    t = pq.read_table(victim)
    pq.write_table(t.slice(0, t.num_rows - 1) if t.num_rows > 1 else t.schema.empty_table(), victim)
    res = run_cli("check", str(run))
    assert res.returncode == 1, res.stdout + res.stderr
    kinds = {a["kind"] for c in load_results(run)["checkers"] for a in c["anomalies"]}
    assert kinds & {"lost-write", "lost-rows"}, kinds
    assert "partial-op" in kinds or t.num_rows == 1


def test_a_commit_removed_from_the_log_is_a_gap(real_run: Path, tmp_path: Path) -> None:
    run = _copy(real_run, tmp_path)
    log = run / "table" / "_delta_log"
    (log / f"{2:020d}.json").unlink()
    res = run_cli("check", str(run), "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    sanity = next(c for c in doc["checkers"] if c["checker"] == "log-sanity")
    assert sanity["verdict"] == "invalid"
    # A gap, or a hole under a checkpoint (delta-rs checkpoints every 100).
    a = sanity["anomalies"][0]
    assert a["kind"] in ("log-gap", "log-missing-commit") and a["versions"] == [2]


def test_a_run_without_its_table_log_is_unknown_in_every_checker(real_run: Path, tmp_path: Path) -> None:
    """A harness killed before it copied the table leaves a history and no
    log: no checker may call that valid."""
    run = _copy(real_run, tmp_path)
    shutil.rmtree(run / "table")
    res = run_cli("check", str(run))
    assert res.returncode == 3, res.stdout + res.stderr
    doc = load_results(run)
    assert doc["verdict"] == "unknown"
    assert doc["checkers"] and {c["verdict"] for c in doc["checkers"]} == {"unknown"}
    assert all("No transaction log" in c["explanation"] for c in doc["checkers"])


def _victim(run: Path) -> Path:
    files = sorted((run / "table").glob("*.parquet"))
    assert files
    return files[len(files) // 2]


def test_a_data_file_missing_from_the_store_is_lost_data(real_run: Path, tmp_path: Path) -> None:
    """The log names a file the store does not have: lost data (C7), invalid
    ."""
    run = _copy(real_run, tmp_path)
    _victim(run).unlink()
    res = run_cli("check", str(run))
    assert res.returncode == 1, res.stdout + res.stderr
    doc = load_results(run)
    by_name = {c["checker"]: c for c in doc["checkers"]}
    assert [a["kind"] for a in by_name["log-sanity"]["anomalies"]] == ["missing-data-file"]
    assert by_name["log-sanity"]["anomalies"][0]["claim"] == "C7"
    assert by_name["durability"]["verdict"] == "invalid"


def test_a_data_file_the_harness_cannot_decode_is_unknown_not_lost(real_run: Path, tmp_path: Path) -> None:
    """The file is there but is not parquet the harness can read: its rows are
    unknown, so no checker may call them lost."""
    run = _copy(real_run, tmp_path)
    _victim(run).write_bytes(b"PAR1 but not really parquet")
    res = run_cli("check", str(run))
    assert res.returncode == 3, res.stdout + res.stderr
    doc = load_results(run)
    assert doc["verdict"] == "unknown"
    verdicts = {c["checker"]: c["verdict"] for c in doc["checkers"]}
    assert "invalid" not in verdicts.values(), verdicts
    assert verdicts["log-sanity"] == "unknown"
    downgraded = [c for c in doc["checkers"] if c["explanation"].startswith("Unknown: 1 data file(s)")]
    assert downgraded, verdicts  # durability/atomicity would have called the rows lost
    assert any(p["kind"] == "data-file-unreadable" for p in doc["log"]["problems"])
