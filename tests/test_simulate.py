"""The in-memory Delta commit model (harness/simulate.py): determinism, the
optimistic-concurrency invariant (spec C8, M1-M3, E1, E2) checked directly
on the histories it emits, the conflict rule on scripted schedules (C16),
and anomaly injection's bookkeeping. The analysis of these histories is
tested in test_txn_properties.py."""

from __future__ import annotations

import bisect
import random
import time
from collections import defaultdict

import pytest

from checkers.txn_model import INITIAL, TxnHistory
from harness.bench.inject import INJECTABLE, inject, inject_anomaly
from harness.bench.simulate import (
    E1,
    E1_CAVEAT,
    E2,
    OPS,
    DeltaSim,
    SimConfig,
    iter_simulation,
    make_sim,
    run,
    simulate,
)
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE

S, WS = SERIALIZABLE, WRITE_SERIALIZABLE


def fingerprint(h: TxnHistory):
    return [
        (t.id, t.version, t.read_version, t.reads, t.writes, t.deletes, t.predicates, t.isolation, t.operation)
        for t in h.txns
    ], sorted(h.failed)


def check_execution(h: TxnHistory, initial_keys, caveat: bool = True) -> None:
    """Assert that `h` is what optimistic concurrency as Delta does it can
    produce from a table whose live keys at version 0 are `initial_keys`:

    - versions are 1..n; every read version is an earlier version;
    - snapshot reads (C12): every row version read is the live version of its
      key at the read version, and a predicate read saw every row live in its
      range at the read version;
    - commit: each replaced or deleted version is the live one at commit time,
      each insert is of a key with no live version;
    - OCC (C8, E2): no commit in (read_version, version) replaced or deleted a
      row the transaction read or deletes;
    - OCC (E1, M2): no commit in (read_version, version) inserted a key matching
      one of its predicates, except a blind insert under WriteSerializable (that
      no other concurrent commit referenced, with the caveat).
    """
    txns = h.txns
    assert [t.version for t in txns] == list(range(1, len(txns) + 1))
    ids = [t.id for t in txns]
    assert len(set(ids)) == len(ids)
    assert not set(ids) & h.failed
    # key -> versions at which it changed, and its live writer from each on
    # (None: deleted); version 0 is the initial table.
    changed: dict[int, list[int]] = defaultdict(list)
    writer: dict[int, list[str | None]] = defaultdict(list)

    def record(k, v, w):
        changed[k].append(v)
        writer[k].append(w)

    for k in initial_keys:
        record(k, 0, INITIAL)

    def at(k, v):
        i = bisect.bisect_right(changed.get(k, []), v) - 1
        return writer[k][i] if i >= 0 else None

    live = {k: INITIAL for k in initial_keys}
    for t in txns:
        rv = t.read_version
        assert rv is not None and 0 <= rv < t.version
        for r in t.reads:
            assert at(r.key, rv) == r.writer, (t, r)
        read_keys = {r.key for r in t.reads}
        for p in t.predicates:
            for k in range(p.lo, p.hi + 1):
                if at(k, rv) is not None:
                    assert k in read_keys, (t, p, k)
        for w in t.writes:
            if w.prev is None:
                assert w.key not in live, (t, w)
            else:
                assert live.get(w.key) == w.prev, (t, w)
                assert any(r.key == w.key and r.writer == w.prev for r in t.reads), (t, w)
            live[w.key] = t.id
            record(w.key, t.version, t.id)
        for d in t.deletes:
            assert live.get(d.key) == d.writer, (t, d)
            assert d in t.reads
            del live[d.key]
            record(d.key, t.version, None)

    # OCC over the concurrent commits.
    by_version = {t.version: t for t in txns}
    readers_of: dict[str, list[int]] = defaultdict(list)  # writer -> versions that read its rows
    for t in txns:
        for r in t.reads:
            readers_of[r.writer].append(t.version)
    for t in txns:
        if not (t.reads or t.predicates):
            continue
        mine = {r.key for r in t.reads} | {d.key for d in t.deletes}
        for v in range(t.read_version + 1, t.version):
            c = by_version[v]
            touched = {w.key for w in c.writes if w.prev is not None} | {d.key for d in c.deletes}
            assert not mine & touched, f"{t.id} committed although {c.id} (v{v}) replaced a row it read (E2)"
            blind = not (c.reads or c.predicates)
            for w in c.writes:
                if w.prev is None and any(p.matches(w.key) for p in t.predicates):
                    referenced = any(c.version < x < t.version for x in readers_of[c.id])
                    assert t.isolation == WS and blind and not (caveat and referenced), (
                        f"{t.id} ({t.isolation}) committed although {c.id} (v{v}) inserted {w.key} into its predicate"
                    )


