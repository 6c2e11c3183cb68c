"""Conflict classes (spec E1-E6 and the end of the E-list): a failure caused
by a conflict must be reported as one of the six classes, and as the one
that names what the concurrent commit did. A conflict with no class, or
with a class the log shows could not apply, is a conformance finding in its
own right. It is not a safety violation: by default the checker reports its
findings and stays valid; a run made with ``--strict-exceptions`` (recorded
in the create-table facts as ``strict_exceptions``) fails on them.

Only classes the log proves impossible are called wrong, so that a finding
is never a guess about which concurrent commit a conflict was with:

- E2 (a concurrent operation deleted a file the op read): no commit in the
  log ever removed a data file;
- E3 (a concurrent operation deleted a file the op also deletes): the op is
  a blind append, which deletes nothing (C9);
- E4 (a concurrent metadata change): no commit after the table's creation
  changed its metadata;
- E5 (two writers with one application transaction id): the op carries no
  application transaction id;
- E6 (a protocol change, or writers creating one table): no commit after
  the table's creation changed the protocol, and the op creates nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.facts import INSERT_ONLY
from harness.core.history import ErrorClass, History, Op
from harness.deltalog import TransactionLog

NAME = "exception-classes"
CREATES = frozenset({"create", "create-table"})


def _app_id(op: Op) -> Any:
    return op.invoke.value.get("app_id") if isinstance(op.invoke.value, dict) else None


def _log_facts(log: TransactionLog) -> dict[str, bool]:
    first = log.versions[0] if log.versions else 0
    removed = metadata = protocol = False
    for v in log.versions:
        c = log.commits.get(v)
        if c is None:
            continue
        removed = removed or any(r.get("dataChange", True) for r in c.removes)
        if v > first:
            metadata = metadata or c.metadata is not None
            protocol = protocol or c.protocol is not None
    for rel in (getattr(log, "related", None) or {}).values():
        # Tables the workload creates during the run (create-race's rounds):
        # each creation is a metadata and protocol action that ops racing it
        # may legitimately conflict with (E4, E6).
        if rel.versions:
            metadata = protocol = True
            removed = removed or _log_facts(rel)["removed"]
    return {"removed": removed, "metadata": metadata, "protocol": protocol}


def _impossible(op: Op, cls: ErrorClass, facts: dict[str, bool]) -> str | None:
    """Why the log shows `cls` cannot be this op's conflict, or None."""
    if cls is ErrorClass.CONCURRENT_DELETE_READ and not facts["removed"]:
        return "E2 needs a concurrent commit that removed a file the op read, and no commit removed any file"
    if cls is ErrorClass.CONCURRENT_DELETE_DELETE and (op.f in INSERT_ONLY or _app_id(op) is not None):
        return "E3 needs the op to delete files, and a blind append deletes none (C9)"
    if cls is ErrorClass.METADATA_CHANGED and not facts["metadata"]:
        return "E4 needs a concurrent metadata change, and no commit after the table's creation changed it"
    if cls is ErrorClass.CONCURRENT_TRANSACTION and _app_id(op) is None:
        return "E5 needs two writers with one application transaction id, and the op carries none"
    if cls is ErrorClass.PROTOCOL_CHANGED and not facts["protocol"] and op.f not in CREATES:
        return (
            "E6 needs a protocol change or writers creating one table, and no commit after the table's "
            "creation changed the protocol, and the op creates nothing"
        )
    return None


def _conflicts(history: History) -> list[Op]:
    return [op for op in history.client_ops() if op.error is not None and op.error.cls.is_conflict]


def judged_ops(history: History) -> list[Op]:
    """The ops the verdict rests on: the conflicts, and only under
    --strict-exceptions (without it the verdict is valid whatever their
    classes, and the findings are reported beside it)."""
    return _conflicts(history) if history.table_declaration().strict_exceptions else []


def check(history: History, log: TransactionLog) -> CheckResult:
    strict = history.table_declaration().strict_exceptions
    facts = _log_facts(log)
    conflicts = [(op, op.error) for op in _conflicts(history) if op.error is not None]
    anomalies: list[Anomaly] = []
    for op, error in conflicts:
        cls = error.cls
        if cls is ErrorClass.UNCLASSIFIED_CONFLICT:
            anomalies.append(
                Anomaly(
                    "conflict-unclassified",
                    "E1-E6",
                    f"Op {op.id} ({op.f}, process {op.process}) failed because of a concurrent commit, but the engine "
                    f"reported none of the six conflict classes: {error.raw[:300]}",
                    ops=[op.id],
                )
            )
            continue
        why = _impossible(op, cls, facts)
        if why is not None:
            anomalies.append(
                Anomaly(
                    "wrong-conflict-class",
                    cls.claim,
                    f"Op {op.id} ({op.f}, process {op.process}) failed with {cls.value} ({cls.claim}), but {why}: "
                    f"{error.raw[:300]}",
                    ops=[op.id],
                )
            )
    kinds = Counter(a.kind for a in anomalies)
    stats = {
        "conflicts": len(conflicts),
        "findings": dict(kinds),
        "strict": strict,
        "by_class": dict(Counter(error.cls.value for _, error in conflicts)),
    }
    if not conflicts:
        return CheckResult(NAME, Verdict.VALID, "No op failed with a conflict.", [], stats)
    if not anomalies:
        return CheckResult(
            NAME,
            Verdict.VALID,
            f"Each of the {len(conflicts)} conflict(s) carries one of the six classes, and none a "
            "class the log shows could not apply.",
            [],
            stats,
        )
    summary = ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
    if strict:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} of {len(conflicts)} conflict(s) carry no class or a class the log rules out "
            f"({summary}); --strict-exceptions makes these fail the run. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    # Findings, not safety: reported, listed, and the run stays as the other
    # checkers make it (results.json and the summary carry them).
    stats["deviations"] = [
        {"op": a.ops[0], "kind": a.kind, "claim": a.claim, "explanation": a.explanation} for a in anomalies
    ]
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"No safety issue, but {len(anomalies)} of {len(conflicts)} conflict(s) are exception-class findings "
        f"({summary}; spec E-list): {anomalies[0].explanation} (run with --strict-exceptions to fail on them)",
        [],
        stats,
    )
