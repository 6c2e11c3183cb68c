"""Anomaly injection into simulated histories: a few hand-made transactions
that realise one named anomaly, spliced in on keys no other transaction
touches, so nothing else changes by accident (the property tests and the
benchmarks check that the analysis names each)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory, Write
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE

# kind -> (anomaly kind the analysis must report, level it violates); None: valid.
EXPECTED: dict[str, tuple[str, str] | None] = {
    "G0": ("G0", WRITE_SERIALIZABLE),
    "G1a": ("G1a", WRITE_SERIALIZABLE),
    "G1c": ("G1c", WRITE_SERIALIZABLE),
    "G-single": ("G-single", WRITE_SERIALIZABLE),
    "lost-update": ("G-single", WRITE_SERIALIZABLE),
    "G2-item": ("G2-item", WRITE_SERIALIZABLE),
    "G2": ("G2", WRITE_SERIALIZABLE),
    "history-order": ("history-order", SERIALIZABLE),
    "C16-WS": None,  # valid; one "history-order-reordering"
}
INJECTABLE = tuple(EXPECTED)

# Injections whose schedule also contradicts the read versions it records
# (a read of a version committed later, or already superseded, at the read
# version): the analysis rightly reports that snapshot mismatch (spec C12) too.
ALSO_SNAPSHOT_MISMATCH = frozenset({"G1c", "G-single"})


@dataclass
class Injection:
    kind: str
    ids: list[str]  # the injected transactions (committed ones, in commit order)
    failed: list[str]  # injected ids added to `failed`
    expected: tuple[str, str] | None  # (anomaly kind, level); None: valid
    first_version: int  # version of the first injected commit
    keys: list[int]  # keys the injection uses (no other txn touches them)


def _keys_in(h: TxnHistory) -> Iterator[int]:
    for t in h.txns:
        for r in t.reads:
            yield r.key
        for w in t.writes:
            yield w.key
        for r in t.deletes:
            yield r.key
        for p in t.predicates:
            yield p.lo
            yield p.hi


def _build(kind: str, tag: str, base: int, rng: random.Random, level: str | None):
    """The injected transactions for `kind` on keys base, base+1, ... (all
    below every key of the history). Versions are offsets 0, 1, ...; read
    versions are offsets too, -1 meaning the version just before the splice."""
    ws, ser = WRITE_SERIALIZABLE, SERIALIZABLE
    lv = level or ws
    k1, k2 = base, base + 1

    def tid(name):
        return f"{tag}{name}"

    T1, T2, T0 = tid("T1"), tid("T2"), tid("T0")
    failed: list[str] = []
    if kind == "G0":
        # Each replaces the other's version: T2 replaced T1's k1, T1 replaced
        # T2's k2 (e.g. two commits applied file by file, interleaved).
        txns = [
            Txn(T1, 0, -1, writes=(Write(k1, None), Write(k2, T2)), isolation=lv, operation="MERGE"),
            Txn(T2, 1, -1, writes=(Write(k2, None), Write(k1, T1)), isolation=lv, operation="MERGE"),
        ]
        keys = [k1, k2]
    elif kind == "G1a":
        # A data file of a transaction that failed (C5: left untracked) was read.
        A = tid("aborted")
        failed.append(A)
        txns = [Txn(T1, 0, -1, reads=(RowRef(k1, A),), writes=(Write(k2, None),), isolation=lv, operation="MERGE")]
        keys = [k1, k2]
    elif kind == "G1c":
        # Circular information flow: T2 read (and replaced) T1's k1, T1 read T2's k2.
        if rng.random() < 0.5:
            t1 = Txn(T1, 0, -1, reads=(RowRef(k2, T2),), writes=(Write(k1, None),), isolation=lv, operation="MERGE")
            t2 = Txn(
                T2,
                1,
                0,
                reads=(RowRef(k1, T1),),
                writes=(Write(k1, T1), Write(k2, None)),
                isolation=lv,
                operation="MERGE",
            )
        else:
            t1 = Txn(T1, 0, -1, reads=(RowRef(k2, T2),), writes=(Write(k1, None),), isolation=lv, operation="MERGE")
            t2 = Txn(T2, 1, 0, reads=(RowRef(k1, T1),), writes=(Write(k2, None),), isolation=lv, operation="MERGE")
        txns = [t1, t2]
        keys = [k1, k2]
    elif kind in ("lost-update", "G2-item"):
        # Both read the same versions of k1 (and k2) from one snapshot and both commit.
        setup = rng.random() < 0.5  # the shared versions: INITIAL or a preceding insert
        txns = []
        w0 = INITIAL
        if setup:
            used = (k1,) if kind == "lost-update" else (k1, k2)
            txns.append(Txn(T0, 0, -1, writes=tuple(Write(k, None) for k in used), isolation=lv, operation="WRITE"))
            w0 = T0
        o = len(txns)
        rv = o - 1
        if kind == "lost-update":
            r = (RowRef(k1, w0),)
            txns += [
                Txn(T1, o, rv, reads=r, writes=(Write(k1, w0),), isolation=lv, operation="UPDATE"),
                Txn(T2, o + 1, rv, reads=r, writes=(Write(k1, w0),), isolation=lv, operation="UPDATE"),
            ]
            keys = [k1]
        else:
            r = (RowRef(k1, w0), RowRef(k2, w0))
            txns += [
                Txn(T1, o, rv, reads=r, writes=(Write(k1, w0),), isolation=lv, operation="MERGE"),
                Txn(T2, o + 1, rv, reads=r, writes=(Write(k2, w0),), isolation=lv, operation="MERGE"),
            ]
            keys = [k1, k2]
    elif kind == "G-single":
        # Read skew: T1's one read of k1 predates T2, its read of k2 follows T2
        # (a snapshot that is not one version, C12), and T1 then writes k3.
        k3 = base + 2
        txns = [
            Txn(
                T2,
                0,
                -1,
                reads=(RowRef(k1, INITIAL), RowRef(k2, INITIAL)),
                writes=(Write(k1, INITIAL), Write(k2, INITIAL)),
                isolation=lv,
                operation="MERGE",
            ),
            Txn(
                T1,
                1,
                0,
                reads=(RowRef(k1, INITIAL), RowRef(k2, T2)),
                writes=(Write(k3, None),),
                isolation=lv,
                operation="MERGE",
            ),
        ]
        keys = [k1, k2, k3]
    elif kind == "G2":
        # Predicate write skew: two INSERT ... SELECTs from one snapshot, each
        # inserting into the range the other one read.
        a_lo, a_hi, b_lo, b_hi = base, base + 3, base + 4, base + 7
        a_row, b_row = rng.choice([None, base + 1]), rng.choice([None, base + 5])
        ra = (RowRef(a_row, INITIAL),) if a_row is not None else ()
        rb = (RowRef(b_row, INITIAL),) if b_row is not None else ()
        a_new, b_new = rng.choice([base, base + 2, base + 3]), rng.choice([base + 4, base + 6, base + 7])
        txns = [
            Txn(
                T1,
                0,
                -1,
                reads=ra,
                writes=(Write(b_new, None),),
                predicates=(Predicate(a_lo, a_hi),),
                isolation=lv,
                operation="MERGE",
            ),
            Txn(
                T2,
                1,
                -1,
                reads=rb,
                writes=(Write(a_new, None),),
                predicates=(Predicate(b_lo, b_hi),),
                isolation=lv,
                operation="MERGE",
            ),
        ]
        keys = list(range(base, base + 8))
    elif kind in ("history-order", "C16-WS"):
        # Spec C16: deleteTxn and insertTxn both start at v0; insertTxn (a
        # blind append into the deleted range) commits v1; deleteTxn commits v2.
        lo, hi = base, base + 5
        victims = sorted(rng.sample(range(lo, hi + 1), rng.randint(1, 2)))
        new = rng.choice([k for k in range(lo, hi + 1) if k not in victims])
        rows = tuple(RowRef(k, INITIAL) for k in victims)
        dlevel = ser if kind == "history-order" else ws
        txns = [
            Txn(T2, 0, -1, writes=(Write(new, None),), isolation=level or dlevel, operation="WRITE"),
            Txn(
                T1,
                1,
                -1,
                reads=rows,
                deletes=rows,
                predicates=(Predicate(lo, hi),),
                isolation=dlevel,
                operation="DELETE",
            ),
        ]
        keys = list(range(lo, hi + 1))
    else:
        raise ValueError(f"unknown anomaly kind {kind!r}; one of {', '.join(INJECTABLE)}")
    return txns, failed, keys


def inject_anomaly(
    h: TxnHistory, kind: str, rng: random.Random, *, at: int | None = None, level: str | None = None
) -> tuple[TxnHistory, Injection]:
    """A copy of `h` with the transactions of one `kind` of anomaly spliced in
    before the commit at index `at` (random if None), later versions shifted.

    The injected transactions use keys below every key of `h` (negative for
    simulator histories) and predicates over those keys only, so they have no
    edges to the rest of the history: a valid `h` yields a history whose only
    anomaly is the injected one. `level` overrides the isolation recorded on
    the injected transactions (default: WriteSerializable, Serializable for
    the deleteTxn of "history-order"), so a cycle is not also reported as a
    history-order violation."""
    lowest = min(_keys_in(h), default=0)
    base = min(lowest, 0) - 100 - rng.randrange(1000)
    tag = f"{kind}:{rng.randrange(10**6)}:"
    new, failed, keys = _build(kind, tag, base, rng, level)
    txns = h.txns
    if at is None:
        at = rng.randint(0, len(txns))
    at = max(0, min(at, len(txns)))
    first = txns[at].version if at < len(txns) else (txns[-1].version + 1 if txns else 1)
    m = len(new)
    out = list(txns[:at])
    for t in new:
        rv = t.read_version
        out.append(replace(t, version=first + t.version, read_version=None if rv is None else first + rv))
    for t in txns[at:]:
        rv = t.read_version
        out.append(replace(t, version=t.version + m, read_version=rv + m if rv is not None and rv >= first else rv))
    h2 = TxnHistory(
        out, failed=set(h.failed) | set(failed), unknown=dict(h.unknown), assumed_default_level=h.assumed_default_level
    )
    return h2, Injection(kind, [t.id for t in new], failed, EXPECTED[kind], first, keys)


def inject(h: TxnHistory, kind: str, rng: random.Random) -> TxnHistory:
    """`h` with exactly one anomaly of `kind` spliced in (see :func:`inject_anomaly`)."""
    return inject_anomaly(h, kind, rng)[0]