LEVELS = [S, WS, {S: 1, WS: 1}]


def test_deterministic_per_seed():
    for iso in LEVELS:
        a = run(n_txns=300, concurrency=6, seed=11, isolation=iso)
        b = run(n_txns=300, concurrency=6, seed=11, isolation=iso)
        assert fingerprint(a.history) == fingerprint(b.history)
        assert a.stats == b.stats
        assert a.initial_keys == b.initial_keys
    c = run(n_txns=300, concurrency=6, seed=12)
    assert fingerprint(c.history) != fingerprint(run(n_txns=300, concurrency=6, seed=11).history)


def test_streaming_matches_collected():
    cfg = SimConfig(n_txns=500, concurrency=5, seed=3)
    sim = make_sim(cfg)
    streamed = list(iter_simulation(cfg, sim))
    res = run(cfg)
    assert fingerprint(TxnHistory(streamed, failed=sim.failed)) == fingerprint(res.history)
    assert sim.stats == res.stats


@pytest.mark.parametrize("iso", LEVELS, ids=["S", "WS", "mixed"])
@pytest.mark.parametrize("concurrency", [1, 3, 8, 16])
@pytest.mark.parametrize("seed", range(4))
def test_correct_executions_never_commit_conflicting_txns(iso, concurrency, seed):
    res = run(n_txns=400, concurrency=concurrency, n_keys=24, max_range=6, seed=seed, isolation=iso)
    check_execution(res.history, res.initial_keys)
    st = res.stats
    assert st.attempted == 400 == st.committed + st.failed == len(res.history.txns) + len(res.history.failed)


@pytest.mark.parametrize("seed", range(6))
def test_bare_m2_rule_histories_satisfy_its_own_invariant(seed):
    res = run(n_txns=400, concurrency=8, n_keys=16, max_range=6, seed=seed, isolation=WS, ws_append_caveat=False)
    check_execution(res.history, res.initial_keys, caveat=False)


def test_small_key_spaces_and_odd_weights_run():
    for n_keys in (0, 1, 2, 3):
        for w in (
            {"insert": 1},
            {"update": 1},
            {"delete": 1},
            {"insert_select": 1},
            {"transfer": 1},
            {"delete": 1, "insert": 1},
        ):
            for conc in (1, 4):
                if n_keys == 0:
                    with pytest.raises(RuntimeError):
                        run(n_txns=5, concurrency=conc, n_keys=0, weights=w)
                    continue
                res = run(n_txns=40, concurrency=conc, n_keys=n_keys, weights=w, seed=n_keys)
                check_execution(res.history, res.initial_keys)
    with pytest.raises(ValueError):
        run(n_txns=5, weights={"insert": 0})
    with pytest.raises(ValueError):
        run(n_txns=5, weights={"upsert": 1})


def test_stats_1k():
    serial = run(n_txns=1000, concurrency=1, seed=5)
    assert serial.stats.failed == 0 and not serial.history.failed
    assert serial.stats.max_window == 0
    assert all(t.read_version == t.version - 1 for t in serial.history.txns)
    assert len(serial.history.txns) == 1000

    conc = run(n_txns=1000, concurrency=8, seed=5)
    st = conc.stats
    assert 0.02 < st.failed / st.attempted < 0.5, st
    assert st.conflicts[E2] > 0
    assert all(st.committed_by_op[op] > 50 for op in OPS), st
    assert st.committed_by_op["insert"] > 0 and st.failed_by_op["insert"] == 0  # M1: blind inserts never fail
    assert st.fallbacks < 200
    assert 8 <= st.max_window < 200
    assert sum(t.read_version < t.version - 1 for t in conc.history.txns) > 300  # real concurrency
    ops = {t.operation for t in conc.history.txns}
    assert ops == {"WRITE", "UPDATE", "DELETE", "MERGE"}


