"""A reference implementation of the transaction analysis
(checkers.txn_graph), for tests: the same derivation done the
straightforward way, one Python object at a time and over the whole graph,
reported by the same code. The property tests check that the two agree.

(checkers/txn_graph.py's docstring explains the model.)
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from checkers.txn_graph import PRW, RW, WR, WW, Found, Names, RawEdge, TxnAnalysis, canonical, components, report
from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory
from harness.core.isolation import SERIALIZABLE


class _Graph:
    """Committed transactions indexed by commit order, with per-row version
    chains; edges are derived on demand, never all stored at once."""

    def __init__(self, h: TxnHistory):
        self.txns = sorted(h.txns, key=attrgetter("version"))
        self.index = {t.id: i for i, t in enumerate(self.txns)}
        self.versions = [t.version for t in self.txns]
        self.failed = h.failed
        # row key -> txn indexes that installed a version (write or delete),
        # in commit order: sorted, so a version's position is a bisection.
        self.chain: dict[Any, list[int]] = defaultdict(list)
        chain = self.chain
        for i, t in enumerate(self.txns):
            for w in t.writes:
                c = chain[w.key]
                if not c or c[-1] != i:  # one txn installs one version of a row
                    c.append(i)
            for d in t.deletes:
                c = chain[d.key]
                if not c or c[-1] != i:
                    c.append(i)

    def position(self, key: Any, i: int) -> int | None:
        c = self.chain.get(key)
        if not c:
            return None
        p = bisect.bisect_left(c, i)
        return p if p < len(c) and c[p] == i else None

    def label(self, i: int) -> str:
        t = self.txns[i]
        rv = f", read version {t.read_version}" if t.read_version is not None else ""
        op = f" {t.operation}" if t.operation else ""
        return f"txn {t.id}{op} (v{t.version}{rv})"

    def reads_of(self, t: Txn) -> Iterator[RowRef]:
        """Every row version t observed: explicit reads, the versions its
        writes replaced, and the versions it deleted."""
        yield from t.reads
        for w in t.writes:
            if w.prev is not None:
                yield RowRef(w.key, w.prev)
        yield from t.deletes

    def next_installer(self, ref: RowRef) -> int | None:
        c = self.chain.get(ref.key)
        if not c:
            return None
        if ref.writer == INITIAL:
            return c[0]
        wi = self.index.get(ref.writer)
        if wi is None:
            return None
        p = self.position(ref.key, wi)
        if p is None or p + 1 >= len(c):
            return None
        return c[p + 1]

    def item_edges_out(self, i: int) -> Iterator[tuple[int, str, Any]]:
        """Edges i -> j from i's reads (rw) and installs (ww)."""
        t = self.txns[i]
        for ref in self.reads_of(t):
            j = self.next_installer(ref)
            if j is not None and j != i:
                yield j, RW, ref
        for key in {w.key for w in t.writes} | {d.key for d in t.deletes}:
            p = self.position(key, i)
            if p is not None and p + 1 < len(self.chain[key]):
                yield self.chain[key][p + 1], WW, key

    def wr_edges_in(self, i: int) -> Iterator[tuple[int, str, Any]]:
        """Edges j -> i: i read a version j installed."""
        for ref in self.reads_of(self.txns[i]):
            j = self.index.get(ref.writer)
            if j is not None and j != i:
                yield j, WR, ref

    def predicate_edges_out(self, i: int, lo_idx: int, hi_idx: int) -> Iterator[tuple[int, str, Any]]:
        """i -> j for inserts by j (lo_idx <= j <= hi_idx) matching one of
        i's predicates, committed after i's read version, that i did not see."""
        t = self.txns[i]
        if not t.predicates or t.read_version is None:
            return
        seen = {r.key for r in self.reads_of(t)}
        start = max(lo_idx, bisect.bisect_right(self.versions, t.read_version))
        for j in range(start, hi_idx + 1):
            if j == i:
                continue
            for w in self.txns[j].writes:
                if w.prev is None and w.key not in seen:
                    p = _matching(t.predicates, w.key if w.attr is None else w.attr)
                    if p is not None:
                        yield j, PRW, (p, w.key)
                        break


def _matching(preds: Iterable[Predicate], key: Any) -> Predicate | None:
    for p in preds:
        try:
            if p.matches(key):
                return p
        except TypeError:  # keys of another type cannot match this predicate
            continue
    return None


