"""The `upsert` workload (MERGE) and the `unique-key` checker: synthetic
histories for the checkers, short real runs on delta-rs and Sail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers import CHECKERS, serializability, unique_key
from checkers.base import Verdict
from checkers.txn_model import INITIAL, RowRef
from harness.deltalog import read_log
from tests.conftest import load_results, only_run_dir, run_cli
from tests.keyed_synth import KeyedRun
from workloads import make_workload
from workloads.base import SlotGenerator


def _row(i: int, k: int, w: str, prev: str | None = None) -> dict:
    return {"id": i, "k": k, "v": i, "writer": w, "prev_writer": prev}


def _merge(run: KeyedRun, op_id: str, keys: list[int], ids: list[int], start: int, end: int, process: int) -> None:
    run.op(op_id, "merge", {"ids": ids, "read_keys": keys, "values": ids}, start=start, end=end, process=process)


def _double_insert() -> KeyedRun:
    """Two concurrent MERGEs both find key 1 absent and both insert it."""
    run = KeyedRun()
    _merge(run, "1.1", [1], [10], 10, 30, 1)
    _merge(run, "2.1", [1], [20], 11, 31, 2)
    run.commit_rows([_row(10, 1, "1.1")], op="1.1")  # v1
    run.commit_rows([_row(20, 1, "2.1")], op="2.1")  # v2
    return run


def _insert_then_update() -> KeyedRun:
    """The serial outcome: the second MERGE matches the first one's row."""
    run = KeyedRun()
    _merge(run, "1.1", [1, 2], [10, 11], 10, 20, 1)
    _merge(run, "2.1", [1], [20], 30, 40, 2)
    run.commit_rows([_row(10, 1, "1.1"), _row(11, 2, "1.1")], op="1.1")  # v1: f1
    # Copy-on-write: f1 rewritten, key 2 carried over, key 1 replaced.
    run.commit_rows([_row(20, 1, "2.1", "1.1"), _row(11, 2, "1.1")], op="2.1", removes=["f1.parquet"])  # v2
    return run


def test_unique_key_catches_two_inserts_of_one_absent_key() -> None:
    res = unique_key.check(*_double_insert().build())
    assert res.verdict is Verdict.INVALID, res.explanation
    (a,) = res.anomalies
    assert a.kind == "duplicate-key" and a.claim == "C15"  # default level WriteSerializable
    assert a.ops == ["1.1", "2.1"] and a.versions == [1, 2] and a.rows == [10, 20]
    assert "k=1" in a.explanation and "inserted it as absent" in a.explanation and "M3" in a.explanation
    json.dumps(res.to_json())


def test_unique_key_claim_follows_the_tables_level() -> None:
    run = _double_insert()
    run.commits[0][2]["metaData"]["configuration"] = {"delta.isolationLevel": "Serializable"}
    (a,) = unique_key.check(*run.build()).anomalies
    assert a.claim == "C14"


def test_unique_key_passes_an_insert_then_a_matched_update() -> None:
    res = unique_key.check(*_insert_then_update().build())
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["keys"] == 2 and res.stats["duplicate_keys"] == 0


def test_unique_key_reads_the_declared_row_key() -> None:
    run = KeyedRun(row_key="v")  # every row has its own v: no duplicates by v
    _merge(run, "1.1", [1], [10], 10, 30, 1)
    _merge(run, "2.1", [1], [20], 11, 31, 2)
    run.commit_rows([_row(10, 1, "1.1")], op="1.1")
    run.commit_rows([_row(20, 1, "2.1")], op="2.1")
    res = unique_key.check(*run.build())
    assert res.verdict is Verdict.VALID and res.stats["key_column"] == "v"


def test_a_merge_insert_reads_the_key_absent() -> None:
    """read_keys + no prev_writer: the MERGE read the key absent, so two
    inserts of one key form a lost update (G-single) for serializability."""
    history, log = _double_insert().build()
    txns = {t.id: t for t in serializability.extract(history, log).txns}
    assert txns["2.1"].reads == (RowRef(1, INITIAL),)
    res = serializability.check(history, log)
    assert res.verdict is Verdict.INVALID
    assert any(a.kind == "G-single" and set(a.ops) == {"1.1", "2.1"} for a in res.anomalies), res.explanation