def test_levels_differ_only_on_blind_inserts():
    """Same seeds: WriteSerializable lets concurrent blind inserts into a
    predicate through (C16 reorderings), Serializable fails them (E1)."""
    ser = [run(n_txns=1000, concurrency=8, seed=s, isolation=S).stats for s in range(3)]
    ws = [run(n_txns=1000, concurrency=8, seed=s, isolation=WS).stats for s in range(3)]
    assert sum(x.ws_blind_skips for x in ser) == 0
    assert sum(x.conflicts[E1_CAVEAT] for x in ser) == 0
    assert sum(x.ws_blind_skips for x in ws) > 0
    assert sum(x.conflicts[E1] for x in ser) > sum(x.conflicts[E1] for x in ws)


def test_isolation_per_commit():
    h = simulate(n_txns=300, concurrency=4, seed=2, isolation={S: 1, WS: 1})
    assert {t.isolation for t in h.txns} == {S, WS}
    h = simulate(n_txns=50, concurrency=4, seed=2, isolation=lambda v: S if v % 2 else WS)
    assert all(t.isolation == (S if t.version % 2 else WS) for t in h.txns)


# -- scripted schedules -------------------------------------------------------


def sim(level=WS, caveat=True, initial=(0, 1, 2, 3, 4)) -> DeltaSim:
    return DeltaSim(10, list(initial), isolation=level, ws_append_caveat=caveat, rng=random.Random(0))


@pytest.mark.parametrize("level", [S, WS])
def test_c16_schedule(level):
    """Spec C16: deleteTxn and insertTxn start at v0, insertTxn commits v1;
    deleteTxn fails under Serializable, commits v2 under WriteSerializable."""
    m = sim(level)
    delete = m.begin_delete(0, 9)
    insert = m.begin_insert([7])
    assert m.commit(insert).version == 1
    t = m.commit(delete)
    if level == S:
        assert t is None and m.stats.conflicts[E1] == 1 and delete.id in m.failed
    else:
        assert t.version == 2 and t.read_version == 0 and t.isolation == WS
        assert {r.key for r in t.deletes} == {0, 1, 2, 3, 4}
        assert m.table[7].writer == insert.id  # the inserted row survives
        assert m.stats.ws_blind_skips == 1


@pytest.mark.parametrize("level", [S, WS])
def test_conflict_matrix(level):
    # M1: concurrent blind inserts never conflict.
    m = sim(level)
    a, b = m.begin_insert([5]), m.begin_insert([6])
    assert m.commit(a) and m.commit(b)
    # A blind insert never conflicts, even after a concurrent DELETE of its range (C9).
    m = sim(level)
    ins = m.begin_insert([7])
    assert m.commit(m.begin_delete(0, 9))
    assert m.commit(ins)
    # M3 / E2: two UPDATEs of one row; the second fails in both levels.
    m = sim(level)
    u1, u2 = m.begin_update([1]), m.begin_update([1, 2])
    assert m.commit(u1)
    assert m.commit(u2) is None and m.stats.conflicts[E2] == 1
    # ... UPDATEs of different rows both commit (file-level with one row per file).
    m = sim(level)
    u1, u2 = m.begin_update([1]), m.begin_update([2])
    assert m.commit(u2) and m.commit(u1)
    # E2 (delete-read): DELETE of a row a concurrent UPDATE read.
    m = sim(level)
    u, d = m.begin_update([3], "transfer"), m.begin_delete(3, 3)
    assert m.commit(d)
    assert m.commit(u) is None
    # E1: a concurrent INSERT ... SELECT (not blind) into a predicate conflicts in both levels.
    m = sim(level)
    d, i = m.begin_delete(0, 9), m.begin_insert_select(5, 9, 8)
    assert m.commit(i)
    assert m.commit(d) is None and m.stats.conflicts[E1] == 1
    # Keys outside the predicate do not conflict.
    m = sim(level)
    d, ins = m.begin_delete(0, 4), m.begin_insert([8])
    assert m.commit(ins) and m.commit(d)


