"""Dependency graph analysis of committed Delta transactions (Elle-style).

Nodes are committed write transactions, in commit order (the log's total
order). Edges, after Adya:
- ww: T2 installed the next version of a row after T1's version;
- wr: T2 read a row version T1 installed;
- rw: T1 read a row version whose next version T2 installed (item
  anti-dependency), or T1's predicate did not see a matching row that T2
  inserted after T1's read version (predicate anti-dependency).
Version order per row is commit order; a write's ``prev`` only says which
version the writer read, so a lost update shows up as a cycle.

Why this is fast: commit order is total, and ww edges always point forward
in it, as do wr edges of a correct history. Only edges pointing backward (a
transaction missed a commit that landed before its own: rw, or an impossible
wr) can close a cycle. Every cycle crosses each version between its lowest
and highest node going down, on backward edges, so the cycle lies inside one
merged interval of backward-edge spans. The strongly connected components
are computed only inside those intervals, which in real histories are as
short as the concurrency.

Serializable (spec C14) adds commit-order edges: the history order must be
the serial order, so any backward edge out of a transaction committed at
Serializable is a violation ("history-order"). Under WriteSerializable
(C15) it is only a reordering (C16), reported as information.
"""

from __future__ import annotations

import bisect
import gc
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import networkx as nx

from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE
from harness.core.laps import Laps

WW, WR, RW, PRW, CO = "ww", "wr", "rw", "rw-predicate", "co"
ANTI = (RW, PRW)


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    kind: str  # ww, wr, rw, rw-predicate, co
    key: Any = None  # the row (or predicate) that justifies it
    why: str = ""  # one sentence a person can check against the data

    def to_json(self) -> dict[str, Any]:
        return {"from": self.src, "to": self.dst, "kind": self.kind, "key": repr(self.key), "why": self.why}


@dataclass
class TxnAnomaly:
    kind: str  # G0, G1a, G1c, G-single, G2-item, G2, history-order, history-order-reordering
    level: str  # the isolation level it violates (or, for a reordering, allows)
    txns: list[str]
    edges: list[Edge]
    explanation: str
    dot: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "level": self.level,
            "txns": self.txns,
            "edges": [e.to_json() for e in self.edges],
            "explanation": self.explanation,
        }


@dataclass
class TxnAnalysis:
    anomalies: list[TxnAnomaly] = field(default_factory=list)
    reorderings: list[TxnAnomaly] = field(default_factory=list)
    reorderings_total: int = 0
    unknown: dict[str, str] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    # Seconds per stage of the analysis (bench-checker prints them); not in
    # stats, which results.json carries and which stay the same run to run.
    stage_s: dict[str, float] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.anomalies


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


def _why(g: _Graph, src: int, dst: int, kind: str, key: Any) -> str:
    s, d = g.label(src), g.label(dst)
    if kind == WW:
        return f"{d} installed the version of row {key!r} that follows the one {s} installed."
    if kind == WR:
        return f"{d} read row {key.key!r} as written by {s}."
    if kind == RW:
        who = "its initial version" if key.writer == INITIAL else f"the version written by txn {key.writer}"
        return f"{s} read row {key.key!r} in {who}, and {d} installed the next version of that row."
    if kind == PRW:
        pred, k = key
        return (
            f"{s} evaluated a predicate on keys {pred.lo!r}..{pred.hi!r} at its read version without seeing "
            f"row {k!r}, which {d} inserted."
        )
    return f"{s} committed before {d} in the table history."


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


def _report_reads(g: _Graph, scan: _Scan, res: TxnAnalysis) -> None:
    for i, ref in scan.aborted_reads:
        status = "failed" if ref.writer in g.failed else "did not commit"
        res.anomalies.append(
            TxnAnomaly(
                "G1a",
                WRITE_SERIALIZABLE,
                [g.txns[i].id],
                [],
                f"Aborted read (G1a): {g.label(i)} read row {ref.key!r} as written by txn {ref.writer}, "
                f"which {status}.",
            )
        )
    # Snapshot reads (spec C12): what a transaction read, recovered from the
    # data, must be what was live at the read version the log records.
    for i, ref, j, later in scan.snapshot_mismatches:
        t = g.txns[i]
        why = (
            f"which {g.label(j)} committed after that read version"
            if later
            else f"although {g.label(j)} had already replaced that version at or before the read version"
        )
        writer = "its initial version" if ref.writer == INITIAL else f"the version written by txn {ref.writer}"
        res.anomalies.append(
            TxnAnomaly(
                "snapshot-mismatch",
                WRITE_SERIALIZABLE,
                [t.id],
                [],
                f"Snapshot mismatch (spec C12): the log says {g.label(i)} read the table at version "
                f"{t.read_version}, but it read row {ref.key!r} in {writer}, {why}.",
            )
        )


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(a, b) for a, b in merged]


