"""The compaction workload and checker: synthetic logs for the checker, short
real runs on delta-rs (OPTIMIZE) and Sail (no OPTIMIZE: reported unsupported)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from checkers import compaction
from checkers.base import Verdict
from tests.conftest import load_results, only_run_dir, run_cli
from tests.known import Known, RunView, assert_only_known, versions_of
from tests.synth import SynthRun

# ---------------------------------------------------------------------------
# Synthetic: the checker catches each anomaly and passes a correct history.


def _optimize(run: SynthRun, rows: list[tuple[int, str]], removes: list[str], op: str) -> int:
    """A compaction commit as delta-rs writes it: OPTIMIZE, dataChange=false."""
    v = run.commit(rows, op=op, removes=removes)
    for a in run.commits[v]:
        if "commitInfo" in a:
            a["commitInfo"]["operation"] = "OPTIMIZE"
        for kind in ("add", "remove"):
            if kind in a:
                a[kind]["dataChange"] = False
    return v


def _base() -> SynthRun:
    run = SynthRun()
    run.append("1.1", [1, 2], start=10, end=20, process=1)
    run.commit_op("1.1", [1, 2], tag=True)  # v1: f1.parquet
    run.append("2.1", [3], start=30, end=40, process=2)
    run.commit_op("2.1", [3], tag=True)  # v2: f2.parquet
    return run


ALL = [(1, "1.1"), (2, "1.1"), (3, "2.1")]


def test_correct_compaction_is_valid() -> None:
    run = _base()
    _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "3.1")
    res = compaction.check(*run.build())
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["compaction_commits"] == 1 and res.stats["rows_rewritten"] == 3


def test_a_column_the_schema_lacks_is_no_data_of_the_table() -> None:
    """deltalake 0.19-0.25's UPDATE leaves an internal column in the files it
    writes, and OPTIMIZE drops it: the table's rows are unchanged (its
    schema's columns), so the compaction is valid; a changed value in a
    schema column still is not."""
    import pyarrow as pa

    for extra, verdict in ((None, Verdict.VALID), ("writer", Verdict.INVALID)):
        run = _base()
        t = run.file_tables["f1.parquet"]
        run.file_tables["f1.parquet"] = t.append_column("__delta_rs_update_predicate", pa.nulls(t.num_rows, pa.bool_()))
        if extra:  # the compaction also changes a value the schema has
            rows = [(1, "1.1"), (2, "other"), (3, "2.1")]
        else:
            rows = ALL
        _optimize(run, rows, ["f1.parquet", "f2.parquet"], "3.1")
        res = compaction.check(*run.build())
        assert res.verdict is verdict, res.explanation


def test_two_compactions_of_the_same_files_duplicate_rows() -> None:
    run = _base()
    _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "3.1")  # v3
    v4 = _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "4.1")  # v4: the files are gone already
    res = compaction.check(*run.build())
    assert res.verdict is Verdict.INVALID
    (a,) = res.anomalies
    assert a.kind == "compaction-duplicated-rows" and a.claim == "M6"
    assert a.versions == [v4, 3] and a.ops == ["4.1"] and sorted(a.rows) == [1, 2, 3]
    assert "E3" in a.explanation and "f1.parquet" in a.explanation


def test_compaction_that_drops_rows() -> None:
    run = _base()
    _optimize(run, ALL[:2], ["f1.parquet", "f2.parquet"], "3.1")
    res = compaction.check(*run.build())
    (a,) = res.anomalies
    assert a.kind == "compaction-lost-rows" and a.claim == "C8" and a.rows == [3]


def test_compaction_resurrecting_deleted_rows_is_m5() -> None:
    run = _base()
    run.commit([], op="5.1", removes=["f1.parquet"])  # v3: DELETE of rows 1, 2
    run.commits[3][0]["commitInfo"]["operation"] = "DELETE"
    _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "3.1")  # v4 read v2: brings 1, 2 back
    res = compaction.check(*run.build())
    (a,) = res.anomalies
    assert a.kind == "compaction-duplicated-rows" and a.claim == "M5" and sorted(a.rows) == [1, 2]


def test_delete_after_compaction_that_misses_its_rows() -> None:
    run = _base()
    _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "3.1")  # v3
    run.commit([], op="5.1", removes=["f1.parquet"])  # v4: DELETE from the pre-compaction snapshot
    run.commits[4][0]["commitInfo"]["operation"] = "DELETE"
    res = compaction.check(*run.build())
    (a,) = res.anomalies
    assert a.kind == "write-on-compacted-files" and a.claim == "M5"
    assert a.versions == [3, 4] and a.ops == ["5.1"] and sorted(a.rows) == [1, 2]


def test_delete_after_compaction_that_read_the_new_file_is_valid() -> None:
    run = _base()
    _optimize(run, ALL, ["f1.parquet", "f2.parquet"], "3.1")  # v3: f3.parquet
    run.commit([(3, "2.1")], op="5.1", removes=["f3.parquet"])  # v4: DELETE 1, 2 rewriting f3
    run.commits[4][0]["commitInfo"]["operation"] = "DELETE"
    res = compaction.check(*run.build())
    assert res.verdict is Verdict.VALID, res.explanation


# ---------------------------------------------------------------------------
# Real runs.


def _files_removed_twice(table_uri: str) -> dict[str, list[int]]:
    """Ground truth from the log alone, not from the checker: data files
    that two commits both remove (the second rewrote what was gone)."""
    from harness.deltalog import read_log

    log = read_log(table_uri)
    by_path: dict[str, list[int]] = {}
    for v, commit in sorted(log.commits.items()):
        for r in commit.removes:
            by_path.setdefault(r["path"], []).append(v)
    return {p: vs for p, vs in by_path.items() if len(vs) > 1}


def _removed_again(view: RunView, a: dict[str, Any]) -> str | None:
    """None when the log shows the anomaly is a file removed twice by an
    OPTIMIZE: the compaction's own anomaly names a commit that removes
    files an earlier commit it names had already removed; what the rows it
    added back show to the other checkers (a row or an op at several
    versions) names, after the write, only OPTIMIZE commits, one of them
    such a removal."""
    named = versions_of(a)
    if len(named) < 2:
        return f"it names fewer than two versions ({named})"
    log = view.log
    first_remover: dict[str, int] = {}
    again: dict[int, set[int]] = {}  # version -> the earlier removers it repeats
    for v, commit in sorted(log.commits.items()):
        for r in commit.removes:
            if r["path"] in first_remover:
                again.setdefault(v, set()).add(first_remover[r["path"]])
            else:
                first_remover[r["path"]] = v
    optimize = {v for v, c in log.commits.items() if (c.operation or "").upper().startswith("OPTIMIZE")}

    def removes_again(v: int, earlier: set[int]) -> bool:
        repeats = again.get(v, set()) & earlier
        return bool(repeats) and (v in optimize or bool(repeats & optimize))

    if a["kind"] in ("compaction-duplicated-rows", "compaction-lost-rows", "write-on-compacted-files"):
        v = named[-1] if a["kind"] == "write-on-compacted-files" else named[0]
        if not removes_again(v, set(named) - {v}):
            return f"version {v} removes no file that {sorted(set(named) - {v})} removed, with an OPTIMIZE"
        return None
    later = sorted(set(named))[1:]
    if not set(later) <= optimize:
        return f"versions {sorted(set(later) - optimize)} are no OPTIMIZE"
    if not any(removes_again(v, set(range(v))) for v in later):
        return f"none of versions {later} removes a file an earlier commit had removed"
    return None


COMPACTION_REMOVES_TWICE = Known(
    "delta-rs:M6,E3:compaction-removes-twice",
    "M6, E3",
    "delta-rs lets concurrent OPTIMIZEs of the same files both commit: the later rewrites files already "
    "replaced, adding their rows again",
    frozenset(
        {
            "compaction-duplicated-rows",
            "compaction-lost-rows",
            "write-on-compacted-files",
            "duplicate-row",
            "duplicate-application",
            "split-op",
        }
    ),
    _removed_again,
)


@pytest.mark.integration
def test_compaction_on_delta_rs_reports_what_it_finds(results_dir: Path) -> None:
    """delta-rs 1.6.6 lets concurrent OPTIMIZEs of the same files both commit
    (spec M6/E3, README finding). The verdict must match what the log
    shows: a file two commits removed makes the run invalid with the
    compaction anomaly named; a log without one leaves the run valid."""
    res = run_cli(
        "run",
        "--workload",
        "compaction",
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
    run_dir = only_run_dir(results_dir)
    doc = load_results(run_dir)
    by_name = {c["checker"]: c for c in doc["checkers"]}
    comp = by_name["compaction"]
    assert comp["stats"]["compaction_commits"] > 0, doc["history"]
    assert doc["history"]["by_f"].get("optimize", 0) + doc["history"]["by_f"].get("optimize-zorder", 0) > 0
    assert "unsupported" not in doc["history"]["error_classes"]
    twice = _files_removed_twice(str(run_dir / "table"))
    # Seen in nearly every run; a log with no file removed twice must be
    # valid throughout.
    known = dataclasses.replace(COMPACTION_REMOVES_TWICE, always=bool(twice))
    assert res.returncode == (1 if twice else 0), res.stdout + res.stderr
    assert_only_known(doc, run_dir, [known])
    assert comp["verdict"] == "valid", comp
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.integration
def test_compaction_on_sail_reports_optimize_unsupported(results_dir: Path) -> None:
    """Sail 0.7.2 cannot parse OPTIMIZE ("found OPTIMIZE at 0:8 expected ..."):
    its capabilities leave it out, so every optimize op is a counted
    `unsupported` fail, never a pass; the rest of the run is judged as usual."""
    res = run_cli(
        "run",
        "--workload",
        "compaction",
        "--engine",
        "sail",
        "--storage",
        "local",
        "--nodes",
        "1",
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    doc = load_results(only_run_dir(results_dir))
    # No compaction ran, so the compaction checker has no evidence: unknown
    # ("not exercised"), and so is the run (exit 3), never a vacuous pass.
    assert res.returncode == 3, res.stdout + res.stderr
    by_name = {c["checker"]: c for c in doc["checkers"]}
    assert by_name["compaction"]["verdict"] == "unknown", by_name["compaction"]
    assert by_name["compaction"]["explanation"].startswith("Not exercised")
    assert by_name["compaction"]["stats"]["compaction_commits"] == 0
    others = {n: c["verdict"] for n, c in by_name.items() if n != "compaction"}
    assert set(others.values()) == {"valid"}, doc["checkers"]
    optimizes = doc["history"]["by_f"].get("optimize", 0) + doc["history"]["by_f"].get("optimize-zorder", 0)
    assert optimizes > 0
    assert doc["history"]["error_classes"].get("unsupported") == optimizes
    comp = next(c for c in doc["checkers"] if c["checker"] == "compaction")
    assert comp["stats"]["compaction_commits"] == 0
    assert "optimize" in res.stdout and "not tested" in res.stdout
