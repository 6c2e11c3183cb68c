"""Elle's list-append on rows (spec C12, C14, C15, M3).

A key's list is its element rows ordered by `pos`; each element records what
its transaction read: `pos` (the list's length) and `prev_writer` (the writer
of its last element, NULL for an empty list). From the log and the data:

- duplicate-position: two elements at the same (k, pos) alive together. Both
  transactions read the same prefix and both committed: a lost append
  (G-single). An append whose SELECT reads the target is no blind append
  (spec M-table), so the second must conflict at both levels (M3, C14/C15).
- list-gap / broken-link: an element at pos p > 0 with no element at p - 1,
  or whose prev_writer is not the writer of an element at p - 1 committed
  before it (or an element at pos 0 with a prev_writer): its transaction's
  read was not of one committed snapshot (C12).
- non-snapshot-read: one transaction's elements read states of their keys
  that never held at one common version (C12: one snapshot per statement).
- incompatible-order: a read whose list for a key is not a prefix of that
  key's version order, the elements in commit order (Elle's
  incompatible-order; C12: every read sees one committed version, and every
  committed version's list is such a prefix).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import reads, table_facts
from checkers.row_columns import row_columns
from checkers.serializability import default_isolation
from harness.core.history import History
from harness.core.isolation import LEVELS, WRITE_SERIALIZABLE
from harness.deltalog import TransactionLog

NAME = "list-append"
MAX_PER_KIND = 50


@dataclass(frozen=True)
class Element:
    id: Any
    k: Any
    pos: int
    writer: str
    prev: str | None
    added: int
    removed: int | None

    def alive_with(self, other: Element) -> bool:
        return (self.removed is None or self.removed > other.added) and (
            other.removed is None or other.removed > self.added
        )

    def label(self) -> str:
        return f"element {self.writer} (row {self.id}, committed at version {self.added})"


def elements(log: TransactionLog) -> dict[Any, list[Element]]:
    """Every element ever added, per key, in version order (commit, then pos)."""
    facts = table_facts(log)
    cols = row_columns(log, ["k", "pos", "prev_writer"])
    out: dict[Any, list[Element]] = defaultdict(list)
    for life in facts.lives:
        k, pos, prev = cols.get(life.id, (None, None, None))
        if k is None or pos is None:
            continue
        out[k].append(Element(life.id, k, int(pos), str(life.writer), prev, life.added, life.removed))
    for els in out.values():
        els.sort(key=lambda e: (e.added, e.pos))
    return dict(out)


Span = tuple[int, int]  # versions [lo, hi)


def _read_spans(els: list[Element]) -> dict[Any, list[Span]]:
    """For each element of one key (by row id): the versions before its own
    commit at which the key's list was what it says it read (length pos,
    last element prev_writer)."""
    states: list[tuple[int, int, frozenset[str]]] = [(-1, -1, frozenset())]  # (from version, max pos, tails)
    by_pos: dict[int, set[str]] = defaultdict(set)
    for v in sorted({e.added for e in els}):
        for e in els:
            if e.added == v:
                by_pos[e.pos].add(e.writer)
        top = max(by_pos)
        states.append((v, top, frozenset(by_pos[top])))
    out: dict[Any, list[Span]] = {}
    for e in els:
        spans: list[Span] = []
        for (lo, top, tails), nxt in zip(states, [*states[1:], None], strict=True):
            hi = min(nxt[0] if nxt else e.added, e.added)
            if lo < hi and top == e.pos - 1 and (e.prev in tails if e.pos else e.prev is None):
                if spans and spans[-1][1] == lo:
                    lo = spans.pop()[0]
                spans.append((lo, hi))
        out[e.id] = spans
    return out


def _intersect(a: list[Span], b: list[Span]) -> list[Span]:
    return [(max(x[0], y[0]), min(x[1], y[1])) for x in a for y in b if max(x[0], y[0]) < min(x[1], y[1])]


def txn_reads(by_key: dict[Any, list[Element]]) -> dict[str, list[tuple[Element, list[Span]]]]:
    """Per transaction (writer): each element it appended, with the versions
    at which its key's list was what the element says was read."""
    out: dict[str, list[tuple[Element, list[Span]]]] = defaultdict(list)
    for els in by_key.values():
        spans = _read_spans(els)
        for e in els:
            out[e.writer].append((e, spans[e.id]))
    return dict(out)


def common_spans(reads: list[tuple[Element, list[Span]]]) -> list[Span]:
    """The versions at which every read of one transaction held at once."""
    common = reads[0][1]
    for _, spans in reads[1:]:
        common = _intersect(common, spans)
    return common


