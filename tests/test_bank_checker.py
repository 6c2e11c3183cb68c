"""The bank invariant on synthetic histories and logs: it passes a correct
one and catches money created or lost, at a version and in a read."""

from __future__ import annotations

import json

import pyarrow as pa

from checkers import bank
from checkers.base import Verdict
from harness.core.history import parse_lines
from harness.deltalog import TransactionLog
from tests.synth import add_action, create_actions, remove_action


def _file(rows: list[tuple[int, int]]) -> pa.Table:
    return pa.table(
        {"k": pa.array([k for k, _ in rows], pa.int64()), "balance": pa.array([b for _, b in rows], pa.int64())}
    )


def _history(read_balances: list[list[int]] | None = None) -> object:
    events = [
        {
            "index": 0,
            "time": 0,
            "process": "setup",
            "type": "invoke",
            "f": "load",
            "id": "setup.2",
            "value": {"total": 200},
        },
        {"index": 1, "time": 1, "process": "setup", "type": "ok", "f": "load", "id": "setup.2", "value": None},
        {"index": 2, "time": 2, "process": 0, "type": "invoke", "f": "read", "id": "0.1", "value": {}},
        {
            "index": 3,
            "time": 3,
            "process": 0,
            "type": "ok",
            "f": "read",
            "id": "0.1",
            "value": {"balances": read_balances or [[0, 100], [1, 100]]},
        },
    ]
    return parse_lines(json.dumps(e) + "\n" for e in events)


def _log(transfer_rows: list[tuple[int, int]]) -> TransactionLog:
    commits = [
        create_actions(),
        [add_action("load.parquet", 2)],
        [remove_action("load.parquet"), add_action("t1.parquet", 2)],
    ]
    return TransactionLog.from_commits(
        commits, {"load.parquet": _file([(0, 100), (1, 100)]), "t1.parquet": _file(transfer_rows)}
    )


def test_conserved_total_is_valid() -> None:
    res = bank.check(_history(), _log([(0, 95), (1, 105)]))
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["expected_total"] == 200


def test_money_created_by_a_commit_is_caught() -> None:
    res = bank.check(_history(), _log([(0, 95), (1, 110)]))
    assert res.verdict is Verdict.INVALID
    a = res.anomalies[0]
    assert a.kind == "wrong-total" and a.versions == [2]
    assert "205" in a.explanation and "created" in a.explanation


def test_a_read_with_the_wrong_total_is_caught() -> None:
    res = bank.check(_history([[0, 95], [1, 100]]), _log([(0, 95), (1, 105)]))
    assert res.verdict is Verdict.INVALID
    assert [a.kind for a in res.anomalies] == ["read-wrong-total"]
    assert "195" in res.anomalies[0].explanation and "0.1" in res.anomalies[0].explanation


def test_a_load_whose_total_never_appears_is_caught() -> None:
    """The load was acknowledged with 200 but the table only ever held 150
    (a partial load): no version can be checked against a total the table
    never had, and that is itself the anomaly."""
    commits = [
        create_actions(),
        [add_action("load.parquet", 2)],
        [remove_action("load.parquet"), add_action("t1.parquet", 2)],
    ]
    log = TransactionLog.from_commits(
        commits, {"load.parquet": _file([(0, 100), (1, 50)]), "t1.parquet": _file([(0, 75), (1, 75)])}
    )
    res = bank.check(_history(), log)
    assert res.verdict is Verdict.INVALID, res.explanation
    a = res.anomalies[0]
    assert a.kind == "load-never-visible" and a.claim == "C6" and a.ops == ["setup.2"]
    assert "150" in a.explanation


def test_a_lost_load_is_caught_as_c7() -> None:
    log = TransactionLog.from_commits([create_actions()], {})
    res = bank.check(_history(), log)
    assert res.verdict is Verdict.INVALID
    assert [(a.kind, a.claim) for a in res.anomalies][0] == ("load-never-visible", "C7")


def test_the_valid_text_counts_the_versions_it_checked() -> None:
    res = bank.check(_history(), _log([(0, 95), (1, 105)]))
    assert res.stats["load_version"] == 1 and res.stats["versions_checked"] == 2
    assert "at all 2 version(s) since the load (version 1)" in res.explanation
