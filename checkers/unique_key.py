"""Unique row keys (spec M3, C14, C15): in a workload whose every write
reads its key first (MERGE ... ON t.k = s.k), no key may have two live rows.

Two concurrent MERGEs that both find key k absent and both insert it cannot
both commit: M3 says MERGE against MERGE can conflict at both isolation
levels, and in any serial order (C14, C15) the later one matches the earlier
one's row and updates it. Two live rows of one key are therefore a lost
update of "absent" that the engine's conflict check let through.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import RowLife, table_facts
from checkers.row_columns import row_columns
from checkers.serializability import default_isolation
from harness.core.history import History
from harness.core.isolation import LEVELS, WRITE_SERIALIZABLE
from harness.deltalog import TransactionLog

NAME = "unique-key"


def _first_overlap(lives: list[RowLife]) -> tuple[RowLife, RowLife] | None:
    active: list[RowLife] = []
    for life in sorted(lives, key=lambda life: life.added):
        active = [a for a in active if a.removed is None or a.removed > life.added]
        if active:
            return active[0], life
        active.append(life)
    return None


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "key uniqueness")
    key_col = history.table_declaration().row_key or "k"
    cols = row_columns(log, [key_col, "prev_writer"])
    f_of = {op.id: op.f for op in history.ops()}
    by_key: dict[Any, list[RowLife]] = defaultdict(list)
    for life in facts.lives:
        key = cols.get(life.id, (None, None))[0]
        if key is not None:
            by_key[key].append(life)
    stats: dict[str, Any] = {"key_column": key_col, "keys": len(by_key), "row_versions": len(facts.lives)}
    if facts.lives and not by_key:
        return CheckResult(NAME, Verdict.UNKNOWN, f"No row carries the declared key column {key_col!r}.", [], stats)
    default = default_isolation(history)
    anomalies: list[Anomaly] = []
    for key, lives in sorted(by_key.items(), key=lambda kv: repr(kv[0])):
        pair = _first_overlap(lives)
        if pair is None:
            continue
        a, b = pair
        end = min(x for x in (a.removed, b.removed, facts.latest + 1) if x is not None) - 1
        level = log.configuration_at(b.added - 1).get("delta.isolationLevel")
        level = level if level in LEVELS else default

        def how(life: RowLife) -> str:
            prev = cols[life.id][1]
            what = "inserted it as absent" if prev is None else f"replaced the version of op {prev}"
            f = f_of.get(str(life.writer), "unknown op")
            return f"op {life.writer} ({f}) {what}, committed at version {life.added}"

        anomalies.append(
            Anomaly(
                "duplicate-key",
                "C15" if level == WRITE_SERIALIZABLE else "C14",
                f"Key {key_col}={key!r} has two live rows at versions {b.added}..{end}: "
                f"row {a.id}, where {how(a)}, and row {b.id}, where {how(b)}. "
                "Every write of this workload reads its key (MERGE ON the key), so in any serial order the later "
                "one matches the earlier one's row; concurrent MERGEs must conflict at both "
                f"isolation levels (spec M3), and this commit at level {level} was let through.",
                ops=[str(a.writer), str(b.writer)],
                versions=[a.added, b.added],
                rows=[a.id, b.id],
                details={"key": key, "level": level},
            )
        )
    stats["duplicate_keys"] = len(anomalies)
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} key(s) have two live rows at once: concurrent writes of one key both committed "
            f"(spec M3, C14, C15). First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"At every version 0..{facts.latest}, each of the {len(by_key)} keys has at most one live row.",
        [],
        stats,
    )
