"""Duplicates: no row appears twice in the table, and no op is applied twice
(e.g. a commit retried after its response was lost)."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import RowLife, expected_ids, fmt_ids, table_facts, writes
from harness.core.history import History
from harness.deltalog import TransactionLog

NAME = "duplicates"


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "duplicates")
    anomalies: list[Anomaly] = []
    by_id: dict[object, list[RowLife]] = defaultdict(list)
    for life in facts.lives:
        by_id[life.id].append(life)
    dup_rows = []
    for rid, lives in by_id.items():
        if len(lives) < 2:
            continue
        # Two copies alive at the same version: the table holds the row twice.
        lives.sort(key=lambda life: life.added)
        for a, b in pairwise(lives):
            if a.removed is None or a.removed > b.added:
                dup_rows.append((rid, a, b))
                break
    # An op whose full set of rows was committed at more than one version.
    reapplied: list[tuple[Any, set, list[int]]] = []
    for op in writes(history):
        want = set(expected_ids(op))
        full = sorted(v for v, ids in facts.writer_rows.get(op.id, {}).items() if want and set(ids) == want)
        if len(full) > 1:
            reapplied.append((op, want, full))
    # The rows such an op put in twice are its duplicate-application below,
    # not a duplicate-row each.
    reapplied_rows = {op.id: want for op, want, _ in reapplied}
    dup_rows = [
        (rid, a, b)
        for rid, a, b in dup_rows
        if not (a.writer == b.writer and rid in reapplied_rows.get(str(a.writer), ()))
    ]
    for rid, a, b in dup_rows[:1000]:
        anomalies.append(
            Anomaly(
                "duplicate-row",
                None,
                f"Row id {rid} is in the table twice from version {b.added} on: added at version {a.added} "
                f"(writer {a.writer}) and again at version {b.added} (writer {b.writer}).",
                ops=sorted({str(a.writer), str(b.writer)}),
                versions=[a.added, b.added],
                rows=[rid],
            )
        )
    applied_twice = [op.id for op, _, _ in reapplied]
    for op, want, full in reapplied:
        anomalies.append(
            Anomaly(
                "duplicate-application",
                None,
                f"Op {op.id} ({op.type}) was applied {len(full)} times: all its rows ({fmt_ids(sorted(want))}) were "
                f"committed at versions {', '.join(map(str, full))}.",
                ops=[op.id],
                versions=full,
                rows=sorted(want),
            )
        )
    seen: dict[str, int] = {}
    for v, op_id in sorted(facts.commit_ops.items()):
        if op_id in seen and op_id not in applied_twice and op_id != "setup":
            txn = _same_transaction(log, seen[op_id], v)
            anomalies.append(
                Anomaly(
                    "duplicate-commit",
                    None,
                    f"The log's commitInfo names op {op_id} at versions {seen[op_id]} and {v}: one op, two commits."
                    + (f" Both carry transaction id {txn}: the engine committed one transaction twice." if txn else ""),
                    ops=[op_id],
                    versions=[seen[op_id], v],
                    details={"same_transaction": txn} if txn else {},
                )
            )
        seen.setdefault(op_id, v)
    # A commit that adds a file already live: the same change committed
    # again. The table holds the file once, so no row is duplicated; where
    # commitInfo names the op twice, that is the report above.
    named = {a.ops[0] for a in anomalies if a.kind == "duplicate-commit"}
    for version, path, since, writers in facts.readds:
        ops = writers or [facts.commit_ops.get(version, "?")]
        if named & set(ops):
            continue
        anomalies.append(
            Anomaly(
                "duplicate-commit",
                None,
                f"Version {version} adds data file {path} again, live since version {since}"
                + (f" (rows of op {', '.join(ops)})" if writers else "")
                + ": one change, two commits. The table holds the file once (spec C4), so its rows are not doubled.",
                ops=ops,
                versions=[since, version],
            )
        )
    stats = {"rows_added": len(facts.lives), "distinct_rows": len(by_id)}
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            " and ".join(
                filter(
                    None,
                    [
                        f"{len(dup_rows)} row(s) are present more than once" if dup_rows else "",
                        f"{len(applied_twice)} op(s) were applied more than once" if applied_twice else "",
                        "the log names one op at two commits" if not dup_rows and not applied_twice else "",
                    ],
                )
            )
            + ". Each op writes rows with unique ids exactly once, so any copy means a commit was applied twice "
            f"(typically a retry after a lost response) or data was duplicated. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"All {len(facts.lives)} rows ever added are distinct and no op was applied more than once.",
        [],
        stats,
    )


def _same_transaction(log: TransactionLog, a: int, b: int) -> str | None:
    """The transaction id two commits share (commitInfo.txnId, which
    delta-spark writes), or None: the same transaction committed at two
    versions, not two transactions of one op."""
    ids = [str((log.commits[v].commit_info or {}).get("txnId") or "") for v in (a, b) if v in log.commits]
    return ids[0] if len(ids) == 2 and ids[0] and ids[0] == ids[1] else None
