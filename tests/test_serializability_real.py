"""The serializability checker on tables written by a real engine (delta-rs,
local directory): transactions recovered from the log and the rows' writer /
prev_writer columns, and a real history-order violation caught."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from checkers import serializability
from checkers.base import Verdict
from checkers.txn_model import RowRef, Write
from harness.deltalog import read_log
from tests.synth import SynthRun

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("k", pa.int64()), ("writer", pa.string()), ("prev_writer", pa.string())])


def _rows(rows: list[tuple[int, str, str | None]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


def _tag(op: str) -> CommitProperties:
    return CommitProperties(custom_metadata={"dj.op": op})


def _table(path: Path, level: str) -> str:
    uri = str(path)
    DeltaTable.create(uri, SCHEMA, configuration={"delta.isolationLevel": level})
    write_deltalake(
        uri,
        _rows([(1, "w1", None), (2, "w1", None), (3, "w1", None), (4, "w1", None)]),
        mode="append",
        commit_properties=_tag("w1"),
    )
    return uri


def _history(ops: list[tuple[str, str, dict]], level_default: str = "Serializable"):
    run = SynthRun()
    run.invoke("setup.1", "create-table", {"default_isolation": level_default}, time=0, process="setup")
    run.complete("setup.1", "ok", time=1)
    for n, (op_id, f, value) in enumerate(ops):
        run.invoke(op_id, f, value, time=10 + 10 * n, process=n)
        run.complete(op_id, "ok", time=15 + 10 * n)
    return run.history()


def test_update_and_delete_are_recovered_from_the_data(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", "WriteSerializable")
    DeltaTable(uri).update(
        predicate="k = 2", updates={"prev_writer": "writer", "writer": "'u1'"}, commit_properties=_tag("u1")
    )
    DeltaTable(uri).delete("k = 4", commit_properties=_tag("d1"))
    history = _history(
        [("w1", "append", {}), ("u1", "update", {}), ("d1", "delete", {"predicate": [4, 4]})], "WriteSerializable"
    )
    h = serializability.extract(history, read_log(uri))
    by_id = {t.id: t for t in h.txns}
    assert [t.id for t in h.txns] == ["w1", "u1", "d1"]
    assert set(by_id["w1"].writes) == {Write(k) for k in (1, 2, 3, 4)}
    # The copy-on-write rewrite carried k=1,3,4 over; only k=2 is a new version.
    assert by_id["u1"].writes == (Write(2, "w1"),)
    assert by_id["d1"].writes == () and by_id["d1"].deletes == (RowRef(4, "w1"),)
    assert {t.isolation for t in h.txns} == {"WriteSerializable"}
    res = serializability.check(history, read_log(uri))
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["read_write_transactions"] == 2


def test_real_delta_rs_history_order_violation_under_serializable(tmp_path: Path) -> None:
    """Spec C16 under Serializable: a DELETE that read the table before a
    concurrent INSERT committed must fail. delta-rs 1.6 lets a DELETE with no
    predicate commit anyway (a finding); the checker must report it."""
    uri = _table(tmp_path / "t", "Serializable")
    deleter = DeltaTable(uri)  # both start from the same snapshot
    inserter = DeltaTable(uri)
    write_deltalake(inserter, _rows([(9, "i1", None)]), mode="append", commit_properties=_tag("i1"))
    try:
        deleter.delete(commit_properties=_tag("del1"))
    except CommitFailedError as exc:  # the behaviour the spec requires: the finding is gone
        pytest.fail(
            f"delta-rs now rejects the DELETE as spec C16 requires ({exc}): this test needs another source of "
            "a real history-order violation"
        )
    history = _history(
        [("w1", "append", {}), ("i1", "append", {}), ("del1", "delete", {"predicate": [-(2**62), 2**62]})]
    )
    log = read_log(uri)
    h = serializability.extract(history, log)
    dele = next(t for t in h.txns if t.id == "del1")
    assert dele.read_version == 1, "delta-rs records readVersion on DELETE commits"
    assert set(dele.deletes) == {RowRef(k, "w1") for k in (1, 2, 3, 4)}
    res = serializability.check(history, log)
    assert res.verdict is Verdict.INVALID, res.explanation
    a = res.anomalies[0]
    assert a.kind == "history-order" and a.claim == "C14"
    assert a.ops == ["del1", "i1"]
    assert "row 9" in a.explanation and "Serializable" in a.explanation
    assert a.details["dot"].startswith('digraph "history-order')


def test_same_schedule_under_write_serializable_is_a_valid_reordering(tmp_path: Path) -> None:
    uri = _table(tmp_path / "t", "WriteSerializable")
    deleter, inserter = DeltaTable(uri), DeltaTable(uri)
    write_deltalake(inserter, _rows([(9, "i1", None)]), mode="append", commit_properties=_tag("i1"))
    deleter.delete(commit_properties=_tag("del1"))
    history = _history(
        [("w1", "append", {}), ("i1", "append", {}), ("del1", "delete", {"predicate": [-(2**62), 2**62]})],
        "WriteSerializable",
    )
    res = serializability.check(history, read_log(uri))
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["reorderings"] == 1
    assert "WriteSerializable allows" in res.explanation
