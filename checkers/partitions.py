"""Partition conflicts (spec P1, P2): on a partitioned table, writes to
disjoint partitions whose conditions carry literal partition predicates must
not conflict.

Ops name their partition in the invocation (``"partition": [<value per
partition column>]``) and, for UPDATE/DELETE/MERGE, how the condition names
it (``"variant": "literal"`` or ``"no-literal"``). Three things are checked:

1. P1 deviations: an op that failed with a conflict (E1-E6 or unclassified),
   had literal partition predicates (or was a blind append, which reads
   nothing), and every write that could have been its winner touched only
   other partitions and was itself literal or a blind append. Possible
   winners are the ok/info writes concurrent in real time (invoked before
   the loser completed, not completed before it was invoked); a failed op
   records no read version, so real time is the window. Where the log
   attributes a winner's commit, its files (adds/removes partitionValues)
   must confirm it stayed out of the loser's partition.
2. Every commit attributed to an op touched only the partition it named
   (``foreign-partition-rewrite`` otherwise).
3. The conflict rate per op kind and variant, in the stats: the measured
   price of leaving the partition predicates out (spec P2).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.facts import table_facts
from harness.core.history import FAIL, INFO, OK, History, Op
from harness.deltalog import TransactionLog

NAME = "partition-conflicts"
LITERAL = "literal"
NO_LITERAL = "no-literal"
BLIND = "blind-append"

Partition = tuple[tuple[str, Any], ...]


def _declared(op: Op, columns: list[str]) -> Partition | None:
    v = op.invoke.value
    p = v.get("partition") if isinstance(v, dict) else None
    if isinstance(p, (list, tuple)) and len(p) == len(columns):
        return tuple(zip(columns, (None if x is None else str(x) for x in p), strict=True))
    return None


def _variant(op: Op) -> str:
    v = op.invoke.value
    variant = v.get("variant") if isinstance(v, dict) else None
    return variant if variant in (LITERAL, NO_LITERAL) else BLIND


def _fmt(p: Partition | None) -> str:
    return "?" if p is None else "/".join(f"{k}={v}" for k, v in p)


def _is_conflict(op: Op) -> bool:
    return op.type == FAIL and op.error is not None and op.error.cls.is_conflict


def _commit_partitions(adds: list[dict], removes: list[dict], columns: list[str]) -> set[Partition]:
    out = set()
    for a in (*adds, *removes):
        pv = a.get("partitionValues") or {}
        out.add(tuple((c, pv.get(c)) for c in columns))
    return out


def check(history: History, log: TransactionLog) -> CheckResult:
    latest = log.latest_version
    meta = log.metadata_at(latest) if latest is not None else None
    columns = list((meta or {}).get("partitionColumns") or [])
    if not columns:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            "The table has no partition columns in its log, so partition conflicts cannot be judged.",
        )
    facts = table_facts(log)
    ops = history.client_ops()
    scoped = {op.id: (op, p) for op in ops if (p := _declared(op, columns)) is not None}

    # The log's view of each scoped op's commit: which partitions its files were in.
    touched: dict[str, tuple[int, set[Partition]]] = {}
    anomalies: list[Anomaly] = []
    for version, _commit, adds, removes in log.replay():
        mine = [scoped[w] for w in sorted(facts.writers_at(version)) if w in scoped]
        if len(mine) != 1:
            continue  # unattributed (e.g. a Sail DELETE) or ambiguous: nothing to compare
        op, p = mine[0]
        parts = _commit_partitions(adds, removes, columns)
        touched[op.id] = (version, parts)
        foreign = sorted(parts - {p})
        if foreign:
            paths = [
                a["path"]
                for a in (*adds, *removes)
                if tuple(((a.get("partitionValues") or {}).get(c)) for c in columns) != tuple(x for _, x in p)
            ]
            anomalies.append(
                Anomaly(
                    "foreign-partition-rewrite",
                    "P1",
                    f"Op {op.id} ({op.f}, {_variant(op)}) named partition {_fmt(p)}, but its commit {version} added or "
                    f"removed files of {', '.join(_fmt(x) for x in foreign)} ({', '.join(paths[:3])}). An op on one "
                    f"partition must touch only that partition's files (spec P1).",
                    ops=[op.id],
                    versions=[version],
                    details={"paths": paths[:50]},
                )
            )

    # Conflict rate per op kind and variant.
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(
        lambda: defaultdict(lambda: {"attempts": 0, "conflicts": 0})
    )
    for op, _p in scoped.values():
        if op.error is not None and op.error.cls.value == "unsupported":
            continue
        c = counts[op.f][_variant(op)]
        c["attempts"] += 1
        c["conflicts"] += int(_is_conflict(op))
    rates: dict[str, Any] = {}
    per_variant: dict[str, dict[str, int]] = defaultdict(lambda: {"attempts": 0, "conflicts": 0})
    for f, by_v in sorted(counts.items()):
        rates[f] = {}
        for variant, c in sorted(by_v.items()):
            rates[f][variant] = {**c, "rate": round(c["conflicts"] / c["attempts"], 3) if c["attempts"] else None}
            if variant != BLIND:
                per_variant[variant]["attempts"] += c["attempts"]
                per_variant[variant]["conflicts"] += c["conflicts"]
    totals = {
        v: {**c, "rate": round(c["conflicts"] / c["attempts"], 3) if c["attempts"] else None}
        for v, c in sorted(per_variant.items())
    }

    # P1: conflicts no concurrent write in the same partition explains.
    writes = [op for op in ops if op.f != "read" and op.type in (OK, INFO)]
    deviations = 0
    for loser in ops:
        if not _is_conflict(loser) or loser.id not in scoped:
            continue
        lp = scoped[loser.id][1]
        if _variant(loser) == NO_LITERAL:
            continue  # may scan every partition: allowed to conflict (spec P2)
        end = loser.end if loser.end is not None else float("inf")
        winners = [w for w in writes if w.id != loser.id and w.start < end and (w.end is None or w.end > loser.start)]
        if not winners:
            continue
        judged = []
        for w in winners:
            if w.id not in scoped or _variant(w) == NO_LITERAL or scoped[w.id][1] == lp:
                break
            logged = touched.get(w.id)
            if logged is not None and lp in logged[1]:
                break
            judged.append((w, scoped[w.id][1], logged[0] if logged else None))
        else:
            deviations += 1
            who = "; ".join(
                f"{w.id} ({w.f}, {_variant(w)}, {_fmt(p)}"
                f"{f', committed version {v}' if v is not None else ''}, {w.type})"
                for w, p, v in judged
            )
            anomalies.append(
                Anomaly(
                    "partition-conflict",
                    "P1",
                    f"Op {loser.id} ({loser.f}, {_variant(loser)}, partition {_fmt(lp)}) failed with "
                    f"{loser.error.cls.value if loser.error else 'a conflict'}, but every write concurrent with it "
                    f"touched only other partitions with literal partition predicates or blind appends: {who}. "
                    "Spec P1/P2: operations on disjoint partitions whose conditions name their partitions do not "
                    "conflict (an availability deviation: the op was refused, no data is wrong).",
                    ops=[loser.id, *(w.id for w, _, _ in judged)],
                    versions=sorted(v for _, _, v in judged if v is not None),
                    details={"loser_partition": _fmt(lp), "error": loser.error.raw[:500] if loser.error else None},
                )
            )

    stats = {
        "partition_columns": columns,
        "conflict_rate": rates,
        "conflict_rate_by_variant": totals,
        "p1_deviations": deviations,
        "commits_checked": len(touched),
    }
    rate_txt = ", ".join(f"{v}: {c['conflicts']}/{c['attempts']}" for v, c in totals.items()) or "no DML ops"
    if anomalies:
        kinds = sorted({a.kind for a in anomalies})
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} partition anomal{'y' if len(anomalies) == 1 else 'ies'} ({', '.join(kinds)}); "
            f"conflicts per variant {rate_txt}. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"No conflict between ops on disjoint partitions with literal partition predicates, and each of the "
        f"{len(touched)} attributed commits touched only its op's partition; conflicts per variant {rate_txt}.",
        [],
        stats,
    )
