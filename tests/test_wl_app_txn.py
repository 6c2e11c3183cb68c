"""The `app-txn` workload and the `app-txn` checker (spec E5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from checkers import app_txn
from harness.core.history import FAIL, OK
from tests.conftest import load_results, only_run_dir, run_cli
from tests.synth import SynthRun, add_action, rows_table


def write(
    run: SynthRun,
    op: str,
    app: str,
    ver: int,
    ids: list[int],
    *,
    start: int,
    end: int,
    type: str = OK,
    process: int = 1,
    skipped: bool | None = None,
    retry_of: str | None = None,
    error: dict | None = None,
) -> None:
    value: dict = {"app_id": app, "txn_version": ver, "ids": ids}
    if retry_of:
        value["retry_of"] = retry_of
    run.invoke(op, "write", value, time=start, process=process)
    done = {**value, "skipped": skipped} if type == OK else None
    run.complete(op, type, time=end, value=done, error=error)


def txn_commit(run: SynthRun, op: str, app: str, ver: int, ids: list[int]) -> int:
    v = run.latest + 1
    path = f"f{v}.parquet"
    run.file_tables[path] = rows_table([(i, op) for i in ids])
    run.raw_commit(
        v,
        [
            {"commitInfo": {"timestamp": v, "operation": "WRITE", "dj.op": op}},
            {"txn": {"appId": app, "version": ver}},
            add_action(path, len(ids)),
        ],
    )
    return v


def retry_run(retry_applied: bool) -> SynthRun:
    """Write 1.1 (app-0, 1001) commits; its retry 1.2 is either skipped
    (correct) or applied again; 2.1 of the same app commits 2002 later."""
    run = SynthRun()
    write(run, "1.1", "app-0", 1001, [10, 11], start=1, end=5, skipped=False)
    txn_commit(run, "1.1", "app-0", 1001, [10, 11])
    write(run, "1.2", "app-0", 1001, [10, 11], start=6, end=8, retry_of="1.1", skipped=not retry_applied)
    if retry_applied:
        txn_commit(run, "1.2", "app-0", 1001, [10, 11])
    write(run, "2.1", "app-0", 2002, [20], start=9, end=12, process=2, skipped=False)
    txn_commit(run, "2.1", "app-0", 2002, [20])
    return run


def test_passes_a_retry_that_was_skipped() -> None:
    res = app_txn.check(*retry_run(retry_applied=False).build())
    assert res.verdict.value == "valid", res.explanation
    assert res.stats["ok_applied"] == 2 and res.stats["ok_skipped"] == 1 and res.stats["retries"] == 1


def test_catches_a_retry_applied_twice() -> None:
    res = app_txn.check(*retry_run(retry_applied=True).build())
    assert res.verdict.value == "invalid"
    [a] = res.anomalies
    assert a.kind == "duplicate-application" and a.claim == "E5"
    assert a.versions == [1, 2] and a.ops == ["1.1", "1.2"]


def test_catches_concurrent_writers_of_one_app_both_committing_one_version() -> None:
    run = SynthRun()
    write(run, "1.1", "app-0", 5, [1], start=1, end=10, skipped=False)
    write(run, "2.1", "app-0", 5, [1], start=2, end=11, process=2, skipped=False)
    txn_commit(run, "1.1", "app-0", 5, [1])
    txn_commit(run, "2.1", "app-0", 5, [1])
    [a] = app_txn.check(*run.build()).anomalies
    assert a.kind == "duplicate-application" and "concurrently with one app id" in a.explanation


def test_catches_a_txn_version_regression() -> None:
    run = SynthRun()
    write(run, "1.1", "app-0", 2001, [1], start=1, end=5, skipped=False)
    txn_commit(run, "1.1", "app-0", 2001, [1])
    write(run, "2.1", "app-0", 1002, [2], start=6, end=8, process=2, skipped=False)
    txn_commit(run, "2.1", "app-0", 1002, [2])
    res = app_txn.check(*run.build())
    assert [a.kind for a in res.anomalies] == ["txn-version-regression"]
    assert res.anomalies[0].versions == [1, 2] and res.anomalies[0].ops == ["2.1"]


def test_catches_a_skip_nothing_justified() -> None:
    """An ok write reports skipped, but its app never committed a version >= its own."""
    run = SynthRun()
    write(run, "1.1", "app-0", 1001, [1], start=1, end=5, skipped=False)
    txn_commit(run, "1.1", "app-0", 1001, [1])
    write(run, "1.2", "app-0", 2001, [2], start=6, end=8, skipped=True)
    res = app_txn.check(*run.build())
    assert [a.kind for a in res.anomalies] == ["lost-write"] and res.anomalies[0].ops == ["1.2"]


def test_a_skip_justified_only_by_a_later_commit_is_lost() -> None:
    """The newer version was committed by an op that began after the skip ended."""
    run = SynthRun()
    write(run, "1.1", "app-0", 1001, [1], start=1, end=5, skipped=True)
    write(run, "2.1", "app-0", 2002, [2], start=6, end=8, process=2, skipped=False)
    txn_commit(run, "2.1", "app-0", 2002, [2])
    assert [a.kind for a in app_txn.check(*run.build()).anomalies] == ["lost-write"]


def test_catches_an_acknowledged_write_with_no_commit() -> None:
    run = SynthRun()
    write(run, "1.1", "app-0", 1001, [1], start=1, end=5, skipped=False)
    assert [a.kind for a in app_txn.check(*run.build()).anomalies] == ["lost-write"]


def test_conflict_classes_between_writers_of_one_app() -> None:
    run = retry_run(retry_applied=False)
    write(
        run,
        "3.1",
        "app-0",
        2003,
        [30],
        start=10,
        end=13,
        type=FAIL,
        process=3,
        error={"class": "ConcurrentTransactionException", "raw": "Concurrent transaction failed."},
    )
    write(
        run,
        "4.1",
        "app-0",
        2004,
        [40],
        start=10,
        end=13,
        type=FAIL,
        process=4,
        error={"class": "commit-conflict-unclassified", "raw": "Failed to commit transaction: 0"},
    )
    res = app_txn.check(*run.build())
    assert res.verdict.value == "valid"
    assert res.stats["conflict_classes_same_app"] == {
        "ConcurrentTransactionException": 1,
        "commit-conflict-unclassified": 1,
    }
    [f] = res.stats["e5_class_findings"]
    assert f["op"] == "4.1" and f["same_app_commits"] == ["2.1"]


def test_generator_shares_apps_and_retries_earlier_pairs() -> None:
    from workloads.app_txn import AppTxnWorkload
    from workloads.base import SlotGenerator

    w = AppTxnWorkload(7)
    ops = {s: [w.next_op(g) for g in [SlotGenerator(7, s)] for _ in range(60)] for s in range(4)}
    apps = {s: {o.value["app_id"] for o in ops[s] if o.f == "write"} for s in range(4)}
    assert apps[0] == apps[2] == {"app-0"} and apps[1] == apps[3] == {"app-1"}
    firsts = {o.id: o.value for o in ops[0] if o.f == "write" and "retry_of" not in o.value}
    retries = [o.value for o in ops[0] if o.f == "write" and "retry_of" in o.value]
    assert retries and all(
        (r["app_id"], r["txn_version"], r["ids"])
        == (firsts[r["retry_of"]]["app_id"], firsts[r["retry_of"]]["txn_version"], firsts[r["retry_of"]]["ids"])
        for r in retries
    )
    # Fresh versions increase per slot and differ across slots.
    vs = [v["txn_version"] for v in firsts.values()]
    assert vs == sorted(vs) and not set(vs) & {o.value["txn_version"] for o in ops[2] if o.f == "write"}


@pytest.mark.integration
def test_app_txn_on_delta_rs(results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--workload",
        "app-txn",
        "--engine",
        "delta-rs",
        "--storage",
        "seaweedfs",  # every workload on SeaweedFS in CI
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    doc = load_results(only_run_dir(results_dir))
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), doc["checkers"]
    a = next(c for c in doc["checkers"] if c["checker"] == "app-txn")
    s = a["stats"]
    assert s["txn_commits"] > 0 and s["ok_applied"] > 0 and s["ok_skipped"] > 0 and s["retries"] > 0
    assert s["apps"] == ["app-0", "app-1"]
    # Every conflict between writers of one app says E5.
    assert s["e5_class_findings"] == []
    assert set(doc["history"]["error_classes"]) <= {"ConcurrentTransactionException"}


@pytest.mark.integration
def test_app_txn_on_sail_is_reported_unsupported(results_dir: Path) -> None:
    """Sail 0.7.2 ignores txnAppId/txnVersion (no txn action; a re-sent pair is
    applied again), so every idempotent write is reported unsupported and the
    checker says unknown rather than pass."""
    res = run_cli(
        "run",
        "--workload",
        "app-txn",
        "--engine",
        "sail",
        "--storage",
        "local",
        "--nodes",
        "1",
        "--concurrency",
        "4",
        "--time-limit",
        "4",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode == 3, res.stdout + res.stderr
    doc = load_results(only_run_dir(results_dir))
    a = next(c for c in doc["checkers"] if c["checker"] == "app-txn")
    assert a["verdict"] == "unknown" and a["stats"]["writes"] > 0
    assert a["stats"]["unsupported"] == a["stats"]["writes"] == doc["history"]["by_f"]["write"]
    assert doc["history"]["error_classes"] == {"unsupported": a["stats"]["writes"]}
    assert "unsupported" in a["explanation"]
