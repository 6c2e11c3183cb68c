"""Property tests of the time-travel checker's reads as of a time (spec T1)
on synthetic runs: the newest version committed by the time asked is
right, and so is any version that was the newest within the slack the
store's clocks leave; a version committed further away, or a state no
version had, is a `time-travel-mismatch`."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checkers import time_travel
from checkers.base import Verdict
from checkers.facts import table_facts
from checkers.time_travel import SLACK_MS, commit_times, newest_by
from harness.core.history import OK
from tests.synth import SynthRun

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
T0 = 1_700_000_000_000


def _run(gaps: list[int]) -> SynthRun:
    """Version v adds row v, committed sum(gaps[:v]) ms after T0."""
    run = SynthRun()
    run.commits[0][0]["commitInfo"]["timestamp"] = T0
    t = T0
    for v, gap in enumerate(gaps, start=1):
        t += gap
        run.commit_op(f"0.{v}", [v], tag=True)
        run.commits[v][0]["commitInfo"]["timestamp"] = t
    return run


def _judge(run: SynthRun, at: int, pick, resolved: bool) -> tuple[Verdict, set[str], dict]:
    """A read as of `at` answered with the state of version pick(times, at)."""
    log = run.log()
    times = commit_times(log)
    v = pick(times, at)
    ids = sorted(table_facts(log).state(v)) if v is not None else [999]
    value = {"seconds_back": 0, "via": "sql", "timestamp_ms": at, "ids": ids, "resolved": v if resolved else None}
    run.invoke("1.1", "read-as-of-time", {"seconds_back": 0, "via": "sql"}, time=1, process=1)
    run.complete("1.1", OK, time=2, value=value)
    history, log = run.build()
    res = time_travel.check(history, log)
    return res.verdict, {a.kind for a in res.anomalies}, res.stats


gaps_st = st.lists(st.integers(1, 6000), min_size=2, max_size=12)


@SETTINGS
@given(gaps_st, st.floats(0, 1), st.booleans())
def test_the_newest_version_by_then_is_right(gaps: list[int], where: float, resolved: bool) -> None:
    at = T0 + int(where * sum(gaps))
    verdict, kinds, stats = _judge(_run(gaps), at, newest_by, resolved)
    assert verdict is Verdict.VALID and not kinds and stats["judged"] == 1


@SETTINGS
@given(gaps_st, st.floats(0, 1), st.integers(-SLACK_MS, SLACK_MS), st.booleans())
def test_a_version_newest_within_the_slack_is_right(gaps: list[int], where: float, shift: int, resolved: bool) -> None:
    at = T0 + int(where * sum(gaps))
    verdict, kinds, _ = _judge(_run(gaps), at, lambda ts, a: newest_by(ts, a + shift) or 0, resolved)
    assert verdict is Verdict.VALID and not kinds


@SETTINGS
@given(gaps_st, st.floats(0, 1), st.booleans())
def test_a_version_committed_further_away_is_named(gaps: list[int], where: float, resolved: bool) -> None:
    at = T0 + int(where * sum(gaps))
    run = _run(gaps)
    times = commit_times(run.log())
    lo, hi = newest_by(times, at - SLACK_MS) or 0, newest_by(times, at + SLACK_MS)
    far = [v for v, _ in times if v < lo or v > hi]
    assume(far)
    verdict, kinds, _ = _judge(run, at, lambda ts, a: far[0], resolved)
    assert verdict is Verdict.INVALID and kinds == {"time-travel-mismatch"}


@SETTINGS
@given(gaps_st, st.floats(0, 1))
def test_a_state_no_version_had_is_named(gaps: list[int], where: float) -> None:
    at = T0 + int(where * sum(gaps))
    verdict, kinds, _ = _judge(_run(gaps), at, lambda ts, a: None, False)
    assert verdict is Verdict.INVALID and kinds == {"time-travel-mismatch"}


def test_a_time_before_the_table_is_not_judged() -> None:
    verdict, kinds, stats = _judge(_run([10, 10]), T0 - 5000, lambda ts, a: 0, False)
    assert verdict is Verdict.UNKNOWN and not kinds and stats["unjudged"] == 1


def _judge_cleaned(run: SynthRun, at: int, said: int, cleaned: int) -> tuple[Verdict, list, dict]:
    """A read as of `at` that says it read version `said`, in a run whose log
    cleanup deleted versions 0..cleaned-1 (the run kept their copies)."""
    value = {"seconds_back": 0, "via": "sql", "timestamp_ms": at, "resolved": said}
    value["ids"] = sorted(table_facts(run.log()).state(said))
    run.invoke("1.1", "read-as-of-time", {"seconds_back": 0, "via": "sql"}, time=1, process=1)
    run.complete("1.1", OK, time=2, value=value)
    history, log = run.build()
    log.expired_commits = set(range(cleaned))
    res = time_travel.check(history, log)
    return res.verdict, res.anomalies, res.stats


@SETTINGS
@given(st.lists(st.integers(SLACK_MS + 1, 6000), min_size=4, max_size=12), st.data())
def test_a_time_whose_commits_cleanup_deleted_is_an_error_or_those_versions(gaps: list[int], data) -> None:
    """Before the cleanup a read finds the deleted versions; after it T1's
    answer is an error. The oldest kept version instead (what a reader
    resolving against the commits it still lists answers) is named."""
    run = _run(gaps)
    times = commit_times(run.log())
    cleaned = data.draw(st.integers(2, len(gaps)))
    v = data.draw(st.integers(0, cleaned - 2))
    at = times[v][1] + 1
    verdict, anomalies, _ = _judge_cleaned(_run(gaps), at, v, cleaned)
    assert verdict is Verdict.VALID and not anomalies
    verdict, anomalies, _ = _judge_cleaned(_run(gaps), at, cleaned, cleaned)
    assert verdict is Verdict.INVALID and [a.kind for a in anomalies] == ["time-travel-mismatch"]
    assert anomalies[0].details["cleaned"] and "Log cleanup deleted" in anomalies[0].explanation
