"""Atomicity (spec C4-C6): an op's rows become visible at exactly one version,
all together; a failed op's rows never become visible; an indeterminate
(info) op is all or nothing.

Indeterminate ops are resolved from the log where it can tell: an info op
whose rows (or, for engines that write the op id into commitInfo, whose
commit) are in the log committed; one that names its rows and has none in
the final log did not. The rest (no rows to look for, no op id in any
commit) may have committed, and are counted as such. An op that failed with
an error, yet whose rows or commit are in the log, is `failed-but-committed`:
the engine told its client a definite failure for a change that is there."""

from __future__ import annotations

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import expected_ids, fmt_ids, table_facts, writes
from harness.core.history import FAIL, INFO, History, Op
from harness.deltalog import TransactionLog

NAME = "atomicity"


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        # No log (say, a killed harness whose store was in memory): an info op
        # cannot be called "not committed", nor any op "absent".
        return no_versions(NAME, "atomicity")
    ops = writes(history)
    known = {op.id for op in history.ops()}
    anomalies: list[Anomaly] = []
    committed_info = 0
    # version(s) whose commitInfo names each op (delta-rs: dj.op)
    committed_as: dict[str, list[int]] = {}
    for v, op_id in sorted(facts.commit_ops.items()):
        committed_as.setdefault(op_id, []).append(v)
    row_ops = {op.id for op in ops}
    for op in history.client_ops():
        # Row-less writes (DELETE, ...) that failed, found through commitInfo.
        if op.type == FAIL and op.id not in row_ops and op.id in committed_as:
            anomalies.append(_failed_but_committed(op, committed_as[op.id], []))
    resolution = {"committed": 0, "not_committed": 0, "may_have_committed": 0}
    for op in ops:
        per_version = facts.writer_rows.get(op.id)
        if op.type == INFO:
            if per_version or op.id in committed_as:
                resolution["committed"] += 1
            elif expected_ids(op):
                resolution["not_committed"] += 1
            else:
                resolution["may_have_committed"] += 1
        if not per_version:
            if op.type == FAIL and op.id in committed_as:
                anomalies.append(_failed_but_committed(op, committed_as[op.id], []))
            continue
        want = set(expected_ids(op))
        first = min(per_version)
        got = set(per_version[first])
        if op.type == FAIL:
            anomalies.append(_failed_but_committed(op, sorted(per_version), sorted(got)))
        elif op.type == INFO:
            committed_info += 1
        later = sorted(v for v in per_version if v != first)
        # The same full set again is a duplicate application (duplicates
        # checker); a different subset at a later version splits the op.
        split = [v for v in later if set(per_version[v]) != want]
        # An op whose missing rows arrive in later commits is one split op,
        # not also a partial one.
        arrived_later = split and got < want and set().union(*(per_version[v] for v in per_version)) == want
        if got != want and not arrived_later:
            missing, extra = sorted(want - got), sorted(got - want)
            detail = []
            if missing:
                detail.append(f"{len(missing)} of its {len(want)} row(s) missing ({fmt_ids(missing)})")
            if extra:
                detail.append(f"{len(extra)} row(s) it never wrote ({fmt_ids(extra)})")
            anomalies.append(
                Anomaly(
                    "partial-op",
                    "C6",
                    f"Op {op.id} ({op.type}) became visible at version {first} with {'; '.join(detail)}: a reader of "
                    f"version {first} saw part of a transaction.",
                    ops=[op.id],
                    versions=[first],
                    rows=missing + extra,
                )
            )
        if split:
            anomalies.append(
                Anomaly(
                    "split-op",
                    "C4",
                    f"Op {op.id}'s rows became visible at {len(split) + 1} different versions "
                    f"({', '.join(str(v) for v in [first, *split])}), not all at one commit.",
                    ops=[op.id],
                    versions=[first, *split],
                )
            )
    if not history.truncated and not history.problems:
        orphans: dict[str, list[int]] = {}
        for w, per_version in facts.writer_rows.items():
            if w not in known and w != "setup":
                orphans[w] = sorted(per_version)
        for w, vs in orphans.items():
            anomalies.append(
                Anomaly(
                    "orphan-rows",
                    "C5",
                    f"Rows written by op {w!r} appear at version(s) {', '.join(map(str, vs))}, but no such op was ever "
                    "invoked: data from no known transaction became visible.",
                    ops=[w],
                    versions=vs,
                )
            )
    # Info ops that write no rows (e.g. a DELETE) and that no commit names.
    resolution["may_have_committed"] += sum(
        1
        for op in history.client_ops()
        if op.type == INFO and op.id not in row_ops and op.f != "read" and op.id not in committed_as
    )
    resolution["committed"] += sum(
        1 for op in history.client_ops() if op.type == INFO and op.id not in row_ops and op.id in committed_as
    )
    stats = {"write_ops": len(ops), "info_ops_committed": committed_info, "info_resolution": resolution}
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} atomicity violation(s). Spec C6: every transaction completes fully or fails fully, and "
            f"no reader sees part of one. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the {len(ops)} write ops is either absent from the log or present whole at exactly one version; "
        f"no failed op's rows are visible; indeterminate ops: {resolution['committed']} committed (whole), "
        f"{resolution['not_committed']} not committed, {resolution['may_have_committed']} unresolved "
        "(may have committed).",
        [],
        stats,
    )


def _failed_but_committed(op: Op, versions: list[int], rows: list[object]) -> Anomaly:
    err = f"{op.error.cls.value}: {op.error.raw[:300]}" if op.error else "no error recorded"
    what = (
        f"{len(rows)} of its row(s) ({fmt_ids(rows)}) became visible at version {versions[0]}"
        if rows
        else f"the log's commitInfo at version(s) {', '.join(map(str, versions))} names it"
    )
    return Anomaly(
        "failed-but-committed",
        "C6",
        f"Op {op.id} ({op.f}, process {op.process}) failed with an error ({err}), which the client must take as "
        f"'did not apply', yet {what}: its effects are in the log.",
        ops=[op.id],
        versions=versions,
        rows=rows,
        details={"error": op.error.to_json() if op.error else None},
    )
