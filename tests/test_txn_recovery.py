"""Whose commit is it, where the log does not say: the serializability
checker recovers a commit's op from the writers of the row versions it
brings in, also when an engine brings back versions an earlier commit had
replaced (delta-rs 0.8.1's overwrite re-adding rows from a removed file)."""

from __future__ import annotations

from typing import Any

from checkers import serializability
from tests.keyed_synth import KeyedRun


def _row(k: int, w: str, prev: str | None = None) -> dict[str, Any]:
    return {"id": k, "k": k, "writer": w, "prev_writer": prev}


def _overwrites(third: list[dict[str, Any]]) -> KeyedRun:
    """setup.2 loads keys 0-3 (v1); 1.1 rewrites keys 0 and 1 (v2); the
    third commit (v3), from the snapshot of v1, removes v1's file again and
    adds `third`. No commit names its op."""
    run = KeyedRun()
    run.op("setup.2", "load", {}, start=2, end=3, process="setup")
    run.op("1.1", "transfer", {"from": 0, "to": 1}, start=10, end=20, process=1)
    run.op("2.1", "transfer", {"from": 1, "to": 2}, start=11, end=21, process=2)
    run.commit_rows([_row(k, "setup.2") for k in range(4)])
    run.commit_rows(
        [_row(0, "1.1", "setup.2"), _row(1, "1.1", "setup.2"), *map(_row, (2, 3), ["setup.2"] * 2)],
        removes=["f1.parquet"],
    )
    run.commit_rows(third, removes=["f1.parquet"])
    return run


def test_a_commit_that_brings_back_replaced_versions_is_still_its_writers() -> None:
    # 2.1 rewrote keys 1 and 2 from v1, and its file holds v1's key 0 again:
    # a version v2 had replaced, whose writer is not the committer.
    third = [_row(0, "setup.2"), _row(1, "2.1", "setup.2"), _row(2, "2.1", "setup.2"), _row(3, "setup.2")]
    h = serializability.extract(*_overwrites(third).build())
    assert [(t.id, t.version) for t in h.txns] == [("setup.2", 1), ("1.1", 2), ("2.1", 3)]
    assert not h.unknown
    res = serializability.check(*_overwrites(third).build())
    assert any(set(a.ops) == {"1.1", "2.1"} for a in res.anomalies), [(a.kind, a.ops) for a in res.anomalies]


def test_two_first_writers_leave_the_commit_unattributed() -> None:
    # Two ops' first versions in one untagged commit: no one op made it.
    third = [_row(0, "setup.2"), _row(1, "2.1", "setup.2"), _row(2, "2.1", "setup.2"), _row(3, "3.1", "setup.2")]
    h = serializability.extract(*_overwrites(third).build())
    assert [t.id for t in h.txns][-1] == "v3"


def test_versions_whose_writer_is_no_op_are_the_commits_that_bring_them() -> None:
    # A replay's setup commit holds the replayed run's rows as they were at
    # its snapshot: writers of that run (0.1) that are no op of this history.
    run = KeyedRun()
    run.op("setup.2", "setup-append", {"rows": 2}, start=2, end=3, process="setup")
    run.op("3.2", "transfer", {"from": 0, "to": 1}, start=10, end=20, process=3)
    run.commit_rows([_row(0, "0.1", "setup.2"), _row(1, "setup.2")])
    run.commit_rows([_row(0, "3.2", "0.1"), _row(1, "3.2", "setup.2")], removes=["f1.parquet"], read_version=1)
    h = serializability.extract(*run.build())
    assert [t.id for t in h.txns] == ["setup.2", "3.2"]
    assert {(w.key, w.prev) for w in h.txns[1].writes} == {(0, "setup.2"), (1, "setup.2")}
    assert serializability.check(*run.build()).anomalies == []
