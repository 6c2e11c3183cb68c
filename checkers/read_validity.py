"""Read validity (spec C12): each read returned exactly the rows of one
committed version, and that version lies inside the read's real-time window.

The window of a read r is [lo, hi]:
- lo: the newest version committed by a write acknowledged before r began
  (a read must not see a table older than a commit it could know of);
- hi: one below the oldest version whose writer was invoked only after r
  ended (a read cannot see a commit that had not started yet).
A read that matches no version saw a state that never existed; one matching
only versions outside its window is stale (or from the future).
"""

from __future__ import annotations

import bisect
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import Fingerprint, TableFacts, fmt_ids, reads, table_facts
from harness.core.history import OK, History, Op
from harness.deltalog import TransactionLog

NAME = "read-validity"


class ReadWindows:
    """Each read's real-time window of versions [lo, hi] (the module docstring)."""

    def __init__(self, history: History, facts: TableFacts):
        # Every write narrows the windows, also one that adds no rows (a
        # DELETE of everything): its commit is found by the op id in its
        # commitInfo where the engine writes one.
        committed = [
            (op, v)
            for op in history.client_ops()
            if op.f != "read"
            for v in (facts.commit_version(op.id),)
            if v is not None
        ]
        acked = sorted((op.end, v) for op, v in committed if op.type == OK and op.end is not None)
        self._ack_times = [t for t, _ in acked]
        self._ack_prefix_max: list[int] = []
        m = 0
        for _, v in acked:
            m = max(m, v)
            self._ack_prefix_max.append(m)
        invoked = sorted((op.start, v) for op, v in committed)
        self._inv_times = [t for t, _ in invoked]
        self._inv_suffix_min = [0] * len(invoked)
        m = facts.latest + 1 if facts.latest is not None else 0
        for i in range(len(invoked) - 1, -1, -1):
            m = min(m, invoked[i][1])
            self._inv_suffix_min[i] = m
        self.latest = facts.latest if facts.latest is not None else 0
        self.first = facts.versions[0] if facts.versions else 0

    def window(self, read: Op) -> tuple[int, int]:
        i = bisect.bisect_left(self._ack_times, read.start)
        lo = self._ack_prefix_max[i - 1] if i > 0 else self.first
        end = read.end if read.end is not None else float("inf")
        j = bisect.bisect_right(self._inv_times, end)
        hi = self._inv_suffix_min[j] - 1 if j < len(self._inv_times) else self.latest
        return lo, hi


def _ids(read: Op) -> list[Any]:
    v = read.value
    return list(v.get("ids", [])) if isinstance(v, dict) else []


def _explain_mismatch(ids: list[Any], facts: TableFacts, lo: int, hi: int) -> tuple[str, list[Any]]:
    seen = set(ids)
    # Diffing every version costs versions x rows; the versions whose row
    # count is nearest the read's are the likely closest, plus the ends.
    window = [v for v in facts.versions if lo <= v <= hi] or [lo]
    window.sort(key=lambda v: abs(facts.fingerprints[v].count - len(ids)) if v in facts.fingerprints else 0)
    best = None
    for v in sorted({*window[:3], lo, hi} & set(facts.fingerprints) or {lo}):
        state = facts.state(v)
        missing, extra = sorted(state - seen, key=str), sorted(seen - state, key=str)
        if best is None or len(missing) + len(extra) < len(best[1]) + len(best[2]):
            best = (v, missing, extra)
    assert best is not None
    v, missing, extra = best
    writer = {life.id: (life.writer, life.added) for life in facts.lives}
    parts = []
    if missing:
        w = writer.get(missing[0], (None, None))
        parts.append(
            f"{len(missing)} row(s) of version {v} missing ({fmt_ids(missing)}; e.g. id {missing[0]} was "
            f"written by op {w[0]} at version {w[1]})"
        )
    if extra:
        by = writer.get(extra[0])
        where = f"written by op {by[0]} at version {by[1]}" if by else "never committed by anyone"
        parts.append(f"{len(extra)} row(s) not in version {v} ({fmt_ids(extra)}; e.g. id {extra[0]} {where})")
    dups = len(ids) - len(seen)
    if dups:
        parts.append(f"{dups} id(s) returned twice")
    return f"closest version in its window is {v}: " + "; ".join(parts), missing + extra


