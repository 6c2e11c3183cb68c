"""Property tests of the streaming checker (spec T5, C18) on synthetic runs:
a sink that got every source row once, in any batching, is valid; a row
delivered twice or never is named; a completed stream op that read past a
later metadata change is named.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import streaming
from checkers.base import Verdict
from harness.core.history import OK
from tests.synth import SynthRun

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _run(sizes: list[int], cuts: list[int], plant: str | None = None) -> SynthRun:
    """Source appends of `sizes` rows; the sink gets them in batches cut
    after the given row counts; then the final drain completes."""
    source = SynthRun()
    ids = []
    t = 0
    for n, size in enumerate(sizes):
        rows = [n * 1000 + j for j in range(size)]
        source.append(f"1.{n}", rows, start=t, end=t + 1, process=1, version=n + 1)
        source.commit_op(f"1.{n}", rows, tag=True)
        ids += [(i, f"1.{n}") for i in rows]
        t += 2
    sink = SynthRun()
    bounds = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    batches = [ids[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    if plant == "duplicate":
        batches.append(batches[0][:1])
    if plant == "lost":
        batches[-1] = batches[-1][:-1]
    for batch in batches:
        sink.commit(batch)
    source.invoke("0.1", "stream", {"seconds": 0, "final": True}, time=t)
    source.complete("0.1", OK, time=t + 1, value={"seconds": 0, "final": True, "batches": []})
    source.sink = sink  # type: ignore[attr-defined]
    return source


def _judge(run: SynthRun) -> tuple[Verdict, set[str]]:
    history, log = run.build()
    log.related = {streaming.SINK: run.sink.log()}  # type: ignore[attr-defined]
    res = streaming.check(history, log)
    return res.verdict, {a.kind for a in res.anomalies}


sizes_st = st.lists(st.integers(1, 4), min_size=1, max_size=12)
cuts_st = st.lists(st.integers(0, 60), max_size=6)


@SETTINGS
@given(sizes_st, cuts_st)
def test_every_row_once_in_any_batching_is_valid(sizes: list[int], cuts: list[int]) -> None:
    assert _judge(_run(sizes, cuts)) == (Verdict.VALID, set())


@SETTINGS
@given(sizes_st, cuts_st, st.sampled_from(["duplicate", "lost"]))
def test_a_row_twice_or_never_is_named(sizes: list[int], cuts: list[int], plant: str) -> None:
    want = {"duplicate": "stream-duplicate-row", "lost": "stream-lost-row"}[plant]
    assert _judge(_run(sizes, cuts, plant)) == (Verdict.INVALID, {want})


def test_a_completed_stream_past_a_later_metadata_change_is_named() -> None:
    run = _run([2, 2], [])
    # Version 3 changes the metadata, by an op invoked after stream op 0.0 started.
    run.invoke("2.1", "add-column", {"column": "c"}, time=5, process=2)
    run.complete("2.1", OK, time=6)
    run.commit(op="2.1", extra_actions=[run.commits[0][2]])
    batch = {"batch": 1, "start": 2, "end": 4, "end_index": -1, "rows": 1}
    run.invoke("0.0", "stream", {"seconds": 6.0}, time=4)
    run.complete("0.0", OK, time=8, value={"seconds": 6.0, "batches": [batch]})
    assert _judge(run) == (Verdict.INVALID, {"stream-crossed-metadata-change"})
    # Stopped just before it (the offset of version 3, index -1): no anomaly.
    run.events[-1]["value"]["batches"][0]["end"] = 3
    assert _judge(run)[1] == set()
