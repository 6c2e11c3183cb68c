"""Identity columns (spec C19, T4): values are never given twice, the high
water mark keeps up with them, and transactions that generate values do
not commit concurrently.

The identity column is the field of the table's schema that carries
`delta.identity.start` (else the one the run declared). A row is told by
the harness's own `id`: a row first seen in a commit got its identity value
there (generated); a row a rewrite carries over (a DELETE's copy) keeps the
value it had. Then:
- a generated value that another row already holds or held is
  `duplicate-identity-value` (T4);
- a commit that generates values but leaves the column's
  `delta.identity.highWaterMark` short of the largest of them (positive
  step; the smallest for a negative one) is `identity-high-water-mark`
  (T4): the next writer would start inside the range just used;
- two commits that both generated values, where the later one's
  transaction read a version before the earlier one's commit (its
  commitInfo `readVersion`), ran concurrently and both committed:
  `concurrent-identity-commit` (C19). Transactions that generate no values
  (a DELETE) are not judged by it: the claim is about the high water mark
  that every generating commit moves. A commit whose engine records no
  read version is counted, not judged.
"""

from __future__ import annotations

import json
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id
from harness.core.history import FAIL, History
from harness.deltalog import TransactionLog, column_values

NAME = "identity"
_START = "delta.identity.start"
_STEP = "delta.identity.step"
_MARK = "delta.identity.highWaterMark"


def identity_field(metadata: dict[str, Any] | None, declared: str | None) -> tuple[str | None, dict[str, Any]]:
    """(column name, its identity metadata) from a metaData action; the
    declared column, with no metadata, where the schema marks none."""
    try:
        fields = json.loads((metadata or {}).get("schemaString") or "{}").get("fields") or []
    except (TypeError, ValueError, AttributeError):
        fields = []
    for f in fields:
        meta = f.get("metadata") if isinstance(f, dict) else None
        if isinstance(meta, dict) and _START in meta:
            return str(f.get("name")), meta
    return declared, {}


def _int(x: Any) -> int | None:
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def check(history: History, log: TransactionLog) -> CheckResult:
    if log.latest_version is None:
        return no_versions(NAME, "identity values")
    declared = history.table_declaration().table
    column, _ = identity_field(log.metadata_at(log.latest_version), declared.identity if declared else None)
    if column is None:
        return CheckResult(NAME, Verdict.UNKNOWN, "The table has no identity column to judge.", [], {})
    anomalies: list[Anomaly] = []
    holder: dict[int, tuple[Any, int]] = {}  # identity value -> (row id, version it was generated at)
    value_of: dict[Any, int] = {}  # row id -> its identity value
    generating: list[tuple[int, int | None]] = []  # (version, readVersion) of commits that generated values
    generated = unjudged = 0
    for version, commit, adds, _ in log.replay():
        new: list[int] = []
        for add in adds:
            rows = log.add_rows(add)
            values = column_values(rows, column)
            ids = column_values(rows, "id")
            if values is None or ids is None:
                continue
            for rid, val in zip(ids, values, strict=True):
                if rid in value_of:  # carried over by a rewrite
                    continue
                if val is None:
                    continue
                value_of[rid] = val
                new.append(val)
                seen = holder.get(val)
                if seen is not None and seen[0] != rid:
                    anomalies.append(
                        Anomaly(
                            "duplicate-identity-value",
                            "T4",
                            f"Identity value {val} of column {column} went to row {rid} at version {version}, "
                            f"but row {seen[0]} got it at version {seen[1]}.",
                            ops=[o for o in (commit_op_id(commit.commit_info),) if o],
                            versions=[seen[1], version],
                            rows=[seen[0], rid],
                        )
                    )
                else:
                    holder[val] = (rid, version)
        if not new:
            continue
        generated += len(new)
        generating.append((version, commit.read_version))
        _, meta = identity_field(commit.metadata, column)
        step = _int(meta.get(_STEP)) or 1
        mark = _int(meta.get(_MARK))
        top = max(new) if step > 0 else min(new)
        if mark is None or (mark < top if step > 0 else mark > top):
            anomalies.append(
                Anomaly(
                    "identity-high-water-mark",
                    "T4",
                    f"Version {version} gave identity value(s) up to {top} but "
                    + ("recorded no high water mark." if mark is None else f"recorded a high water mark of {mark}."),
                    ops=[o for o in (commit_op_id(commit.commit_info),) if o],
                    versions=[version],
                )
            )
    judged = 0
    versions = [v for v, _ in generating]
    for v, read in generating:
        if read is None:
            unjudged += 1
            continue
        judged += 1
        between = [w for w in versions if read < w < v]
        if between:
            info = log.commit(v).commit_info
            op = commit_op_id(info)
            anomalies.append(
                Anomaly(
                    "concurrent-identity-commit",
                    "C19",
                    f"Version {v}{f' (op {op})' if op else ''} generated identity values in a transaction "
                    f"that read version {read}, and committed although version {between[0]} had generated "
                    "values in between: two concurrent identity transactions both committed.",
                    ops=[o for o in (op, commit_op_id(log.commit(between[0]).commit_info)) if o],
                    versions=[read, between[0], v],
                )
            )
    failed = [o for o in history.client_ops() if o.f == "insert" and o.type == FAIL]
    classes: dict[str, int] = {}
    for o in failed:
        cls = o.error.cls.value if o.error is not None else "?"
        classes[cls] = classes.get(cls, 0) + 1
    stats = {
        "column": column,
        "generating_commits": len(generating),
        "values": generated,
        "judged_commits": judged,
        "unjudged_commits": unjudged,
        "failed_inserts": classes,
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} identity anomal{'y' if len(anomalies) == 1 else 'ies'}, e.g. {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if not generating:
        return CheckResult(NAME, Verdict.UNKNOWN, "No commit generated identity values.", [], stats)
    if not judged:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"{generated} identity value(s) from {len(generating)} commit(s), each new and within the high water "
            "mark, but no commit records the version its transaction read, so whether two ran concurrently "
            "(spec C19) cannot be judged.",
            [],
            stats,
        )
    conc = f"; none of the {judged} commit(s) whose read version the log records ran concurrently with another"
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"{generated} identity value(s) from {len(generating)} commit(s), each new and within the high water "
        f"mark{conc}."
        + (
            f" {len(failed)} insert(s) failed ({', '.join(f'{k}: {n}' for k, n in sorted(classes.items()))})."
            if failed
            else ""
        ),
        [],
        stats,
    )