def test_serial_merges_are_serializable() -> None:
    history, log = _insert_then_update().build()
    txns = {t.id: t for t in serializability.extract(history, log).txns}
    assert set(txns["1.1"].reads) == {RowRef(1, INITIAL), RowRef(2, INITIAL)}
    res = serializability.check(history, log)
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["read_write_transactions"] == 2


def test_an_insert_after_a_delete_read_the_deleters_absence() -> None:
    run = KeyedRun()
    _merge(run, "1.1", [1], [10], 10, 20, 1)
    run.op("2.1", "delete", {"predicate": [1, 1]}, start=30, end=40, process=2)
    _merge(run, "3.1", [1], [30], 50, 60, 3)
    run.commit_rows([_row(10, 1, "1.1")], op="1.1")
    run.commit_rows([], op="2.1", removes=["f1.parquet"], read_version=1)
    run.commit_rows([_row(30, 1, "3.1")], op="3.1")
    history, log = run.build()
    txns = {t.id: t for t in serializability.extract(history, log).txns}
    assert txns["3.1"].reads == (RowRef(1, "2.1"),)
    assert serializability.check(history, log).verdict is Verdict.VALID
    assert unique_key.check(history, log).verdict is Verdict.VALID


def test_upsert_generator_draws_distinct_keys_and_names_them() -> None:
    wl = make_workload("upsert", 7)
    assert "unique-key" in wl.checkers and set(wl.checkers) <= set(CHECKERS)
    gen = SlotGenerator(7, 0)
    merges = [op for op in (wl.next_op(gen) for _ in range(200)) if op.f == "merge"]
    assert merges and all(
        len(set(op.value["read_keys"])) == len(op.value["read_keys"]) == len(op.value["ids"]) for op in merges
    )
    assert {len(op.value["read_keys"]) for op in merges} == {1, 2, 3}
    assert wl.primitive("merge") == "merge"


def _run(engine: str, storage: str, results_dir: Path, *extra: str) -> tuple[dict, Path]:
    res = run_cli(
        "run",
        "--workload",
        "upsert",
        "--engine",
        engine,
        "--storage",
        storage,
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        *extra,
        timeout=240,
    )
    run_dir = only_run_dir(results_dir)
    doc = load_results(run_dir)
    assert res.returncode == 0, res.stdout + res.stderr
    return doc, run_dir


def _assert_both_branches_committed(run_dir: Path) -> None:
    log = read_log(str(run_dir / "table"))
    rows = [r for _, _, adds, _ in log.replay() for a in adds for r in log.file_rows(a["path"]).to_pylist()]
    assert any(r["prev_writer"] is None for r in rows), "no MERGE inserted"
    assert any(r["prev_writer"] is not None for r in rows), "no MERGE matched"


@pytest.mark.integration
@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_upsert_on_delta_rs(level: str, results_dir: Path) -> None:
    doc, run_dir = _run("delta-rs", "local", results_dir, "--isolation", level)
    by = {c["checker"]: c for c in doc["checkers"]}
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), doc["checkers"]
    assert by["serializability"]["stats"]["levels"] == [level]
    assert by["serializability"]["stats"]["read_write_transactions"] > 0
    assert by["unique-key"]["stats"]["keys"] > 0
    _assert_both_branches_committed(run_dir)
    # Concurrent MERGEs conflict (spec M3), and delta-rs names the class.
    assert set(doc["history"]["error_classes"]) <= {"ConcurrentAppendException", "ConcurrentDeleteReadException"}


@pytest.mark.integration
def test_upsert_on_sail(results_dir: Path) -> None:
    doc, run_dir = _run("sail", "seaweedfs", results_dir)  # every workload on SeaweedFS in CI
    by = {c["checker"]: c for c in doc["checkers"]}
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), doc["checkers"]
    assert by["serializability"]["stats"]["read_write_transactions"] > 0
    _assert_both_branches_committed(run_dir)
    # Sail 0.7.2 reports MERGE conflicts without a class (README finding, E1-E6).
    assert set(doc["history"]["error_classes"]) <= {"commit-conflict-unclassified", "not-a-conflict"}
