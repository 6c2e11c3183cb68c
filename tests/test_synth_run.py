"""harness.bench.synth_run: stored run folders written from simulated histories
must check like real runs: valid when the simulation is correct, invalid with
the injected anomaly's kind when one is spliced in, and the transactions the
serializability checker recovers from the log and the parquet files must be
exactly the simulated ones."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from checkers import serializability
from checkers.base import Verdict
from checkers.txn_model import INITIAL, RowRef, Write
from harness.bench.inject import EXPECTED
from harness.bench.synth_run import LOADER, write_run
from harness.check.pipeline import check_run
from harness.core.history import load_history
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE
from harness.deltalog import read_log
from tests.conftest import run_cli


def _recovered(run_dir: Path):
    return serializability.extract(load_history(run_dir / "history.jsonl"), read_log(str(run_dir / "table")))


def _same_txns(info, recovered) -> None:
    """The recovered transactions are the simulated ones, INITIAL renamed to
    the setup op that loaded the initial rows, versions mapped to the log's."""

    def w(x):
        return LOADER if x == INITIAL else x

    tv = info.table_version
    want = {
        t.id: (
            tv[t.version],
            tv[t.read_version] if t.read_version is not None else None,
            frozenset(RowRef(r.key, w(r.writer)) for r in t.reads),
            frozenset(Write(x.key, w(x.prev)) for x in t.writes),
            frozenset(RowRef(r.key, w(r.writer)) for r in t.deletes),
            t.predicates,
            t.isolation,
            t.operation,
        )
        for t in info.history.txns
    }
    got = {
        t.id: (
            t.version,
            t.read_version,
            frozenset(t.reads),
            frozenset(t.writes),
            frozenset(t.deletes),
            t.predicates,
            t.isolation,
            t.operation,
        )
        for t in recovered.txns
        if not t.id.startswith("setup.")
    }
    assert got.keys() == want.keys()
    diff = [tid for tid in want if want[tid] != got[tid]]
    assert not diff, (diff[0], want[diff[0]], got[diff[0]])
    assert recovered.failed == set(info.history.failed)


@pytest.mark.parametrize("level", [WRITE_SERIALIZABLE, SERIALIZABLE])
def test_generated_run_is_valid_and_recovers_the_simulated_transactions(tmp_path: Path, level: str) -> None:
    run_dir = tmp_path / "run"
    info = write_run(run_dir, 300, concurrency=6, isolation=level, seed=3, checkpoint_interval=50, keep_history=True)
    assert info.versions == info.committed + 2  # creation + initial rows, then one commit per transaction
    assert info.failed > 0 and info.checkpoints == (info.versions - 1) // 50 >= 5
    log = read_log(str(run_dir / "table"))
    assert log.problems == []
    assert log.check_checkpoints() == []  # the parquet checkpoints agree with the JSON commits
    assert log.checkpoint_versions == list(range(50, info.versions, 50))
    _same_txns(info, _recovered(run_dir))
    report = check_run(run_dir)
    assert report.verdict is Verdict.VALID, report.summary
    assert [r.checker for r in report.results] == ["log-sanity", "serializability"]
    assert report.doc["history"]["ok"] == info.committed and report.doc["history"]["fail"] == info.failed
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["spec"]["workload"] == "simulated" and spec["engine"]["name"] == "simulator"
    assert "harness.bench.synth_run" in spec["repro"] and spec["versions"]["pyarrow"]


def test_copy_on_write_files(tmp_path: Path) -> None:
    """Rewritten files carry their untouched rows over unchanged; no file has
    more than rows_per_file rows; each (key, writer) is live at most once."""
    run_dir = tmp_path / "run"
    write_run(run_dir, 200, seed=5, rows_per_file=3, checkpoint_interval=0)
    log = read_log(str(run_dir / "table"))
    assert log.checkpoint_versions == []
    state = log.live_files(log.latest_version)
    seen = set()
    for path in state:
        rows = log.file_rows(path).to_pylist()
        assert 1 <= len(rows) <= 3
        for r in rows:
            assert (r["k"], r["writer"]) not in seen
            seen.add((r["k"], r["writer"]))
    # An UPDATE's commit removes files and re-adds their other rows unchanged.
    carried = 0
    for _version, commit, adds, removes in log.replay():
        if commit.operation != "UPDATE" or not removes:
            continue
        before = {
            (r["k"], r["writer"], r["prev_writer"]) for rm in removes for r in log.file_rows(rm["path"]).to_pylist()
        }
        after = {(r["k"], r["writer"], r["prev_writer"]) for a in adds for r in log.file_rows(a["path"]).to_pylist()}
        new = {r for r in after if r[1] == commit.commit_info["dj.op"]}
        assert after - new <= before
        assert {(k, p) for k, _, p in new} <= {(k, w) for k, w, _ in before}  # each new version replaces one read
        carried += len(after - new)
    assert carried > 0


