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

Finding the backward edges touches every row version every transaction
observed, so it runs on the history's columns (checkers.txn_columns) as a
few sorts and array passes: each row's versions in commit order are one
sorted array of (row, installer) codes, and the version after the one a
transaction observed is a binary search into it. Only the intervals are
walked one edge at a time, to build the graphs the cycle search and the
explanations need.

Serializable (spec C14) adds commit-order edges: the history order must be
the serial order, so any backward edge out of a transaction committed at
Serializable is a violation ("history-order"). Under WriteSerializable
(C15) it is only a reordering (C16), reported as information.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from checkers.txn_columns import INITIAL_CODE, TxnColumns, encode
from checkers.txn_model import INITIAL, RowRef, TxnHistory
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE
from harness.core.laps import Laps

if TYPE_CHECKING:
    import networkx as nx

WW, WR, RW, PRW, CO = "ww", "wr", "rw", "rw-predicate", "co"
ANTI = (RW, PRW)
_KIND_RANK = {WW: 0, WR: 1, RW: 2, PRW: 3}
# Predicate pairs, and observed row versions, looked at per array pass: the
# passes' temporaries stay a few MB (in cache, and no fresh memory the
# kernel must hand over) whatever the history's length.
_PAIRS_PER_PASS = 1 << 20
_REFS_PER_PASS = 1 << 18


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


# An edge between transaction indexes: (src, dst, kind, what justifies it:
# a RowRef for wr and rw, a row key for ww, (Predicate, key) for rw-predicate).
RawEdge = tuple[int, int, str, Any]


@dataclass
class Found:
    """What a derivation of the graph found, in the order it is reported:
    the analysis derives it from columns, a reference implementation (the
    tests') from objects, and both report it with `report`."""

    aborted: list[tuple[int, RowRef]]  # G1a: (reader, version whose writer did not commit)
    # (reader, version read, txn that wrote it after / replaced it by the read version, which)
    mismatches: list[tuple[int, RowRef, int, bool]]
    backward: list[RawEdge]  # src committed after dst; by reader, then in the order it observed
    # Each strongly connected component with a cycle, by its lowest node:
    # its nodes and its edges in canonical order (`canonical`).
    components: list[tuple[list[int], list[RawEdge]]]
    unknown_reads: list[int]  # transactions with predicates and no read version


@dataclass
class Names:
    """How a report names transaction i."""

    id: Callable[[int], str]
    label: Callable[[int], str]
    read_version: Callable[[int], int | None]
    serializable: Callable[[int], bool]
    failed: set[str]
    # The transaction i's id names (the last one committed under it), whose
    # label a graph's node carries.
    last: Callable[[int], int]


def canonical(edges: list[RawEdge]) -> list[RawEdge]:
    """One order for a graph's edges, so the cycle search picks the same
    cycle whichever derivation built the graph."""
    return sorted(edges, key=lambda e: (e[0], e[1], _KIND_RANK[e[2]], repr(e[3])))


def components(edges: list[RawEdge], nodes: range) -> list[tuple[list[int], list[RawEdge]]]:
    """The strongly connected components of a graph that have a cycle."""
    import networkx as nx  # only a history with a backward edge has a graph to search

    d = nx.DiGraph()
    d.add_nodes_from(nodes)
    d.add_edges_from((a, b) for a, b, _, _ in edges)
    out = []
    for scc in nx.strongly_connected_components(d):
        if len(scc) < 2 and not any(d.has_edge(n, n) for n in scc):
            continue
        out.append((sorted(scc), [e for e in edges if e[0] in scc and e[1] in scc]))
    return sorted(out, key=lambda c: c[0][0])


# -- the derivation on columns ---------------------------------------------------------------


@dataclass
class _Index:
    base: int  # a row's install code: row * base + installer + 1
    chain: np.ndarray  # install codes, sorted: each row's versions in commit order
    ref_txn: np.ndarray  # the observer of each observed row version
    ref_next: np.ndarray  # who installed the version after it (-1: none)
    ins_txn: np.ndarray  # the inserter of each insert
    pred_txn: np.ndarray  # the evaluator of each predicate
    # (observer * rows + row) of each observed version, sorted: what a
    # predicate's evaluator saw (only where there are predicates).
    seen: np.ndarray