def _fmt_spans(spans: list[Span]) -> str:
    return ", ".join(f"{max(lo, 0)}..{hi - 1}" for lo, hi in spans) or "no version"


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "the lists")
    by_key = elements(log)
    default = default_isolation(history)
    anomalies: list[Anomaly] = []
    counts: dict[str, int] = defaultdict(int)

    def report(a: Anomaly) -> None:
        counts[a.kind] += 1
        if counts[a.kind] <= MAX_PER_KIND:
            anomalies.append(a)

    for k, els in sorted(by_key.items(), key=lambda kv: repr(kv[0])):
        at: dict[int, list[Element]] = defaultdict(list)
        for e in els:
            at[e.pos].append(e)
        for pos, same in sorted(at.items()):
            for i, a in enumerate(same):
                b = next((b for b in same[i + 1 :] if a.alive_with(b)), None)
                if b is None:
                    continue
                level = log.configuration_at(b.added - 1).get("delta.isolationLevel")
                level = level if level in LEVELS else default
                read = "an empty list" if pos == 0 else f"a list of length {pos} ending in element {b.prev}"
                report(
                    Anomaly(
                        "duplicate-position",
                        "C15" if level == WRITE_SERIALIZABLE else "C14",
                        f"Lost append (G-single) on key {k!r}: {a.label()} and {b.label()} are both at position {pos} "
                        f"and alive together. Both transactions read {read}; the later one read the target table "
                        f"(INSERT ... SELECT / MERGE), so it should have conflicted with the earlier one (spec M3) "
                        f"at level {level}, and no serial order lets both read the same prefix.",
                        ops=[a.writer, b.writer],
                        versions=[a.added, b.added],
                        rows=[a.id, b.id],
                        details={"key": k, "pos": pos, "level": level},
                    )
                )
                break
            for e in same:
                if pos == 0:
                    if e.prev is not None:
                        report(
                            Anomaly(
                                "broken-link",
                                "C12",
                                f"On key {k!r}, {e.label()} is at position 0 but names {e.prev} as the last element "
                                "it read: its transaction read no single snapshot of the list.",
                                ops=[e.writer],
                                versions=[e.added],
                                rows=[e.id],
                            )
                        )
                    continue
                before = at.get(pos - 1, [])
                if not before:
                    report(
                        Anomaly(
                            "list-gap",
                            "C12",
                            f"On key {k!r}, {e.label()} is at position {pos} but no element was ever at position "
                            f"{pos - 1}: its transaction read a list of length {pos} that never existed.",
                            ops=[e.writer],
                            versions=[e.added],
                            rows=[e.id],
                        )
                    )
                elif not any(p.writer == e.prev and p.added < e.added for p in before):
                    report(
                        Anomaly(
                            "broken-link",
                            "C12",
                            f"On key {k!r}, {e.label()} at position {pos} names {e.prev} as the last element it read, "
                            f"but position {pos - 1} holds {', '.join(p.label() for p in before)}: its transaction's "
                            "read was not of one committed snapshot.",
                            ops=[e.writer, *(p.writer for p in before)],
                            versions=[e.added, *(p.added for p in before)],
                            rows=[e.id],
                        )
                    )

    # One transaction, one snapshot (C12): the states its elements read of
    # their keys must all hold at one version.
    flagged = {r for a in anomalies if a.kind in ("list-gap", "broken-link") for r in a.rows[:1]}
    for writer, txn in sorted(txn_reads(by_key).items()):
        if any(e.id in flagged for e, _ in txn) or common_spans(txn):
            continue
        els = [e for e, _ in txn]
        parts = "; ".join(
            f"key {e.k!r} as {'empty' if e.pos == 0 else f'length {e.pos} ending in {e.prev}'} "
            f"(versions {_fmt_spans(spans)})"
            for e, spans in txn
        )
        report(
            Anomaly(
                "non-snapshot-read",
                "C12",
                f"Transaction {writer} (committed at version {els[0].added}) read {parts}: no single committed "
                "version holds all of that, so its one statement did not read one snapshot of the table.",
                ops=[writer],
                versions=[els[0].added],
                rows=[e.id for e in els],
                details={"reads": {str(e.k): [e.pos, e.prev, spans] for e, spans in txn}},
            )
        )

    order = {k: [e.writer for e in els] for k, els in by_key.items()}
    rank = {(k, w): i for k, ws in order.items() for i, w in enumerate(ws)}
    n_reads = 0
    for op in reads(history):
        lists = op.value.get("lists") if isinstance(op.value, dict) else None
        if lists is None:
            continue
        n_reads += 1
        for k, items in lists:
            # A read sees elements; their order is the rows' own pos. So what
            # it can get wrong is which elements: a prefix of the commits.
            got = [w for _, w in sorted(items, key=lambda pw: (pw[0], rank.get((k, pw[1]), -1)))]
            want = order.get(k, [])
            if set(got) != set(want[: len(got)]):
                extra = sorted(set(got) - set(want[: len(got)]))
                report(
                    Anomaly(
                        "incompatible-order",
                        "C12",
                        f"Read {op.id} saw key {k!r} as [{', '.join(got)}], which is not a prefix of the key's "
                        f"version order [{', '.join(want)}] ({', '.join(extra)} seen without every element committed "
                        "before it): no committed version of the table holds that list.",
                        ops=[op.id],
                        versions=[op.version] if op.version is not None else [],
                        details={"key": k, "read": got, "version_order": want},
                    )
                )
    stats = {
        "keys": len(by_key),
        "elements": sum(len(v) for v in by_key.values()),
        "reads_checked": n_reads,
        **{f"{kind}_total": n for kind, n in counts.items()},
    }
    if anomalies:
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"The lists are not linear: {summary}. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"All {stats['elements']} elements of the {len(by_key)} lists form gap-free chains, each linked to the "
        f"element before it, no position holds two live elements, and each of {n_reads} read(s) saw every list as "
        "a prefix of its version order.",
        [],
        stats,
    )