def _subgraph(g: _Graph, lo: int, hi: int) -> nx.MultiDiGraph:
    sub = nx.MultiDiGraph()
    sub.add_nodes_from(range(lo, hi + 1))
    for i in range(lo, hi + 1):
        for j, kind, key in g.item_edges_out(i):
            if lo <= j <= hi:
                sub.add_edge(i, j, kind=kind, ref=key)
        for j, kind, key in g.wr_edges_in(i):
            if lo <= j <= hi:
                sub.add_edge(j, i, kind=kind, ref=key)
        for j, kind, key in g.predicate_edges_out(i, lo, hi):
            sub.add_edge(i, j, kind=kind, ref=key)
    return sub


def _cycle_edges(sub: nx.MultiDiGraph, nodes: list[int]) -> list[tuple[int, int, str, Any]]:
    out = []
    for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True):
        # Prefer the weakest justification: ww < wr < rw < rw-predicate.
        datas = sorted(sub.get_edge_data(a, b).values(), key=lambda d: (WW, WR, RW, PRW).index(d["kind"]))
        out.append((a, b, datas[0]["kind"], datas[0]["ref"]))
    return out


def _find_cycle(sub: nx.MultiDiGraph, scc: set[int]) -> tuple[str, list[tuple[int, int, str, Any]]]:
    """The weakest anomaly in a strongly connected component, Elle's order:
    G0 (ww only), G1c (ww+wr), G-single (one anti-dependency), G2-item, G2."""
    h = sub.subgraph(scc)

    def restricted(kinds: tuple[str, ...]) -> nx.DiGraph:
        d = nx.DiGraph()
        for a, b, data in h.edges(data=True):
            if data["kind"] in kinds:
                d.add_edge(a, b)
        return d

    for name, kinds in (("G0", (WW,)), ("G1c", (WW, WR))):
        d = restricted(kinds)
        try:
            cyc = nx.find_cycle(d)
            nodes = [a for a, _ in cyc]
            return name, _cycle_edges(h, nodes)
        except nx.NetworkXNoCycle:
            pass
    dep = restricted((WW, WR))
    for a, b, data in h.edges(data=True):
        if data["kind"] in ANTI and b in dep and a in dep:
            try:
                path = nx.shortest_path(dep, b, a)
            except nx.NetworkXNoPath:
                continue
            nodes = [a, *path[:-1]]
            edges = _cycle_edges(h, nodes)
            edges[0] = (a, b, data["kind"], data["ref"])
            return "G-single", edges
        if data["kind"] in ANTI and a == b:
            continue
    full = nx.DiGraph(h)
    best: list[int] | None = None
    for node in scc:
        for pred in full.predecessors(node):
            try:
                path = nx.shortest_path(full, node, pred)
            except nx.NetworkXNoPath:
                continue
            if best is None or len(path) < len(best):
                best = path
        if best is not None and len(best) <= 2:
            break
    assert best is not None
    edges = _cycle_edges(h, best)
    kind = "G2" if any(k == PRW for _, _, k, _ in edges) else "G2-item"
    return kind, edges


