"""Property tests of the liveness checker (spec C10) on synthetic runs: ops
that all answer are valid; an op unanswered past the runner's time limit
while other clients went on is a `stalled-op` (verdict unknown), unless a
fault was active, the limit was tight for the machine, or the op
committed after all.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import liveness
from checkers.base import Verdict
from checkers.facts import fault_windows
from harness.core.history import INFO, NO_REPLY, OK
from tests.synth import SynthRun

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MS = 10**6
STALLED = "9.1"


def _run(durations: list[list[int]], *, stall_ms: int | None = None, fault: bool = False, commit: bool = False):
    """Clients 0.. each appending back to back, op k of client c taking
    durations[c][k] ms; optionally a client 9 whose append, invoked 1 ms in,
    gets no reply for `stall_ms`; optionally a partition over its span, and
    its rows committed after all."""
    run = SynthRun()
    for c, ds in enumerate(durations):
        t = 0
        for k, d in enumerate(ds):
            run.append(f"{c}.{k}", [c * 1000 + k], start=t * MS, end=(t + d) * MS, process=c)
            t += d + 1
    if stall_ms is not None:
        run.append(STALLED, [9000], start=MS, end=None, process=9)
        error = {"class": "timeout", "claim": None, "raw": f"{NO_REPLY} {stall_ms / 1000:.1f}s"}
        run.complete(STALLED, INFO, time=(1 + stall_ms) * MS, error=error)
        if commit:
            run.commit_op(STALLED, [9000], tag=True)
    if fault:
        run.invoke("nemesis.1", "start-partition", None, time=MS // 2, process="nemesis")
        run.complete("nemesis.1", OK, time=MS // 2 + 1, value={"rule": 1})
        run.invoke("nemesis.2", "stop-partition", None, time=2 * MS, process="nemesis")
        run.complete("nemesis.2", OK, time=2 * MS + 1, value={"rule": 1})
    return run


def _judge(run: SynthRun) -> tuple[Verdict, set[str], dict]:
    history, log = run.build()
    res = liveness.check(history, log)
    return res.verdict, {a.kind for a in res.anomalies}, res.stats


# 2-4 clients, each 3-12 ops of 5-60 ms: the stall below (3 s) is at least
# 50x the median and outlasts every other op.
clients_st = st.lists(st.lists(st.integers(5, 60), min_size=3, max_size=12), min_size=2, max_size=4)


@SETTINGS
@given(clients_st)
def test_ops_that_all_answer_are_valid(durations: list[list[int]]) -> None:
    verdict, kinds, stats = _judge(_run(durations))
    assert verdict is Verdict.VALID and not kinds and stats["timed_out"] == 0


@SETTINGS
@given(clients_st)
def test_an_unanswered_op_while_others_went_on_is_a_stall(durations: list[list[int]]) -> None:
    verdict, kinds, stats = _judge(_run(durations, stall_ms=3000))
    assert verdict is Verdict.UNKNOWN and kinds == {"stalled-op"} and stats["stalled"] == 1


@SETTINGS
@given(clients_st)
def test_a_fault_over_the_op_excuses_it(durations: list[list[int]]) -> None:
    verdict, kinds, stats = _judge(_run(durations, stall_ms=3000, fault=True))
    assert verdict is Verdict.VALID and not kinds and stats["under_fault"] == 1


@SETTINGS
@given(clients_st)
def test_a_late_commit_excuses_it(durations: list[list[int]]) -> None:
    verdict, kinds, stats = _judge(_run(durations, stall_ms=3000, commit=True))
    assert verdict is Verdict.VALID and not kinds and stats["committed_late"] == 1


@SETTINGS
@given(clients_st, st.integers(1, 4))
def test_a_limit_a_few_ops_long_is_too_tight_to_say_anything(durations: list[list[int]], times: int) -> None:
    # A limit a few times the slowest op: a slow moment, not a stall.
    slowest = max(d for ds in durations for d in ds)
    verdict, kinds, stats = _judge(_run(durations, stall_ms=min(times * slowest, 9 * min(map(min, durations)))))
    assert verdict is Verdict.VALID and not kinds and stats["tight_limit"] == 1


def test_nemesis_windows_pair_start_and_stop_and_heal_closes_the_rest() -> None:
    run = SynthRun()
    for n, (f, t) in enumerate([("start-pause", 10), ("start-latency", 20), ("stop-pause", 30), ("heal", 40)]):
        run.invoke(f"nemesis.{n}", f, None, time=t, process="nemesis")
        run.complete(f"nemesis.{n}", OK, time=t + 1)
    history, _ = run.build()
    got = sorted((w.what, w.start, w.end) for w in fault_windows(history))
    assert got == [("latency", 20, 41), ("pause", 10, 31)]
