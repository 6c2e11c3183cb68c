"""Two tables (spec C1, C2): a transaction writes one table, and a query
over both sees each at one version of its own.

The run's table is `a`, the workload's other table `b` (its log comes in
``log.related``). Every op names the rows it meant for each table.
- C1: a row meant for one table found in the other's log is
  `cross-table-commit`: a commit carried another table's write. An op that
  writes both tables is two transactions, so one that failed after its
  first statement committed leaves that commit in place: counted as the
  documented behaviour (no multi-table transactions), never an anomaly.
- C2: each table's rows in a query over both must be exactly the rows of
  one version of that table inside the query's real-time window (as
  read-validity judges one table), and the version the engine says it read
  where it says one; anything else is `multi-table-read-mismatch`. The two
  versions need not have been the latest at one same moment (no snapshot
  across tables): such skew, judged by the commits' timestamps, is counted
  and reported as documented behaviour.
"""

from __future__ import annotations

from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import Fingerprint, TableFacts, fmt_ids, table_facts
from checkers.read_validity import ReadWindows
from harness.core.history import OK, History, Op
from harness.deltalog import TransactionLog

NAME = "multi-table"
OTHER = "b"
# The op value keys that name rows, and the table each names rows of.
_ROW_KEYS = (("ids", "a"), ("ids_a", "a"), ("ids_b", "b"))


def _meant(history: History) -> dict[Any, tuple[str, str]]:
    """row id -> (the table its op meant it for, the op)."""
    out: dict[Any, tuple[str, str]] = {}
    for op in history.client_ops():
        v = op.invoke.value
        if not isinstance(v, dict) or op.f.startswith("read"):
            continue
        for key, table in _ROW_KEYS:
            for rid in v.get(key) or []:
                out[rid] = (table, op.id)
    return out


def _live_spans(log: TransactionLog) -> dict[int, tuple[int, float]]:
    """version -> [its commit's timestamp, the next commit's): when it was the latest."""
    stamps = [(v, log.commit(v).timestamp) for v in log.versions]
    out: dict[int, tuple[int, float]] = {}
    for (v, t), nxt in zip(stamps, [*stamps[1:], (None, None)], strict=True):
        if t is not None:
            out[v] = (t, nxt[1] if nxt[1] is not None else float("inf"))
    return out


def _judge_read(
    op: Op, name: str, facts: TableFacts, windows: ReadWindows, said: int | None
) -> tuple[list[int], Anomaly | None]:
    ids = list((op.value or {}).get(name) or [])
    matching = facts.by_fingerprint.get(Fingerprint.of(ids), [])
    lo, hi = windows.window(op)
    inside = [v for v in matching if lo <= v <= hi]
    if said is not None and said in matching:
        inside = [said] if lo <= said <= hi else []
    if inside:
        return inside, None
    if not matching:
        why = f"rows no version of table {name} had ({len(ids)} rows: {fmt_ids(ids)})"
    elif said is not None and said not in matching:
        why = f"rows of version(s) {fmt_ids(matching)} of table {name}, not of version {said} the engine said it read"
    else:
        why = f"rows of version(s) {fmt_ids(matching)} of table {name}, outside its window [{lo}, {hi}]"
    return [], Anomaly(
        "multi-table-read-mismatch",
        "C2",
        f"Query {op.id} over both tables returned {why}.",
        ops=[op.id],
        versions=matching[:10],
    )


def check(history: History, log: TransactionLog) -> CheckResult:
    if log.latest_version is None:
        return no_versions(NAME, "the two tables")
    other = log.related.get(OTHER)
    if other is None or other.latest_version is None:
        return CheckResult(NAME, Verdict.UNKNOWN, f"Table {OTHER} has no readable log: nothing to judge.", [], {})
    facts = {"a": table_facts(log), OTHER: table_facts(other)}
    anomalies: list[Anomaly] = []
    meant = _meant(history)
    for name, f in facts.items():
        for life in f.lives:
            want = meant.get(life.id)
            if want is not None and want[0] != name:
                anomalies.append(
                    Anomaly(
                        "cross-table-commit",
                        "C1",
                        f"Row {life.id}, which op {want[1]} wrote to table {want[0]}, is in table {name}'s log "
                        f"(version {life.added}): a commit carried another table's write.",
                        ops=[want[1]],
                        versions=[life.added],
                        rows=[life.id],
                    )
                )
    both = [op for op in history.client_ops() if op.f == "append-both"]
    partial = [
        op.id
        for op in both
        if op.type != OK and facts["a"].commit_version(op.id) is not None and facts[OTHER].commit_version(op.id) is None
    ]
    windows = {name: ReadWindows(history, f) for name, f in facts.items()}
    spans = {"a": _live_spans(log), OTHER: _live_spans(other)}
    reads = [op for op in history.client_ops() if op.f == "read-both" and op.type == OK]
    judged = skewed = 0
    for op in reads:
        said = (op.value or {}).get("versions") or [None, None]
        found: dict[str, list[int]] = {}
        for i, name in enumerate(("a", OTHER)):
            versions, anomaly = _judge_read(op, name, facts[name], windows[name], said[i])
            if anomaly is not None:
                anomalies.append(anomaly)
            found[name] = versions
        if not (found["a"] and found[OTHER]):
            continue
        judged += 1
        overlaps = any(
            max(spans["a"][va][0], spans[OTHER][vb][0]) < min(spans["a"][va][1], spans[OTHER][vb][1])
            for va in found["a"]
            for vb in found[OTHER]
            if va in spans["a"] and vb in spans[OTHER]
        )
        if not overlaps:
            skewed += 1
    stats = {
        "both_table_writes": len(both),
        "partial_both_table_writes": len(partial),
        "partial_examples": partial[:10],
        "queries_over_both": len(reads),
        "judged_queries": judged,
        "skewed_queries": skewed,
    }
    documented = (
        f" Documented behaviour seen: {len(partial)} of {len(both)} two-table write(s) failed after table a's "
        f"commit (C1: a transaction covers one table), and {skewed} of {judged} query(ies) over both read "
        "versions that were never the latest at one same moment (C2: no snapshot across tables)."
    )
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} anomal{'y' if len(anomalies) == 1 else 'ies'} across the two tables, e.g. "
            f"{anomalies[0].explanation}" + documented,
            anomalies[:1000],
            stats,
        )
    if judged == 0:
        return CheckResult(
            NAME, Verdict.UNKNOWN, "No query over both tables completed: C2 cannot be judged." + documented, [], stats
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Every row is in the table its op wrote, and each of the {judged} query(ies) over both tables saw each "
        "table at one version inside its window." + documented,
        [],
        stats,
    )