def bare_m2_g2_schedule(caveat: bool):
    """T1: DELETE key in [0, 3] from v0 (deletes row 1). T2: blind INSERT of
    key 2 commits v1. X: INSERT ... SELECT over [1, 5] from v1 (reads rows 1
    and 2) inserting 5, commits v2. Then T1 commits. Under the bare M2 rule
    (open-source Delta's ConflictChecker: a WriteSerializable txn ignores
    blind appends; X's file for key 5 is outside T1's predicate) T1 commits
    v3, which closes T1 -rw(predicate)-> T2 -wr-> X -rw-> T1: a G2 cycle."""
    m = sim(WS, caveat=caveat, initial=(1,))
    t1 = m.begin_delete(0, 3)
    t2 = m.begin_insert([2])
    committed = [m.commit(t2)]
    x = m.begin_insert_select(1, 5, 5)
    assert {r.key for r in x.reads} == {1, 2}
    committed.append(m.commit(x))
    assert all(committed)
    last = m.commit(t1)
    return m, committed + [last] if last else committed, t1.id


def test_bare_m2_rule_admits_g2_the_caveat_prevents_it():
    m, txns, t1 = bare_m2_g2_schedule(caveat=False)
    assert [t.version for t in txns] == [1, 2, 3] and txns[-1].id == t1
    m, txns, t1 = bare_m2_g2_schedule(caveat=True)
    assert len(txns) == 2 and t1 in m.failed and m.stats.conflicts[E1_CAVEAT] == 1


# -- injection bookkeeping ----------------------------------------------------


@pytest.mark.parametrize("kind", INJECTABLE)
@pytest.mark.parametrize("seed", range(5))
def test_injection_bookkeeping(kind, seed):
    rng = random.Random(seed)
    h = simulate(n_txns=60, concurrency=4, n_keys=10, seed=seed)
    before = fingerprint(h)
    h2, inj = inject_anomaly(h, kind, rng)
    assert fingerprint(h) == before  # the input is not modified
    assert [t.version for t in h2.txns] == list(range(1, len(h2.txns) + 1))
    new = [t for t in h2.txns if t.id in set(inj.ids)]
    assert [t.id for t in new] == inj.ids and new[0].version == inj.first_version
    m = len(new)
    assert h2.failed == h.failed | set(inj.failed)
    old = {t.id: t for t in h.txns}
    for t in h2.txns:
        if t.id in old:
            o = old[t.id]
            shift = m if o.version >= inj.first_version else 0
            assert t.version == o.version + shift
            assert t.read_version == (o.read_version + m if o.read_version >= inj.first_version else o.read_version)
            assert (t.reads, t.writes, t.deletes, t.predicates) == (o.reads, o.writes, o.deletes, o.predicates)
    # The injected txns use keys no other txn touches, and only those.
    base_keys = {r.key for t in h.txns for r in (*t.reads, *t.deletes)} | {w.key for t in h.txns for w in t.writes}
    inj_keys = {r.key for t in new for r in (*t.reads, *t.deletes)} | {w.key for t in new for w in t.writes}
    assert inj_keys <= set(inj.keys) and not inj_keys & base_keys
    for t in new:
        for p in t.predicates:
            assert not any(p.matches(k) for k in base_keys)
    for t in h.txns:
        for p in t.predicates:
            assert not any(p.matches(k) for k in inj_keys)


def test_inject_positions_and_empty_history():
    h = simulate(n_txns=20, concurrency=3, seed=1)
    for at in (0, 5, len(h.txns)):
        h2, inj = inject_anomaly(h, "G2-item", random.Random(at), at=at)
        assert h2.txns[at].id == inj.ids[0]
    empty = TxnHistory([])
    h2 = inject(empty, "history-order", random.Random(0))
    assert [t.version for t in h2.txns] == [1, 2] and h2.txns[1].read_version == 0
    with pytest.raises(ValueError):
        inject(empty, "G3", random.Random(0))


@pytest.mark.soak
def test_one_million_transactions_fast():
    t0 = time.perf_counter()
    res = run(n_txns=1_000_000, concurrency=8, seed=1)
    assert time.perf_counter() - t0 < 30
    assert res.stats.attempted == 1_000_000
