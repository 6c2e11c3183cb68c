"""The partitioned workload and the partition-conflicts checker (spec P1, P2):
synthetic histories for the checker, short real runs on delta-rs and Sail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checkers import partitions
from checkers.base import Verdict
from checkers.facts import commit_op_id
from tests.conftest import load_results, only_run_dir, run_cli
from tests.known import Known, RunView, assert_only_known
from tests.synth import SynthRun, rows_table
from workloads.base import SlotGenerator
from workloads.partitioned import PARTITIONS, PartitionedWorkload

A, B = list(PARTITIONS[0]), list(PARTITIONS[1])
CONFLICT = {"class": "ConcurrentAppendException", "raw": "Commit failed: a concurrent transactions added new data"}


def _partitioned_run() -> SynthRun:
    run = SynthRun()
    for a in run.commits[0]:
        if "metaData" in a:
            schema = json.loads(a["metaData"]["schemaString"])
            schema["fields"] += [
                {"name": c, "type": "string", "nullable": True, "metadata": {}} for c in ("day", "country")
            ]
            a["metaData"]["schemaString"] = json.dumps(schema)
            a["metaData"]["partitionColumns"] = ["day", "country"]
    return run


def _pcommit(
    run: SynthRun, op: str, rows: list[tuple[int, str]], partition: list[str], removes: list[tuple[str, list[str]]] = ()
) -> int:
    """One commit by `op`: one file of `rows` in `partition`, removing files."""
    v = run.latest + 1
    path = f"day={partition[0]}/country={partition[1]}/f{v}.parquet"
    run.file_tables[path] = rows_table(rows)
    pv = {"day": partition[0], "country": partition[1]}
    actions: list[dict] = [{"commitInfo": {"timestamp": v, "operation": "UPDATE", "dj.op": op}}]
    actions += [
        {
            "remove": {
                "path": p,
                "deletionTimestamp": 0,
                "dataChange": True,
                "partitionValues": {"day": part[0], "country": part[1]},
            }
        }
        for p, part in removes
    ]
    actions.append(
        {
            "add": {
                "path": path,
                "partitionValues": pv,
                "size": 100,
                "modificationTime": 0,
                "dataChange": True,
                "stats": json.dumps({"numRecords": len(rows)}),
            }
        }
    )
    run.commits[v] = actions
    return v


def _load(run: SynthRun) -> tuple[str, str]:
    """Setup rows in partitions A and B (v1, v2); returns their files."""
    _pcommit(run, "setup.2", [(1, "setup.2")], A)
    _pcommit(run, "setup.3", [(2, "setup.2")], B)
    return f"day={A[0]}/country={A[1]}/f1.parquet", f"day={B[0]}/country={B[1]}/f2.parquet"


def _update(
    run: SynthRun, op: str, partition: list[str], variant: str, start: int, end: int, type: str = "ok", process: int = 1
) -> None:
    run.invoke(
        op, "update", {"partition": partition, "variant": variant, "mod": 5, "rem": 1}, time=start, process=process
    )
    run.complete(op, type, time=end, error=CONFLICT if type == "fail" else None)


def _race(
    loser_partition: list[str], loser_variant: str, winner_partition: list[str] = A, winner_variant: str = "literal"
) -> SynthRun:
    """The winner commits an UPDATE in its partition while the loser runs and fails."""
    run = _partitioned_run()
    fa, fb = _load(run)
    _update(run, "1.1", winner_partition, winner_variant, 100, 200, process=1)
    _pcommit(run, "1.1", [(1, "1.1")], winner_partition, [(fa, A)])
    _update(run, "2.1", loser_partition, loser_variant, 110, 250, type="fail", process=2)
    return run


def test_literal_ops_on_disjoint_partitions_conflicting_is_p1() -> None:
    res = partitions.check(*_race(B, "literal").build())
    assert res.verdict is Verdict.INVALID
    (a,) = res.anomalies
    assert a.kind == "partition-conflict" and a.claim == "P1"
    assert a.ops == ["2.1", "1.1"] and a.versions == [3]
    assert "day=2024-01-01/country=pt" in a.explanation and "ConcurrentAppendException" in a.explanation
    assert res.stats["p1_deviations"] == 1


def test_conflict_in_the_same_partition_is_valid() -> None:
    res = partitions.check(*_race(A, "literal").build())
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["conflict_rate"]["update"]["literal"] == {"attempts": 2, "conflicts": 1, "rate": 0.5}


def test_no_literal_loser_may_conflict_and_is_counted() -> None:
    res = partitions.check(*_race(B, "no-literal").build())
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["conflict_rate_by_variant"] == {
        "literal": {"attempts": 1, "conflicts": 0, "rate": 0.0},
        "no-literal": {"attempts": 1, "conflicts": 1, "rate": 1.0},
    }
    assert "no-literal: 1/1" in res.explanation


def test_no_literal_winner_excuses_the_conflict() -> None:
    res = partitions.check(*_race(B, "literal", winner_variant="no-literal").build())
    assert res.verdict is Verdict.VALID, res.explanation


def test_blind_append_refused_after_a_literal_update_elsewhere_is_p1() -> None:
    run = _partitioned_run()
    fa, _ = _load(run)
    _update(run, "1.1", A, "literal", 100, 200)
    _pcommit(run, "1.1", [(1, "1.1")], A, [(fa, A)])
    run.invoke("2.1", "append", {"partition": B, "ids": [9], "via": "sql"}, time=120, process=2)
    run.complete("2.1", "fail", time=260, error={"class": "ConcurrentDeleteReadException", "raw": "x"})
    res = partitions.check(*run.build())
    (a,) = res.anomalies
    assert a.kind == "partition-conflict" and "blind-append" in a.explanation


def test_commit_that_rewrites_another_partition_is_flagged() -> None:
    run = _partitioned_run()
    fa, fb = _load(run)
    _update(run, "1.1", A, "literal", 100, 200)
    _pcommit(run, "1.1", [(1, "1.1")], A, [(fa, A), (fb, B)])  # also removes B's file
    res = partitions.check(*run.build())
    (a,) = res.anomalies
    assert a.kind == "foreign-partition-rewrite" and a.claim == "P1" and a.versions == [3]
    assert fb in a.details["paths"]


def test_unpartitioned_table_is_unknown() -> None:
    run = SynthRun()
    run.append("1.1", [1], start=1, end=2, process=1)
    run.commit_op("1.1", [1])
    assert partitions.check(*run.build()).verdict is Verdict.UNKNOWN


def test_generator_variants_name_the_same_rows() -> None:
    """Both variants of one op change the same rows: only the partition
    predicates differ (spec P2's comparison is like for like)."""
    w = PartitionedWorkload(seed=7)
    gen = SlotGenerator(7, 0)
    ops = [w.next_op(gen) for _ in range(300)]
    kinds = {(op.f, op.value.get("variant")) for op in ops if op.f != "read"}
    for f in ("update", "delete", "merge"):
        assert (f, "literal") in kinds and (f, "no-literal") in kinds
    upd = next(op for op in ops if op.f == "update")
    lit = w._where({**upd.value, "variant": "literal"})
    nolit = w._where({**upd.value, "variant": "no-literal"})
    assert "day = " in lit and "country = " in lit and "day" not in nolit and "id >= " in nolit
    assert lit.split(" AND id % ")[1] == nolit.split(" AND id % ")[1]


# ---------------------------------------------------------------------------
# Real runs.


# A P1 deviation needs a refused literal op whose every concurrent writer is
# on another partition; a random schedule under CI load can meet none (one CI
# run on Sail: 7 literal conflicts, each beside a same-partition writer), so
# the finding gets up to this many runs before it counts as gone.
P1_ATTEMPTS = 3


def _real_run(engine: str, storage: str, results_dir: Path) -> tuple[subprocess.CompletedProcess, dict, dict]:
    """One partitioned run; asserts what must hold in every run, and returns
    the CLI result, results.json and the partition-conflicts result."""
    # Sail on S3 commits about one DML op per second here, and one CI run
    # under load saw only 4 literal ones in 6 s, each beside a same-partition
    # writer: 15 s gave 8-12 P1 deviations in each of three runs alone.
    seconds = "6" if storage == "local" else "15"
    res = run_cli(
        "run",
        "--workload",
        "partitioned",
        "--engine",
        engine,
        "--storage",
        storage,
        "--concurrency",
        "4",
        "--time-limit",
        seconds,
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    doc = load_results(only_run_dir(results_dir))
    by_name = {c["checker"]: c for c in doc["checkers"]}
    others = {n: c["verdict"] for n, c in by_name.items() if n != partitions.NAME}
    if engine == "sail" and others["serializability"] == "unknown":
        # A Sail SQL DELETE commit names no op and writes no row, so whose
        # deletion it was cannot be recovered: unknown, never valid.
        assert "could not be fully recovered" in by_name["serializability"]["explanation"]
        others.pop("serializability")
    assert set(others.values()) == {"valid"}, [c for c in doc["checkers"] if c["verdict"] != "valid"]
    pc = by_name[partitions.NAME]
    rates = pc["stats"]["conflict_rate_by_variant"]
    assert rates["literal"]["attempts"] > 0 and rates["no-literal"]["attempts"] > 0
    assert pc["stats"]["commits_checked"] > 0
    assert "unsupported" not in doc["history"]["error_classes"]
    assert not any(a["kind"] == "foreign-partition-rewrite" for a in pc["anomalies"]), pc["anomalies"]
    return res, doc, pc


# An engine error that is a commit conflict (E*), or Sail's unclassified one.
def _is_conflict_error(error: dict[str, Any] | None) -> bool:
    cls = str((error or {}).get("class") or "")
    return cls.startswith("Concurrent") or cls in ("commit-conflict-unclassified", "ProtocolChangedException")


def _disjoint_partition_conflict(view: RunView, a: dict[str, Any]) -> str | None:
    """None when the history and the log show it: the first op of the anomaly
    failed with a conflict, named its partition (a literal or a blind
    append), and every write concurrent with it (ok, or info up to its
    completion) named another
    partition, with no commit of theirs touching the loser's."""
    if not a.get("ops"):
        return "it names no op"
    loser = a["ops"][0]
    inv, done = view.invokes.get(loser), view.completions.get(loser)
    if inv is None or done is None:
        return f"op {loser} is not in the history"
    if done["type"] != "fail" or not _is_conflict_error(done.get("error")):
        return f"op {loser} did not fail with a conflict ({done['type']}, {done.get('error')})"
    value = inv.get("value") or {}
    if value.get("variant") == "no-literal":
        return f"op {loser} names no partition (spec P2 lets it conflict)"
    part = value.get("partition")
    if not part:
        return f"op {loser} names no partition"
    concurrent = []
    for op_id, w in view.invokes.items():
        end = view.completions.get(op_id)
        if op_id == loser or w["f"] == "read" or not isinstance(w["process"], int) or end is None:
            continue
        # An info op's span ends where its client gave up, as a Jepsen
        # history has it; a fail committed nothing.
        if end["type"] != "fail" and w["time"] < done["time"] and end["time"] > inv["time"]:
            concurrent.append(op_id)
    if not concurrent:
        return f"no write was concurrent with op {loser}"
    touched: dict[str, set[tuple[str, str]]] = {}
    for commit in view.log.commits.values():
        op_id = commit_op_id(commit.commit_info)
        for f in [*commit.adds, *commit.removes]:
            pv = f.get("partitionValues") or {}
            touched.setdefault(str(op_id), set()).add((pv.get("day"), pv.get("country")))
    for op_id in concurrent:
        wv = view.invokes[op_id].get("value") or {}
        if wv.get("variant") == "no-literal":
            return f"the concurrent {op_id} names no partition"
        if wv.get("partition") == part or tuple(part) in touched.get(op_id, set()):
            return f"the concurrent {op_id} wrote partition {part} too"
    return None


def _p1_known(engine: str) -> Known:
    return Known(
        f"{engine}:P1:disjoint-partition-conflict",
        "P1",
        f"{engine} refuses a write on a partition no concurrent writer touched",
        frozenset({"partition-conflict"}),
        _disjoint_partition_conflict,
    )


@pytest.mark.integration
@pytest.mark.parametrize("engine, storage", [("delta-rs", "local"), ("sail", "seaweedfs")])
def test_partitioned_run_reports_conflict_rates_and_p1(engine: str, storage: str, results_dir: Path) -> None:
    """Both engines are known to refuse writes on disjoint partitions
    (delta-rs: blind appends fail with E2 after a literal UPDATE/MERGE
    elsewhere; Sail: any non-append write fails "Failed to commit
    transaction: 0" after any concurrent commit): each P1 anomaly must be
    that, by the history and the log, and every other checker valid."""
    stats = []
    for attempt in range(1, P1_ATTEMPTS + 1):
        res, doc, pc = _real_run(engine, storage, results_dir / f"attempt-{attempt}")
        stats.append(pc["stats"])
        if pc["anomalies"]:
            break
    # Pinned finding (delta-rs: 1-4 P1 anomalies per run; Sail on S3: 8-14 in
    # 15 s alone). Should an engine stop refusing, this fails, and the test
    # becomes the conforming assertion (valid, exit 0).
    assert pc["anomalies"], f"{engine}: no P1 deviation in {P1_ATTEMPTS} runs: the pinned finding is gone ({stats})"
    assert res.returncode == 1 and doc["verdict"] == "invalid", res.stdout + res.stderr
    may_differ = {}
    if engine == "sail":
        may_differ["serializability"] = "a Sail SQL DELETE names no op: unknown, asserted in _real_run"
    assert_only_known(doc, only_run_dir(results_dir / f"attempt-{attempt}"), [_p1_known(engine)], may_differ=may_differ)