@dataclass
class _Scan:
    backward: list[tuple[int, int, str, Any]]  # (src, dst, kind, key), src committed after dst
    aborted_reads: list[tuple[int, RowRef]]  # G1a: (reader, version whose writer did not commit)
    # (reader, version read, txn that wrote it after / replaced it by the read version)
    snapshot_mismatches: list[tuple[int, RowRef, int, bool]]


def _scan(g: _Graph, stats: dict[str, int]) -> _Scan:
    """One pass over every read of every transaction: backward edges, reads
    of uncommitted writers (G1a), reads that contradict the read version.

    The hot loop of the analysis, so inlined: ww edges always point forward
    (version order is commit order) and are skipped; a read can only give a
    backward rw edge (it missed a version committed before its own commit)
    or a backward wr edge (it read a version committed after its own)."""
    out: list[tuple[int, int, str, Any]] = []
    aborted: list[tuple[int, RowRef]] = []
    mismatched: list[tuple[int, RowRef, int, bool]] = []
    index, chain, versions, bisect_left = g.index, g.chain, g.versions, bisect.bisect_left
    n_reads = 0
    for i, t in enumerate(g.txns):
        refs = [(r.key, r.writer) for r in t.reads]
        refs += [(w.key, w.prev) for w in t.writes if w.prev is not None]
        refs += [(d.key, d.writer) for d in t.deletes]
        n_reads += len(refs)
        rv = t.read_version
        bad_snapshot = False
        for key, writer in refs:
            wi = index.get(writer)
            if wi is None:
                if writer != INITIAL:
                    aborted.append((i, RowRef(key, writer)))
            elif wi > i:
                out.append((wi, i, WR, RowRef(key, writer)))
            if rv is not None and wi is not None and versions[wi] > rv and not bad_snapshot:
                mismatched.append((i, RowRef(key, writer), wi, True))
                bad_snapshot = True
            c = chain.get(key)
            if not c:
                continue
            if writer == INITIAL:
                j = c[0]
            elif wi is None:
                continue
            else:
                p = bisect_left(c, wi)
                if p + 1 >= len(c) or c[p] != wi:
                    continue
                j = c[p + 1]
            if j < i:
                out.append((i, j, RW, RowRef(key, writer)))
                if rv is not None and versions[j] <= rv and not bad_snapshot:
                    mismatched.append((i, RowRef(key, writer), j, False))
                    bad_snapshot = True
        if t.predicates and rv is not None:
            for j, kind, key in g.predicate_edges_out(i, 0, i - 1):
                out.append((i, j, kind, key))
    # A version read both explicitly and as a write's `prev` gives one edge.
    out = list(dict.fromkeys(out))
    stats["reads_scanned"] = n_reads
    stats["backward_edges"] = len(out)
    return _Scan(out, list(dict.fromkeys(aborted)), mismatched)


def _names(g: _Graph) -> Names:
    return Names(
        lambda i: g.txns[i].id,
        g.label,
        lambda i: g.txns[i].read_version,
        lambda i: g.txns[i].isolation == SERIALIZABLE,
        g.failed,
        lambda i: g.index[g.txns[i].id],
    )


def analyze(h: TxnHistory) -> TxnAnalysis:
    """The analysis, derived the straightforward way: every edge of every
    transaction from its objects, the components of the whole graph."""
    g = _Graph(h)
    stats: dict[str, Any] = {"transactions": len(g.txns)}
    scan = _scan(g, stats)
    n = len(g.txns)
    edges: list[RawEdge] = []
    for i in range(n):
        edges += [(i, j, kind, key) for j, kind, key in g.item_edges_out(i)]
        edges += [(j, i, kind, key) for j, kind, key in g.wr_edges_in(i)]
        edges += [(i, j, kind, key) for j, kind, key in g.predicate_edges_out(i, 0, n - 1)]
    unknown_reads = [i for i, t in enumerate(g.txns) if t.predicates and t.read_version is None]
    found = Found(
        scan.aborted_reads,
        scan.snapshot_mismatches,
        scan.backward,
        components(canonical(edges), range(n)),
        unknown_reads,
    )
    res = TxnAnalysis(unknown=dict(h.unknown))
    report(found, _names(g), res)
    res.stats = stats
    return res