def _dot(g: _Graph, name: str, edges: list[Edge]) -> str:
    lines = [f'digraph "{name}" {{', "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    for tid in dict.fromkeys([e.src for e in edges] + [e.dst for e in edges]):
        lines.append(f'  "{tid}" [label="{g.label(g.index[tid])}"];')
    colors = {WW: "black", WR: "blue", RW: "red", PRW: "red", CO: "gray"}
    for e in edges:
        style = ", style=dashed" if e.kind in (PRW, CO) else ""
        lines.append(f'  "{e.src}" -> "{e.dst}" [label="{e.kind} {str(e.key)[:40]}", color={colors[e.kind]}{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _anomaly(g: _Graph, kind: str, level: str, raw: list[tuple[int, int, str, Any]], lead: str) -> TxnAnomaly:
    edges = [
        Edge(
            g.txns[a].id,
            g.txns[b].id,
            k,
            key if k != RW else key.key if isinstance(key, RowRef) else key,
            _why(g, a, b, k, key),
        )
        for a, b, k, key in raw
    ]
    txns = list(dict.fromkeys(e.src for e in edges))
    text = lead + " " + " ".join(f"({n}) {e.why}" for n, e in enumerate(edges, start=1))
    return TxnAnomaly(kind, level, txns, edges, text, _dot(g, f"{kind} {' '.join(txns)}", edges))


_CYCLE_TEXT = {
    "G0": "Write cycle (G0): the transactions' writes to rows are interleaved so that no serial order installs them.",
    "G1c": "Circular information flow (G1c): each transaction read or overwrote another's write, around a cycle.",
    "G-single": (
        "Single anti-dependency cycle (G-single, e.g. a lost update): one transaction missed a write that "
        "the others depend on."
    ),
    "G2-item": "Item anti-dependency cycle (G2-item, e.g. write skew): each transaction missed another's write.",
    "G2": "Predicate anti-dependency cycle (G2): a predicate read missed rows another transaction inserted.",
}

MAX_REORDERING_EXAMPLES = 20


def analyze(h: TxnHistory) -> TxnAnalysis:
    # Millions of small objects and no reference cycles to collect: the
    # cyclic GC would rescan them over and over while they are built.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _analyze(h)
    finally:
        if was_enabled:
            gc.enable()


def _analyze(h: TxnHistory) -> TxnAnalysis:
    laps = Laps()  # where the time goes (bench-checker prints it)
    lap = laps.lap
    g = _Graph(h)
    res = TxnAnalysis(unknown=dict(h.unknown))
    stats: dict[str, Any] = {"transactions": len(g.txns)}
    lap("version order")
    for t in g.txns:
        if t.predicates and t.read_version is None:
            res.unknown.setdefault(t.id, "read version unknown: its predicate anti-dependencies cannot be derived")
    scan = _scan(g, stats)
    lap("dependency scan")
    _report_reads(g, scan, res)
    backward = scan.backward
    intervals = _merge((dst, src) for src, dst, _, _ in backward)
    stats["intervals"] = len(intervals)
    stats["interval_nodes"] = sum(b - a + 1 for a, b in intervals)
    in_cycle: dict[int, int] = {}  # txn -> the reported cycle's component
    for lo, hi in intervals:
        sub = _subgraph(g, lo, hi)
        for scc in nx.strongly_connected_components(sub):
            if len(scc) < 2 and not any(sub.has_edge(n, n) for n in scc):
                continue
            kind, raw = _find_cycle(sub, scc)
            res.anomalies.append(_anomaly(g, kind, WRITE_SERIALIZABLE, raw, _CYCLE_TEXT[kind]))
            for n in scc:
                in_cycle[n] = min(scc)
    lap("cycle search")
    # Serializable: a backward edge out of a Serializable commit breaks the
    # history order; under WriteSerializable it is a permitted reordering.
    # Each commit is judged by the level its table carried at that commit.
    # An edge inside a cycle reported above is that cycle (no serial order
    # at all), not a second anomaly.
    for a, b, kind, key in backward:
        raw = [(a, b, kind, key), (b, a, CO, None)]
        if g.txns[a].isolation == SERIALIZABLE:
            if a in in_cycle and in_cycle.get(b) == in_cycle[a]:
                continue
            res.anomalies.append(
                _anomaly(
                    g,
                    "history-order",
                    SERIALIZABLE,
                    raw,
                    f"History-order violation under Serializable (spec C14, C16): {g.label(a)} committed after "
                    f"{g.label(b)} although it did not see its effect, so the serial order differs from the table "
                    "history and the later commit should have failed.",
                )
            )
        else:
            res.reorderings_total += 1
            if len(res.reorderings) < MAX_REORDERING_EXAMPLES:
                res.reorderings.append(
                    _anomaly(
                        g,
                        "history-order-reordering",
                        WRITE_SERIALIZABLE,
                        raw,
                        f"Reordering (allowed under WriteSerializable, spec C15, C16): {g.label(a)} serializes "
                        f"before {g.label(b)} although it committed after it.",
                    )
                )
    lap("explanation")
    res.stats, res.stage_s = stats, laps.seconds
    return res
