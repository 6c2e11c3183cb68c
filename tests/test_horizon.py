"""A hole in the log (a commit file that is garbage, or gone) is one anomaly,
log-sanity's: the other checkers judge the log up to the version before it,
and what rests on later versions is unknown, never an anomaly of theirs."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from checkers import WHOLE_LOG
from checkers.base import Verdict
from checkers.horizon import horizon, run_checkers
from harness.check.pipeline import check_run
from harness.deltalog import read_log
from tests.synth import SynthRun
from tests.test_stored_runs_compat import ARCHIVE
from workloads.append import AppendWorkload

# A real delta-rs append run: 59 versions, no checkpoint.
RUN = "append-delta-rs_20261123T214003"
HOLE = 2


@pytest.fixture
def stored_run(tmp_path: Path) -> Path:
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/")[0] == RUN]
        assert all(m.isfile() or m.isdir() for m in members)
        tar.extractall(tmp_path, members=members)
    return tmp_path / RUN


@pytest.mark.parametrize(
    ("damage", "checkpoint", "kind"),
    [
        ("garbage", False, "log-unparseable"),
        ("deleted", False, "log-gap"),
        ("garbage", True, "log-unparseable"),
        ("deleted", True, "log-missing-commit"),
    ],
)
def test_a_hole_in_a_real_run_is_one_anomaly_and_the_rest_is_unknown(
    stored_run: Path, damage: str, checkpoint: bool, kind: str
) -> None:
    assert check_run(stored_run, write=False).verdict is Verdict.VALID
    if checkpoint:
        from deltalake import DeltaTable

        DeltaTable(str(stored_run / "table")).create_checkpoint()
    commit = stored_run / "table" / "_delta_log" / f"{HOLE:020d}.json"
    if damage == "garbage":
        commit.write_bytes(b"\x00\xffnot a commit{{{")
    else:
        commit.unlink()

    report = check_run(stored_run, write=False)

    anomalies = [(r.checker, a.kind, a.versions) for r in report.results for a in r.anomalies]
    assert anomalies == [("log-sanity", kind, [HOLE])], anomalies
    assert report.verdict is Verdict.INVALID
    for r in report.results:
        if r.checker in WHOLE_LOG:
            continue
        assert r.verdict in (Verdict.UNKNOWN, Verdict.VALID), (r.checker, r.explanation)
        # One sentence first says how far the log was judged and why.
        why = r.explanation.removeprefix("Unknown: ") if r.verdict is Verdict.UNKNOWN else r.explanation
        assert f"Judged on versions 0..{HOLE - 1} only: " in why, (r.checker, r.explanation)
        assert f"version {HOLE} " in why, (r.checker, r.explanation)
    verdicts = {r.checker: r.verdict for r in report.results}
    # The table's versions past the hole decide these; no op of the append
    # workload failed with a conflict, so exception-classes judged everything.
    for name in ("durability", "atomicity", "duplicates", "read-validity", "serializability"):
        assert verdicts[name] is Verdict.UNKNOWN, name
    assert verdicts["exception-classes"] is Verdict.VALID
    durability = next(r for r in report.results if r.checker == "durability")
    assert durability.stats["horizon"]["findings_set_aside"] > 0  # the writes of the hole and after, "lost"
    judged = report.doc["log"]["horizon"]
    assert (judged["last_judged"], judged["hole"]) == (HOLE - 1, HOLE)
    if checkpoint:
        top = read_log(str(stored_run / "table")).latest_version
        assert judged["resumes"] == top and f"checkpoint {top} restores the table" in judged["why"]
    else:
        assert judged["resumes"] is None
    assert f"log horizon: {judged['why']}" in report.summary


def test_an_unbroken_log_has_no_horizon(stored_run: Path) -> None:
    log = read_log(str(stored_run / "table"))
    assert log.first_hole is None and horizon(log) is None
    assert check_run(stored_run, write=False).doc["log"]["horizon"] is None


def _run_with_a_hole() -> SynthRun:
    """Versions 1 and 2 judged, 3 garbage, 4 readable but past the hole."""
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20, process=0)
    run.commit([(1, "0.1")])  # v1: 0.1 wrote two rows, one is there
    run.append("0.2", [5], start=21, end=25, process=0)  # acknowledged, never committed
    run.append("1.1", [3], start=30, end=40, process=1)
    run.commit_op("1.1", [3])  # v2
    run.raw_commit(3, "garbage")  # v3: whose commit this was is unknown
    run.append("2.1", [4], start=50, end=60, process=2)
    run.commit_op("2.1", [4], version=4)  # v4
    run.append("0.3", [6], start=61, end=70, process=0)  # acknowledged, no commit: maybe v3's
    run.read("3.1", [1, 3, 4, 6], start=80, end=90, process=3)
    return run


def test_an_anomaly_in_the_judged_versions_still_counts() -> None:
    history, log = _run_with_a_hole().build()
    results = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}

    assert [(a.kind, a.versions) for a in results["log-sanity"].anomalies] == [("log-unparseable", [3])]
    # 0.1's commit at version 1 holds one of its two rows: judged, whatever came later.
    atomicity = results["atomicity"]
    assert atomicity.verdict is Verdict.INVALID
    assert [(a.kind, a.ops, a.versions) for a in atomicity.anomalies] == [("partial-op", ["0.1"], [1])]
    # 0.2 was acknowledged before 1.1, the writer of version 2, was even
    # invoked: its commit could only be at version 1 or 2, and is not. 0.3's
    # may be the garbage at version 3, so its absence is no evidence.
    durability = results["durability"]
    assert durability.verdict is Verdict.INVALID
    assert [(a.kind, a.ops) for a in durability.anomalies] == [("lost-rows", ["0.1"]), ("lost-write", ["0.2"])]
    assert "Judged on versions 0..2 only: the commit file of version 3 is unparseable" in durability.explanation
    assert durability.stats["horizon"]["findings_set_aside"] == 2  # 0.3's lost write, 2.1's too
    # The read saw version 4, past the hole: not judged.
    read = results["read-validity"]
    assert read.verdict is Verdict.UNKNOWN and read.anomalies == []
    assert "1 op(s) that may have written or seen version 3 or later (3.1)" in read.explanation
    assert results["duplicates"].verdict is Verdict.UNKNOWN


def test_without_the_hole_the_same_run_is_judged_in_full() -> None:
    """The same run with version 3 readable: every finding above that was
    set aside was only the hole's doing, and the in-prefix ones remain."""
    run = _run_with_a_hole()
    run.commit_op("0.3", [6], version=3)
    history, log = run.build()
    results = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}
    assert results["log-sanity"].verdict is Verdict.VALID
    assert [(a.kind, a.ops) for a in results["durability"].anomalies] == [
        ("lost-rows", ["0.1"]),
        ("lost-write", ["0.2"]),
    ]
    assert [a.kind for a in results["atomicity"].anomalies] == ["partial-op"]
    assert results["read-validity"].verdict is Verdict.VALID
    assert all("Judged on" not in r.explanation for r in results.values())


def test_a_hole_at_version_0_judges_nothing() -> None:
    run = SynthRun()
    run.raw_commit(0, "garbage")
    run.append("0.1", [1], start=10, end=20)
    run.commit_op("0.1", [1], tag=True)
    history, log = run.build()
    assert log.first_hole == 0
    results = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}
    assert [a.kind for r in results.values() for a in r.anomalies] == ["log-unparseable"]
    for name in ("durability", "atomicity", "duplicates", "read-validity", "serializability"):
        assert results[name].verdict is Verdict.UNKNOWN
        assert "No version is judged: the commit file of version 0 is unparseable" in results[name].explanation


def test_the_judged_log_ends_at_the_horizon() -> None:
    _, log = _run_with_a_hole().build()
    view = log.up_to(2)
    assert view.versions == [0, 1, 2] and view.latest_version == 2 and view.first_hole is None
    assert [v for v, *_ in view.replay()] == [0, 1, 2]
    assert view.problems is log.problems  # what reading its files finds is the table's
    assert sorted(view.rows_at(2).column("id").to_pylist()) == [1, 3]
