"""Durability (spec C7): every acknowledged write is in the log, at the
version the client was told where it was told one; the rows of acknowledged
inserts are present in the final state of the table."""

from __future__ import annotations

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import INSERT_ONLY, expected_ids, fmt_ids, table_facts, writes
from harness.core.history import OK, History
from harness.deltalog import TransactionLog

NAME = "durability"
# commitInfo.operation of commits that remove rows on purpose.
_DELETING_OPERATIONS = frozenset({"DELETE", "UPDATE", "MERGE"})


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "durability")
    final = facts.state(facts.latest)
    acked = [op for op in writes(history) if op.type == OK]
    f_of = {op.id: op.f for op in history.ops()}

    def deliberately_removed(row_id: object) -> bool:
        """Removed by a commit of an op that overwrites or deletes rows."""
        life = facts.life_of(row_id)
        if life is None or life.removed is None:
            return False
        writers = facts.writers_at(life.removed)
        if not writers:
            # A commit that names no op and writes no rows (a Sail SQL DELETE):
            # its own commitInfo says whether it was a deleting operation.
            return (log.commit(life.removed).operation or "").upper() in _DELETING_OPERATIONS
        return any(f_of.get(w) not in (None, *INSERT_ONLY) for w in writers)

    anomalies: list[Anomaly] = []
    for op in acked:
        want = expected_ids(op)
        version = facts.version_of(op.id)
        if version is None:
            anomalies.append(
                Anomaly(
                    "lost-write",
                    "C7",
                    f"Op {op.id} (process {op.process}) was acknowledged ok, but no commit in the log "
                    f"(versions 0..{facts.latest}) contains any of its {len(want)} row(s) ({fmt_ids(want)})."
                    + _overwritten(op.version, op.id, facts),
                    ops=[op.id],
                    rows=want,
                    versions=[op.version] if op.version is not None else [],
                )
            )
            continue
        # An overwrite's version may be replaced later; whether that was
        # legitimate is the serializability checker's question (lost update).
        missing = [i for i in want if i not in final and not deliberately_removed(i)] if op.f in INSERT_ONLY else []
        if missing:
            anomalies.append(
                Anomaly(
                    "lost-rows",
                    "C7",
                    f"Op {op.id} was acknowledged ok and committed at version {version}, but {len(missing)} of its "
                    f"row(s) ({fmt_ids(missing)}) are not in the final state at version {facts.latest}.",
                    ops=[op.id],
                    versions=[version, facts.latest],
                    rows=missing,
                )
            )
        if op.version is not None and op.version != version:
            anomalies.append(
                Anomaly(
                    "wrong-commit-version",
                    "C7",
                    f"Op {op.id} was told it committed version {op.version}, but its rows appear at version {version}.",
                    ops=[op.id],
                    versions=[op.version, version],
                )
            )
        told = op.version
        logged = facts.commit_ops.get(told) if told is not None else None
        if told is not None and logged is not None and logged != op.id:
            anomalies.append(
                Anomaly(
                    "wrong-commit-version",
                    "C7",
                    f"Op {op.id} was told it committed version {op.version}, but the log's commitInfo at that "
                    f"version names op {logged}.",
                    ops=[op.id, logged],
                    versions=[told],
                )
            )
    stats = {"acknowledged_writes": len(acked), "final_version": facts.latest, "final_rows": len(final)}
    if anomalies:
        lost = sum(1 for a in anomalies if a.kind in ("lost-write", "lost-rows"))
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{lost} of {len(acked)} acknowledged write(s) lost some or all of their rows, and "
            f"{len(anomalies) - lost} report a commit version the log contradicts. Spec C7: a committed change is "
            f"permanent, so every row of an acknowledged append must be in the table's final state (version "
            f"{facts.latest}). First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"All {len(acked)} acknowledged writes are in the log, and the rows of every acknowledged insert are in "
        f"the final state (version {facts.latest}, {len(final)} rows).",
        [],
        stats,
    )


def _overwritten(version: int | None, op_id: str, facts: object) -> str:
    """Where the engine told the op its commit version, whose commit the log
    holds there instead: the sign of a commit overwritten (no put-if-absent,
    or on a local directory no rename that refuses an existing file)."""
    if version is None or version not in getattr(facts, "fingerprints", {}):
        return ""
    others = sorted(w for w in facts.writers_at(version) if w != op_id)  # type: ignore[attr-defined]
    if not others:
        return f" The engine told it version {version}, which the log holds as a commit of no known op."
    return (
        f" The engine told it version {version}, and the log's version {version} is op {', '.join(others)}'s "
        "commit: its commit file was most likely replaced by another writer's (nothing refused a second commit of "
        "that version), "
        "unless the engine reported a version it never wrote."
    )