def _read_floors(seen: list[tuple[Op, int]]) -> dict[str, tuple[int, Op]]:
    """For each read, the newest version seen by a read that ended before it
    began, and that read. Each read sees the latest version at access time
    (spec C2, C12), so the versions reads see must follow real time too."""
    by_end = sorted(((r.end, v, r) for r, v in seen if r.end is not None), key=lambda x: x[0])
    ends = [e for e, _, _ in by_end]
    best: list[tuple[int, Op]] = []
    for _, v, r in by_end:
        best.append(max(best[-1], (v, r), key=lambda x: x[0]) if best else (v, r))
    out = {}
    for r, _ in seen:
        i = bisect.bisect_left(ends, r.start)
        if i > 0:
            out[r.id] = best[i - 1]
    return out


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    rs = reads(history)
    if facts.latest is None:
        return no_versions(NAME, "reads")
    windows = ReadWindows(history, facts)
    anomalies: list[Anomaly] = []
    matched: list[tuple[Op, list[int], int, int, str]] = []
    # The oldest version each read can have seen: what later reads must not
    # go below.
    seen: list[tuple[Op, int]] = []
    for r in rs:
        ids = _ids(r)
        fp = Fingerprint.of(ids)
        lo, hi = windows.window(r)
        when = f"read {r.id} (process {r.process}, {len(ids)} rows, window versions {lo}..{hi})"
        # Rows no version ever held are state-never-existed below, whatever
        # version the engine named; rows of another version, a mismatch.
        named_matches = r.version is not None and facts.fingerprints.get(r.version) == fp
        if r.version is not None and not named_matches and facts.by_fingerprint.get(fp):
            why, rows = _explain_mismatch(ids, facts, r.version, r.version)
            anomalies.append(
                Anomaly(
                    "read-version-mismatch",
                    "C12",
                    f"The engine said {when} was of version {r.version}, but the rows differ from that version: {why}.",
                    ops=[r.id],
                    versions=[r.version],
                    rows=rows,
                )
            )
            continue
        candidates = [r.version] if named_matches and r.version is not None else facts.by_fingerprint.get(fp, [])
        if not candidates:
            if r.version is not None:  # judged against the version the engine named
                why, rows = _explain_mismatch(ids, facts, r.version, r.version)
                named, versions = f" (the engine said version {r.version})", [r.version]
            else:
                (why, rows), named, versions = _explain_mismatch(ids, facts, lo, hi), "", [lo, hi]
            anomalies.append(
                Anomaly(
                    "state-never-existed",
                    "C12",
                    f"{when.capitalize()} returned a table state that no committed version ever had{named}; {why}.",
                    ops=[r.id],
                    versions=versions,
                    rows=rows,
                )
            )
            continue
        inside = [v for v in candidates if lo <= v <= hi]
        seen.append((r, min(inside or candidates)))
        matched.append((r, candidates, lo, hi, when))
    floors = _read_floors(seen)
    for r, candidates, lo, hi, when in matched:
        prev_v, prev = floors.get(r.id, (-1, None))
        floor = max(lo, prev_v)
        if any(floor <= v <= hi for v in candidates):
            continue
        if max(candidates) < floor and prev is not None and prev_v > lo:
            anomalies.append(
                Anomaly(
                    "stale-read",
                    "C12",
                    f"{when.capitalize()} returned the state of version(s) {fmt_ids(candidates)}, but read {prev.id} "
                    f"(process {prev.process}) had already returned version {prev_v} before {r.id} began: reads went "
                    "back in time.",
                    ops=[r.id, prev.id],
                    versions=[max(candidates), prev_v],
                )
            )
        elif max(candidates) < floor:
            anomalies.append(
                Anomaly(
                    "stale-read",
                    "C12",
                    f"{when.capitalize()} returned the state of version(s) {fmt_ids(candidates)}, but version {lo} had "
                    f"been committed and acknowledged before the read began.",
                    ops=[r.id],
                    versions=[max(candidates), lo],
                )
            )
        else:
            anomalies.append(
                Anomaly(
                    "future-read",
                    "C12",
                    f"{when.capitalize()} returned the state of version(s) {fmt_ids(candidates)}, whose writer had not "
                    f"even been invoked when the read ended (newest possible version: {hi}).",
                    ops=[r.id],
                    versions=[min(candidates), hi],
                )
            )
    stats = {"reads": len(rs), "final_reads": sum(1 for r in rs if isinstance(r.value, dict) and r.value.get("final"))}
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} of {len(rs)} read(s) did not return one committed version inside their real-time "
            f"window. Spec C12: a reader sees the table as of one committed version. First: "
            f"{anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the {len(rs)} read(s) returned exactly the rows of one committed version inside its real-time "
        "window.",
        [],
        stats,
    )