def test_commit_count(tmp_path: Path) -> None:
    info = write_run(tmp_path / "run", 1000, commits=150, checkpoint_interval=0)
    assert info.versions == 150
    report = check_run(tmp_path / "run")
    assert report.verdict is Verdict.VALID, report.summary


@pytest.mark.parametrize("kind", sorted(k for k in EXPECTED if k != "G0"))
def test_injected_anomaly_is_found_in_the_stored_run(tmp_path: Path, kind: str) -> None:
    run_dir = tmp_path / "run"
    info = write_run(run_dir, 200, concurrency=5, seed=11, inject=kind, checkpoint_interval=0, keep_history=True)
    _same_txns(info, _recovered(run_dir))
    report = check_run(run_dir)
    ser = report.results[1]
    assert report.results[0].verdict is Verdict.VALID, report.results[0].explanation
    expected = EXPECTED[kind]
    if expected is None:
        assert report.verdict is Verdict.VALID, report.summary
        assert ser.stats["reorderings"] >= 1
        return
    assert report.verdict is Verdict.INVALID, report.summary
    assert expected[0] in {a.kind for a in ser.anomalies}, ser.explanation
    flagged = {op for a in ser.anomalies if a.kind == expected[0] for op in a.ops}
    assert flagged <= set(info.injection.ids)


def test_injected_write_cycle(tmp_path: Path) -> None:
    """G0 (each txn overwrote the other's version): a cycle among exactly
    the injected transactions, whatever kind the analysis names it."""
    run_dir = tmp_path / "run"
    info = write_run(run_dir, 200, seed=2, inject="G0", checkpoint_interval=0, keep_history=True)
    _same_txns(info, _recovered(run_dir))
    report = check_run(run_dir)
    assert report.verdict is Verdict.INVALID
    cycles = [a for a in report.results[1].anomalies if a.kind in ("G0", "G1c", "G-single", "G2-item", "G2")]
    assert cycles and all(set(a.ops) <= set(info.injection.ids) for a in cycles)


def test_history_order_needs_a_serializable_table(tmp_path: Path) -> None:
    """The injected deleteTxn commits at Serializable in a WriteSerializable
    run: the log changes delta.isolationLevel around it, as an ALTER would."""
    run_dir = tmp_path / "run"
    info = write_run(run_dir, 150, seed=4, inject="history-order", checkpoint_interval=0, keep_history=True)
    log = read_log(str(run_dir / "table"))
    alters = [v for v, c, _, _ in log.replay() if c.operation == "SET TBLPROPERTIES"]
    assert 1 <= len(alters) <= 2
    assert info.versions == info.committed + 2 + len(alters)
    report = check_run(run_dir)
    assert report.verdict is Verdict.INVALID
    a = next(a for a in report.results[1].anomalies if a.kind == "history-order")
    assert a.claim == "C14" and set(a.ops) == set(info.injection.ids)


def test_module_command_writes_a_checkable_run(tmp_path: Path) -> None:
    out = tmp_path / "run"
    gen = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.bench.synth_run",
            str(out),
            "--txns",
            "120",
            "--inject",
            "G2",
            "--checkpoint-interval",
            "50",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert gen.returncode == 0, gen.stderr
    chk = run_cli("check", str(out))
    assert chk.returncode == 1, chk.stdout + chk.stderr
    assert "G2" in chk.stdout and "serializability" in chk.stdout


def test_bench_check_command(tmp_path: Path) -> None:
    proc = run_cli("bench-check", "--commits", "300", "--dir", str(tmp_path / "b"), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "300 commits: generated in" in proc.stdout
    assert "300 commits: check" in proc.stdout and "peak RSS" in proc.stdout and "verdict valid" in proc.stdout
    # Where the time went, stage by stage.
    assert "stages: read log" in proc.stdout and "load history" in proc.stdout, proc.stdout
    assert "checker serializability" in proc.stdout and "in its reader processes" in proc.stdout, proc.stdout
    assert "this machine: a 5M-step Python loop takes" in proc.stdout, proc.stdout
    again = run_cli("bench-check", "--commits", "300", "--dir", str(tmp_path / "b"), timeout=300)
    assert again.returncode == 0 and "reusing" in again.stdout
    bad = run_cli("bench-check", "--commits", "x")
    assert bad.returncode == 2 and "--commits" in bad.stderr
