"""Atomicity (spec C4-C6): an op's rows become visible at exactly one version,
all together; a failed op's rows never become visible; an indeterminate
(info) op is all or nothing."""

from __future__ import annotations

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.model import expected_ids, fmt_ids, table_facts, writes
from harness.deltalog import TransactionLog
from harness.history import FAIL, INFO, History

NAME = "atomicity"


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    ops = writes(history)
    known = {op.id for op in history.ops()}
    anomalies: list[Anomaly] = []
    committed_info = 0
    for op in ops:
        per_version = facts.writer_rows.get(op.id)
        if not per_version:
            continue
        want = set(expected_ids(op))
        first = min(per_version)
        got = set(per_version[first])
        if op.type == FAIL:
            anomalies.append(Anomaly(
                "failed-op-committed", "C6",
                f"Op {op.id} failed ({op.error.cls.value if op.error else 'no error recorded'}), which means it "
                f"definitely did not apply, yet {len(got)} of its row(s) ({fmt_ids(sorted(got))}) became visible at "
                f"version {first}.",
                ops=[op.id], versions=sorted(per_version), rows=sorted(got)))
        elif op.type == INFO:
            committed_info += 1
        if got != want:
            missing, extra = sorted(want - got), sorted(got - want)
            detail = []
            if missing:
                detail.append(f"{len(missing)} of its {len(want)} row(s) missing ({fmt_ids(missing)})")
            if extra:
                detail.append(f"{len(extra)} row(s) it never wrote ({fmt_ids(extra)})")
            anomalies.append(Anomaly(
                "partial-op", "C6",
                f"Op {op.id} ({op.type}) became visible at version {first} with {'; '.join(detail)}: a reader of "
                f"version {first} saw part of a transaction.",
                ops=[op.id], versions=[first], rows=missing + extra))
        later = sorted(v for v in per_version if v != first)
        # The same full set again is a duplicate application (duplicates
        # checker); a different subset at a later version splits the op.
        split = [v for v in later if set(per_version[v]) != want]
        if split:
            anomalies.append(Anomaly(
                "split-op", "C4",
                f"Op {op.id}'s rows became visible at {len(split) + 1} different versions "
                f"({', '.join(str(v) for v in [first, *split])}), not all at one commit.",
                ops=[op.id], versions=[first, *split]))
    if not history.truncated and not history.problems:
        orphans: dict[str, list[int]] = {}
        for w, per_version in facts.writer_rows.items():
            if w not in known and w != "setup":
                orphans[w] = sorted(per_version)
        for w, vs in orphans.items():
            anomalies.append(Anomaly(
                "orphan-rows", "C5",
                f"Rows written by op {w!r} appear at version(s) {', '.join(map(str, vs))}, but no such op was ever "
                "invoked: data from no known transaction became visible.",
                ops=[w], versions=vs))
    stats = {"write_ops": len(ops), "info_ops_committed": committed_info}
    if anomalies:
        return CheckResult(
            NAME, Verdict.INVALID,
            f"{len(anomalies)} atomicity violation(s). Spec C6: every transaction completes fully or fails fully, and "
            f"no reader sees part of one. First: {anomalies[0].explanation}",
            anomalies, stats)
    return CheckResult(
        NAME, Verdict.VALID,
        f"Each of the {len(ops)} write ops is either absent from the log or present whole at exactly one version; "
        f"no failed op's rows are visible; {committed_info} indeterminate op(s) turned out committed, whole.",
        [], stats)
