"""The transaction analysis (checkers/txn_graph.py, array passes over the
history's columns, cycles searched inside intervals) against a
straightforward reference (tests/txn_reference.py: one object at a time,
the whole graph): the same anomalies, cycles, texts and counts, on
simulated histories with planted anomalies and on arbitrary ones (reads of
writers that never committed or commit later, ids committed twice, keys and
predicates of mixed types, unknown read versions)."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from checkers import txn_graph
from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory, Write
from harness.bench.inject import INJECTABLE, inject_anomaly
from harness.bench.simulate import run, run_columns
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE
from tests import txn_reference
from tests.test_txn_properties import configs, show

SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _summary(res: txn_graph.TxnAnalysis) -> dict[str, Any]:
    def one(a: txn_graph.TxnAnomaly) -> tuple:
        return (a.kind, a.level, a.txns, a.explanation, [e.to_json() for e in a.edges], a.dot)

    keys = ("transactions", "reads_scanned", "backward_edges")
    return {
        "anomalies": [one(a) for a in res.anomalies],
        "reorderings": [one(a) for a in res.reorderings],
        "reorderings_total": res.reorderings_total,
        "unknown": res.unknown,
        "stats": {k: res.stats.get(k) for k in keys},
    }


def _agree(h: TxnHistory) -> txn_graph.TxnAnalysis:
    fast = txn_graph.analyze(h)
    assert _summary(fast) == _summary(txn_reference.analyze(h))
    return fast


@SETTINGS
@given(cfg=configs(caveat=st.booleans()), kind=st.sampled_from((None, *INJECTABLE)), seed=st.integers(0, 2**16))
def test_simulated_histories_with_a_planted_anomaly_agree(cfg, kind, seed) -> None:
    h = run(cfg).history
    if kind is not None:
        h, _ = inject_anomaly(h, kind, random.Random(seed))
    note(show(h))
    _agree(h)


# Keys of one small range (many predicate matches), or of mixed types.
_KEY_SETS = (
    st.integers(0, 4),
    st.one_of(st.integers(-3, 6), st.sampled_from(["a", "b", "c"]), st.sampled_from([0.5, 2.5])),
)


@st.composite
def wild_histories(draw) -> TxnHistory:
    """Any history: writers drawn from every id there is (committed earlier
    or later, failed, never seen, the initial version), ids used twice."""
    n = draw(st.integers(0, 12))
    keys = draw(st.sampled_from(_KEY_SETS))
    ids = [draw(st.sampled_from([f"t{i}", f"t{max(i - 1, 0)}"])) for i in range(n)]
    writers = st.sampled_from([*ids, INITIAL, "failed1", "ghost"]) if ids else st.just(INITIAL)
    txns = []
    for v, tid in enumerate(ids, start=1):
        rv = draw(st.one_of(st.none(), st.integers(0, max(v - 1, 0))))
        reads = tuple(RowRef(k, w) for k, w in draw(st.lists(st.tuples(keys, writers), max_size=3)))
        writes = tuple(
            Write(k, p, a)
            for k, p, a in draw(
                st.lists(st.tuples(keys, st.one_of(st.none(), writers), st.one_of(st.none(), keys)), max_size=3)
            )
        )
        deletes = tuple(RowRef(k, w) for k, w in draw(st.lists(st.tuples(keys, writers), max_size=2)))
        preds = tuple(Predicate(lo, hi) for lo, hi in draw(st.lists(st.tuples(keys, keys), max_size=3)))
        level = draw(st.sampled_from([SERIALIZABLE, WRITE_SERIALIZABLE]))
        txns.append(Txn(tid, v, rv, reads, writes, deletes, preds, level, draw(st.sampled_from(["", "MERGE"]))))
    return TxnHistory(txns, failed={"failed1"})


# A predicate edge names the first row the inserter wrote that a predicate
# matches, and the first predicate matching it.
_TWO_BY_TWO = TxnHistory(
    [
        Txn("t0", 1, 0, writes=(Write(1), Write(0))),
        Txn("t1", 2, 0, predicates=(Predicate(0, 0), Predicate(1, 1))),
    ]
)


@SETTINGS
@example(_TWO_BY_TWO)
@given(wild_histories())
def test_arbitrary_histories_agree(h: TxnHistory) -> None:
    note(show(h))
    _agree(h)


def test_agreement_covers_every_kind() -> None:
    """The generators reach every anomaly kind the analysis reports, so the
    agreement above is not only on valid histories."""
    seen: set[str] = set()
    for seed in range(40):
        for kind in INJECTABLE:
            h = run(n_txns=30, seed=seed).history
            h, _ = inject_anomaly(h, kind, random.Random(seed))
            seen |= {a.kind for a in _agree(h).anomalies}
    assert {"G1a", "G1c", "G-single", "G2-item", "G2", "history-order", "snapshot-mismatch"} <= seen, seen


@SETTINGS
@given(cfg=configs(caveat=st.booleans()))
def test_the_simulator_writes_the_columns_of_its_history(cfg) -> None:
    """Simulated as columns (what bench-checker analyses) or as objects, one
    history: the same analysis."""
    columns, _ = run_columns(cfg)
    assert _summary(txn_graph.analyze(columns)) == _summary(txn_graph.analyze(run(cfg).history))


def test_passes_of_a_few_rows_and_threads_agree(monkeypatch) -> None:
    """The array passes cut a long history into pieces (on threads, past a
    few): pieces of 8 observed versions and 16 predicate pairs give the
    same analysis."""
    monkeypatch.setattr(txn_graph, "_REFS_PER_PASS", 8)
    monkeypatch.setattr(txn_graph, "_PAIRS_PER_PASS", 16)
    for seed in range(30):
        h = run(n_txns=60, concurrency=4, n_keys=12, seed=seed, ws_append_caveat=seed % 2 == 0).history
        h, _ = inject_anomaly(h, INJECTABLE[seed % len(INJECTABLE)], random.Random(seed))
        _agree(h)