def _next_installer(chain: np.ndarray, base: int, key: np.ndarray, writer: np.ndarray) -> np.ndarray:
    """The transaction that installed the version of `key` after `writer`'s
    (after none: the first version, for the initial one); -1 when there is
    none, or `writer` did not commit or installed no version of that row."""
    out = np.full(len(key), -1, dtype=np.int64)
    if not len(chain):
        return out
    starts = range(0, len(key), _REFS_PER_PASS)

    def one(s: int) -> None:
        e = min(s + _REFS_PER_PASS, len(key))
        _next_in(chain, base, key[s:e], writer[s:e], out[s:e])

    if len(starts) < 4:
        for s in starts:
            one(s)
    else:
        # numpy lets go of the GIL while it sorts and searches: the passes
        # run on every core (10M transactions: 8.3 s on one, 3.7 s on two).
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(one, starts))
    return out


def _next_in(chain: np.ndarray, base: int, key: np.ndarray, writer: np.ndarray, out: np.ndarray) -> None:
    size = len(chain)
    committed = writer >= 0
    q = key * base + np.where(committed, writer + 1, 0)
    # Searched in order, each search starts where the last one ended: a
    # walk through the chain, not a cache miss per level of a binary search.
    order = np.argsort(q)
    q, committed, key = q[order], committed[order], key[order]
    valid = writer[order] >= INITIAL_CODE
    pos = np.searchsorted(chain, q)
    at = chain[np.minimum(pos, size - 1)]
    found = ~committed | ((pos < size) & (at == q))
    nxt = pos + committed
    cand = chain[np.minimum(nxt, size - 1)]
    ok = found & valid & (nxt < size) & (cand // base == key)
    out[order[ok]] = cand[ok] % base - 1


def _index(c: TxnColumns) -> _Index:
    n = len(c)
    base = n + 1
    txn = np.arange(n, dtype=np.int64)
    chain = c.inst_key * base + np.repeat(txn, np.diff(c.inst_off)) + 1
    chain.sort()
    ref_txn = np.repeat(txn, np.diff(c.ref_off))
    # Already in observer order: the stable sort (a merge sort) only sorts
    # each observer's run of rows.
    seen = np.sort(ref_txn * max(len(c.keys), 1) + c.ref_key, kind="stable") if len(c.pred_lo) else ref_txn[:0]
    return _Index(
        base,
        chain,
        ref_txn,
        _next_installer(chain, base, c.ref_key, c.ref_writer),
        np.repeat(txn, np.diff(c.ins_off)),
        np.repeat(txn, np.diff(c.pred_off)),
        seen,
    )


def _predicate_edges(
    c: TxnColumns, ix: _Index, preds: np.ndarray, win_lo: np.ndarray, win_hi: np.ndarray
) -> list[tuple[int, int, int, int]]:
    """(i, j, insert, predicate): for each predicate p of `preds` (of
    transaction i) and each j in [win_lo, win_hi] but i, the first row j
    inserted, in write order, that i did not observe and one of i's
    predicates matches (the first in order): one edge per (i, j)."""
    if not len(preds):
        return []
    n_keys = max(len(c.keys), 1)
    owner = ix.pred_txn[preds]
    e_lo = c.ins_off[win_lo]
    e_hi = c.ins_off[np.maximum(win_hi + 1, win_lo)]
    counts = np.maximum(e_hi - e_lo, 0)
    seen = ix.seen
    found: list[np.ndarray] = []
    start = 0
    cum = np.cumsum(counts)
    while start < len(preds):
        # A pass over as many predicates as make _PAIRS_PER_PASS pairs.
        done = int(cum[start - 1]) if start else 0
        stop = max(int(np.searchsorted(cum, done + _PAIRS_PER_PASS, side="right")), start + 1)
        cnt = counts[start:stop]
        total = int(cnt.sum())
        if total:
            pp = np.repeat(np.arange(start, stop, dtype=np.int64), cnt)
            first = np.cumsum(cnt) - cnt
            ee = np.arange(total, dtype=np.int64) - np.repeat(first, cnt) + np.repeat(e_lo[start:stop], cnt)
            p = preds[pp]
            i = owner[pp]
            j = ix.ins_txn[ee]
            cls = c.pred_cls[p]
            val = c.ins_val[ee]
            hit = (cls >= 0) & (c.ins_cls[ee] == cls) & (c.pred_lo[p] <= val) & (val <= c.pred_hi[p]) & (j != i)
            q = i[hit] * n_keys + c.ins_key[ee[hit]]
            pos = np.searchsorted(seen, q)
            unseen = seen[np.minimum(pos, len(seen) - 1)] != q if len(seen) else np.ones(len(q), dtype=bool)
            sel = np.flatnonzero(hit)[unseen]
            found.append(np.stack([i[sel], j[sel], ee[sel], p[sel]]))
        start = stop
    if not found:
        return []
    a = np.concatenate(found, axis=1)
    order = np.lexsort((a[3], a[2], a[1], a[0]))
    a = a[:, order]
    keep = np.ones(a.shape[1], dtype=bool)
    keep[1:] = (a[0, 1:] != a[0, :-1]) | (a[1, 1:] != a[1, :-1])
    return [(int(i), int(j), int(e), int(p)) for i, j, e, p in a[:, keep].T.tolist()]


def _predicate_windows(c: TxnColumns, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The predicates of `owners` that have a read version, and the first
    transaction each one's read version did not see."""
    counts = np.diff(c.pred_off)[owners]
    preds = np.repeat(c.pred_off[owners], counts) + (
        np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    owner = np.repeat(owners, counts)
    rv = c.read_version[owner]
    has = rv >= 0
    return preds[has], np.searchsorted(c.version, rv[has], side="right")


def _scan(c: TxnColumns, ix: _Index, stats: dict[str, Any]) -> tuple[list, list, list[RawEdge]]:
    """Every observed row version at once: backward edges, reads of writers
    that did not commit (G1a), reads that contradict the read version.

    ww edges always point forward (version order is commit order) and are
    skipped; an observed version can only give a backward rw edge (the
    observer missed a version committed before its own commit) or a
    backward wr edge (it read a version committed after its own)."""
    ref_txn, key, writer, nxt = ix.ref_txn, c.ref_key, c.ref_writer, ix.ref_next
    wrs, rws, evs = [], [], []
    for s in range(0, len(key), _REFS_PER_PASS):
        e = min(s + _REFS_PER_PASS, len(key))
        txn, w, j = ref_txn[s:e], writer[s:e], nxt[s:e]
        committed = w >= 0
        rw_back = (j >= 0) & (j < txn)
        rv = c.read_version[txn]
        has_rv = rv >= 0
        later = has_rv & committed & (c.version[np.where(committed, w, 0)] > rv)
        earlier = rw_back & has_rv & (c.version[np.where(j >= 0, j, 0)] <= rv)
        wrs.append(np.flatnonzero(committed & (w > txn)) + s)
        rws.append(np.flatnonzero(rw_back) + s)
        evs += [(np.flatnonzero(later) + s) * 2, (np.flatnonzero(earlier) + s) * 2 + 1]
    empty = np.zeros(0, dtype=np.int64)
    # Snapshot reads: each transaction's first contradiction, in the order
    # it observed them (a version read after its read version first).
    ev = np.sort(np.concatenate([empty, *evs]))
    _, first = np.unique(ref_txn[ev // 2], return_index=True)
    mismatches = []
    for e in ev[first].tolist():
        r, is_later = e // 2, e % 2 == 0
        other = int(writer[r]) if is_later else int(nxt[r])
        mismatches.append((int(ref_txn[r]), c.ref(int(key[r]), int(writer[r])), other, is_later))
    aborted = list(
        dict.fromkeys(
            (int(ref_txn[r]), c.ref(int(key[r]), int(writer[r]))) for r in np.flatnonzero(writer < INITIAL_CODE)
        )
    )
    # Backward edges, each reader's in the order it observed them (wr before
    # rw of one version), its predicate ones last, by the inserter.
    r_wr, r_rw = np.concatenate([empty, *wrs]), np.concatenate([empty, *rws])
    owners = np.flatnonzero(np.diff(c.pred_off) > 0)
    preds, starts = _predicate_windows(c, owners)
    prw = _predicate_edges(c, ix, preds, starts, ix.pred_txn[preds] - 1)
    m = len(key)
    rows = np.concatenate(
        [
            np.stack(
                [ref_txn[r_wr], r_wr * 2, writer[r_wr], ref_txn[r_wr], np.zeros_like(r_wr), key[r_wr], writer[r_wr]]
            ),
            np.stack(
                [ref_txn[r_rw], r_rw * 2 + 1, ref_txn[r_rw], nxt[r_rw], np.ones_like(r_rw), key[r_rw], writer[r_rw]]
            ),
            np.array([[i, 2 * m + j, i, j, 2, c.ins_key[e], p] for i, j, e, p in prw], dtype=np.int64).T.reshape(7, -1),
        ],
        axis=1,
    )
    rows = rows[:, np.lexsort((rows[1], rows[0]))]
    # A version observed twice (read, and replaced by a write) is one edge.
    _, first_seen = np.unique(rows[2:].T, axis=0, return_index=True)
    rows = rows[:, np.sort(first_seen)]
    backward: list[RawEdge] = []
    for _, _, src, dst, kind, k, aux in rows.T.tolist():
        if kind == 2:
            backward.append((src, dst, PRW, (c.predicate(aux), c.keys[k])))
        else:
            backward.append((src, dst, WR if kind == 0 else RW, c.ref(k, aux)))
    stats["reads_scanned"] = m
    stats["backward_edges"] = len(backward)
    return aborted, mismatches, backward


def _interval_edges(c: TxnColumns, ix: _Index, lo: int, hi: int) -> list[RawEdge]:
    """Every edge between transactions lo..hi, in canonical order."""
    out: list[RawEdge] = []
    r0, r1 = int(c.ref_off[lo]), int(c.ref_off[hi + 1])
    for r in range(r0, r1):
        i, w, j = int(ix.ref_txn[r]), int(c.ref_writer[r]), int(ix.ref_next[r])
        ref = c.ref(int(c.ref_key[r]), w)
        if j >= 0 and j != i and lo <= j <= hi:
            out.append((i, j, RW, ref))
        if w >= 0 and w != i and lo <= w <= hi:
            out.append((w, i, WR, ref))
    s0, s1 = int(c.inst_off[lo]), int(c.inst_off[hi + 1])
    inst_txn = np.repeat(np.arange(lo, hi + 1, dtype=np.int64), np.diff(c.inst_off[lo : hi + 2]))
    nxt = _next_installer(ix.chain, ix.base, c.inst_key[s0:s1], inst_txn)
    for i, k, j in zip(inst_txn.tolist(), c.inst_key[s0:s1].tolist(), nxt.tolist(), strict=True):
        if j >= 0 and j <= hi:
            out.append((i, j, WW, c.keys[k]))
    preds, starts = _predicate_windows(c, np.flatnonzero(np.diff(c.pred_off[lo : hi + 2]) > 0) + lo)
    for i, j, e, p in _predicate_edges(c, ix, preds, np.maximum(starts, lo), np.full(len(preds), hi)):
        out.append((i, j, PRW, (c.predicate(p), c.keys[int(c.ins_key[e])])))
    return canonical(out)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(a, b) for a, b in merged]


# -- the report ------------------------------------------------------------------------------


def _why(names: Names, src: int, dst: int, kind: str, key: Any) -> str:
    s, d = names.label(src), names.label(dst)
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


def _cycle_edges(h: nx.MultiDiGraph, nodes: list[int]) -> list[RawEdge]:
    out = []
    for a, b in zip(nodes, nodes[1:] + nodes[:1], strict=True):
        # Prefer the weakest justification: ww < wr < rw < rw-predicate.
        datas = sorted(h.get_edge_data(a, b).values(), key=lambda d: _KIND_RANK[d["kind"]])
        out.append((a, b, datas[0]["kind"], datas[0]["ref"]))
    return out


def _find_cycle(nodes: list[int], edges: list[RawEdge]) -> tuple[str, list[RawEdge]]:
    """The weakest anomaly in a strongly connected component, Elle's order:
    G0 (ww only), G1c (ww+wr), G-single (one anti-dependency), G2-item, G2."""
    import networkx as nx

    h = nx.MultiDiGraph()
    h.add_nodes_from(nodes)
    for a, b, kind, ref in edges:
        h.add_edge(a, b, kind=kind, ref=ref)

    def restricted(kinds: tuple[str, ...]) -> nx.DiGraph:
        d = nx.DiGraph()
        d.add_edges_from((a, b) for a, b, kind, _ in edges if kind in kinds)
        return d

    for name, kinds in (("G0", (WW,)), ("G1c", (WW, WR))):
        try:
            cyc = nx.find_cycle(restricted(kinds))
            return name, _cycle_edges(h, [a for a, _ in cyc])
        except nx.NetworkXNoCycle:
            pass
    dep = restricted((WW, WR))
    for a, b, kind, ref in edges:
        if kind in ANTI and b in dep and a in dep:
            try:
                path = nx.shortest_path(dep, b, a)
            except nx.NetworkXNoPath:
                continue
            cycle = _cycle_edges(h, [a, *path[:-1]])
            cycle[0] = (a, b, kind, ref)
            return "G-single", cycle
    full = nx.DiGraph(h)
    best: list[int] | None = None
    for node in nodes:
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
    cycle = _cycle_edges(h, best)
    return ("G2" if any(k == PRW for _, _, k, _ in cycle) else "G2-item"), cycle


def _dot(names: Names, name: str, raw: list[RawEdge], edges: list[Edge]) -> str:
    lines = [f'digraph "{name}" {{', "  rankdir=LR;", '  node [shape=box, fontname="monospace"];']
    nodes = dict.fromkeys(
        [(names.id(a), names.last(a)) for a, _, _, _ in raw] + [(names.id(b), names.last(b)) for _, b, _, _ in raw]
    )
    for tid, i in nodes:
        lines.append(f'  "{tid}" [label="{names.label(i)}"];')
    colors = {WW: "black", WR: "blue", RW: "red", PRW: "red", CO: "gray"}
    for e in edges:
        style = ", style=dashed" if e.kind in (PRW, CO) else ""
        lines.append(f'  "{e.src}" -> "{e.dst}" [label="{e.kind} {str(e.key)[:40]}", color={colors[e.kind]}{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _anomaly(names: Names, kind: str, level: str, raw: list[RawEdge], lead: str) -> TxnAnomaly:
    edges = [
        Edge(
            names.id(a),
            names.id(b),
            k,
            key if k != RW else key.key if isinstance(key, RowRef) else key,
            _why(names, a, b, k, key),
        )
        for a, b, k, key in raw
    ]
    txns = list(dict.fromkeys(e.src for e in edges))
    text = lead + " " + " ".join(f"({n}) {e.why}" for n, e in enumerate(edges, start=1))
    return TxnAnomaly(kind, level, txns, edges, text, _dot(names, f"{kind} {' '.join(txns)}", raw, edges))


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


def report(found: Found, names: Names, res: TxnAnalysis) -> None:
    """The anomalies of what a derivation found, with their explanations."""
    for i in found.unknown_reads:
        res.unknown.setdefault(names.id(i), "read version unknown: its predicate anti-dependencies cannot be derived")
    for i, ref in found.aborted:
        status = "failed" if ref.writer in names.failed else "did not commit"
        res.anomalies.append(
            TxnAnomaly(
                "G1a",
                WRITE_SERIALIZABLE,
                [names.id(i)],
                [],
                f"Aborted read (G1a): {names.label(i)} read row {ref.key!r} as written by txn {ref.writer}, "
                f"which {status}.",
            )
        )
    # Snapshot reads (spec C12): what a transaction read, recovered from the
    # data, must be what was live at the read version the log records.
    for i, ref, j, later in found.mismatches:
        why = (
            f"which {names.label(j)} committed after that read version"
            if later
            else f"although {names.label(j)} had already replaced that version at or before the read version"
        )
        writer = "its initial version" if ref.writer == INITIAL else f"the version written by txn {ref.writer}"
        res.anomalies.append(
            TxnAnomaly(
                "snapshot-mismatch",
                WRITE_SERIALIZABLE,
                [names.id(i)],
                [],
                f"Snapshot mismatch (spec C12): the log says {names.label(i)} read the table at version "
                f"{names.read_version(i)}, but it read row {ref.key!r} in {writer}, {why}.",
            )
        )
    in_cycle: dict[int, int] = {}  # txn -> the reported cycle's component
    for nodes, edges in found.components:
        kind, raw = _find_cycle(nodes, edges)
        res.anomalies.append(_anomaly(names, kind, WRITE_SERIALIZABLE, raw, _CYCLE_TEXT[kind]))
        for n in nodes:
            in_cycle[n] = nodes[0]
    # Serializable: a backward edge out of a Serializable commit breaks the
    # history order; under WriteSerializable it is a permitted reordering.
    # Each commit is judged by the level its table carried at that commit.
    # An edge inside a cycle reported above is that cycle (no serial order
    # at all), not a second anomaly.
    for a, b, kind, key in found.backward:
        raw = [(a, b, kind, key), (b, a, CO, None)]
        if names.serializable(a):
            if a in in_cycle and in_cycle.get(b) == in_cycle[a]:
                continue
            res.anomalies.append(
                _anomaly(
                    names,
                    "history-order",
                    SERIALIZABLE,
                    raw,
                    f"History-order violation under Serializable (spec C14, C16): {names.label(a)} committed after "
                    f"{names.label(b)} although it did not see its effect, so the serial order differs from the table "
                    "history and the later commit should have failed.",
                )
            )
        else:
            res.reorderings_total += 1
            if len(res.reorderings) < MAX_REORDERING_EXAMPLES:
                res.reorderings.append(
                    _anomaly(
                        names,
                        "history-order-reordering",
                        WRITE_SERIALIZABLE,
                        raw,
                        f"Reordering (allowed under WriteSerializable, spec C15, C16): {names.label(a)} serializes "
                        f"before {names.label(b)} although it committed after it.",
                    )
                )


def names_of(c: TxnColumns) -> Names:
    def read_version(i: int) -> int | None:
        rv = int(c.read_version[i])
        return rv if rv >= 0 else None

    return Names(
        lambda i: c.ids[i],
        c.label,
        read_version,
        lambda i: bool(c.serializable[i]),
        c.failed,
        lambda i: c.twice.get(c.ids[i], i),
    )


def _hugepages(enabled: bool) -> bool:
    """numpy asks the kernel for huge pages for large arrays; the passes
    here allocate many short-lived ones, and on a long history the kernel's
    work to find huge pages for them took longer than the passes (1M
    transactions: 0.7 s of system time against 0.4 s of work). Returns the
    setting before."""
    set_madvise = getattr(getattr(np, "_core", np).multiarray, "_set_madvise_hugepage", None)
    return bool(set_madvise(enabled)) if set_madvise is not None else enabled


def analyze(h: TxnHistory | TxnColumns) -> TxnAnalysis:
    # Millions of small objects and no reference cycles to collect: the
    # cyclic GC would rescan them over and over while they are built.
    was_enabled = gc.isenabled()
    gc.disable()
    hugepages = _hugepages(False)
    try:
        return _analyze(h)
    finally:
        _hugepages(hugepages)
        if was_enabled:
            gc.enable()


def _analyze(h: TxnHistory | TxnColumns) -> TxnAnalysis:
    laps = Laps()  # where the time goes (bench-checker prints it)
    lap = laps.lap
    c = h if isinstance(h, TxnColumns) else encode(h)
    if c is not h:
        lap("encode")
    stats: dict[str, Any] = {"transactions": len(c)}
    ix = _index(c)
    lap("version order")
    aborted, mismatches, backward = _scan(c, ix, stats)
    lap("dependency scan")
    intervals = _merge([(dst, src) for src, dst, _, _ in backward])
    stats["intervals"] = len(intervals)
    stats["interval_nodes"] = sum(b - a + 1 for a, b in intervals)
    comps = [comp for lo, hi in intervals for comp in components(_interval_edges(c, ix, lo, hi), range(lo, hi + 1))]
    unknown_reads = np.flatnonzero((np.diff(c.pred_off) > 0) & (c.read_version < 0)).tolist()
    lap("cycle search")
    res = TxnAnalysis(unknown=dict(c.unknown))
    report(Found(aborted, mismatches, backward, comps, unknown_reads), names_of(c), res)
    lap("explanation")
    res.stats, res.stage_s = stats, laps.seconds
    return res
