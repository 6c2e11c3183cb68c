"""Metadata conflicts (spec C17, E4): a metadata change makes every
concurrent write fail, and no acknowledged metadata change is lost.

From the log: every commit at version m > the table's first that carries a
``metaData`` action is a metadata change. Any other commit c > m whose read
version r is < m did not see that change, yet committed: a C17 violation.
The read version comes from ``commitInfo.readVersion``, else from what the
committing op recorded (``read_version``, where the engine tells, e.g. the
delta-rs client's snapshot). A commit whose read version is unknown (Sail)
and that may have overlapped the metadata change in real time (its op began
before the change's op ended) is judged unknown, never passed.

From the history and the final metadata: every acknowledged property set
(``properties``) and column add (``columns``) is in the metadata of the
final version (else lost, spec C7/C17); a definitely failed one is in no
version (spec C6).

Exception classes (spec E4): a write that failed with a conflict while the
only commits in its real-time window were metadata changes failed because of
them and should say MetadataChangedException. Classes are counted; a wrong
or missing class is a conformance finding recorded in the stats, not a
safety violation.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id, table_facts
from harness.core.history import FAIL, OK, ErrorClass, History, Op
from harness.deltalog import TransactionLog

NAME = "metadata-conflicts"


@dataclass
class _Commit:
    version: int
    op: Op | None  # the op that committed it, where the log or data says
    read_version: int | None
    is_metadata: bool


def schema_columns(meta: dict | None) -> list[str]:
    """Column names of a metaData action's schemaString ([] if unreadable)."""
    try:
        return [f["name"] for f in json.loads((meta or {}).get("schemaString") or "{}").get("fields", [])]
    except (ValueError, TypeError, AttributeError, KeyError):
        return []


def configuration(meta: dict | None) -> dict[str, str]:
    conf = (meta or {}).get("configuration")
    return dict(conf) if isinstance(conf, dict) else {}


def _props(op: Op) -> dict[str, str]:
    v = op.invoke.value
    p = v.get("properties") if isinstance(v, dict) else None
    return {str(k): str(x) for k, x in p.items()} if isinstance(p, dict) else {}


def _columns(op: Op) -> list[str]:
    v = op.invoke.value
    cols = v.get("columns") if isinstance(v, dict) else None
    return [str(c[0]) for c in cols] if isinstance(cols, list) else []


def _recorded_read_version(op: Op | None) -> int | None:
    if op is None or op.type != OK or not isinstance(op.value, dict):
        return None
    rv = op.value.get("read_version")
    return rv if isinstance(rv, int) and not isinstance(rv, bool) else None


def _commits(history: History, log: TransactionLog) -> list[_Commit]:
    facts = table_facts(log)
    by_id = {op.id: op for op in history.ops()}
    key_owner = {(k, v): op for op in by_id.values() for k, v in _props(op).items()}
    col_owner = {c: op for op in by_id.values() for c in _columns(op)}
    out = []
    versions = log.versions
    for v in versions:
        c = log.commits[v]
        meta = c.metadata
        op_id = commit_op_id(c.commit_info)
        op = by_id.get(op_id) if op_id else None
        if op is None:
            writers = sorted(w for w in facts.writers_at(v) if w in by_id)
            op = by_id[writers[0]] if len(writers) == 1 else None
        if op is None and meta is not None and v != versions[0]:
            # A metadata commit without an op id: whose change it made shows
            # in what it added (each op's key / column is its own).
            prev = log.metadata_at(v - 1)
            old_conf, old_cols = configuration(prev), set(schema_columns(prev))
            owners = {
                key_owner[(k, x)].id
                for k, x in configuration(meta).items()
                if old_conf.get(k) != x and (k, x) in key_owner
            }
            owners |= {col_owner[n].id for n in schema_columns(meta) if n not in old_cols and n in col_owner}
            op = by_id[owners.pop()] if len(owners) == 1 else None
        rv = c.read_version
        if rv is None:
            rv = _recorded_read_version(op)
        out.append(_Commit(v, op, rv, meta is not None and v != versions[0]))
    return out


def _overlaps(a: Op, b: Op) -> bool:
    a_end = a.end if a.end is not None else float("inf")
    b_end = b.end if b.end is not None else float("inf")
    return a.start < b_end and b.start < a_end


def check(history: History, log: TransactionLog) -> CheckResult:
    if log.latest_version is None:
        return no_versions(NAME, "metadata")
    commits = _commits(history, log)
    metas = [c for c in commits if c.is_metadata]
    anomalies: list[Anomaly] = []
    unknown: dict[int, str] = {}
    for c in commits:
        before = [m for m in metas if m.version < c.version]
        if not before or c.version == commits[0].version:
            continue
        who = f"op {c.op.id} ({c.op.f})" if c.op else "an unattributed commit"
        if c.read_version is not None:
            missed = [m for m in before if c.read_version < m.version]
            if missed:
                m = missed[0]
                m_who = f"op {m.op.id} ({m.op.f})" if m.op else "an unattributed commit"
                anomalies.append(
                    Anomaly(
                        "commit-after-metadata-change",
                        "C17",
                        f"Version {c.version}, by {who}, read version {c.read_version} and committed although "
                        f"{len(missed)} metadata change(s) committed in between (first: version {m.version}, by "
                        f"{m_who}); "
                        f"a metadata change must make every concurrent write fail.",
                        ops=[x.id for x in (c.op, m.op) if x],
                        versions=[c.read_version, m.version, c.version],
                        details={"missed_metadata_versions": [x.version for x in missed]},
                    )
                )
            continue
        # Read version unknown: concurrent unless its op began after the
        # change's op had ended (a later snapshot then includes the change).
        maybe = [m for m in before if c.op is None or m.op is None or m.op.end is None or c.op.start < m.op.end]
        if maybe:
            unknown[c.version] = (
                f"version {c.version} ({who}): read version unknown, and it may have overlapped "
                f"the metadata change at version {maybe[-1].version}"
            )

    final = log.metadata_at(log.latest_version)
    final_conf, final_cols = configuration(final), set(schema_columns(final))
    ever_conf: set[tuple[str, str]] = set()
    ever_cols: set[str] = set()
    for v in log.versions:
        meta = log.commits[v].metadata
        if meta is not None:
            ever_conf |= set(configuration(meta).items())
            ever_cols |= set(schema_columns(meta))
    meta_ops = [op for op in history.client_ops() if _props(op) or _columns(op)]
    for op in meta_ops:
        props, cols = _props(op), _columns(op)
        if op.type == OK:
            lost = [f"{k}={x}" for k, x in props.items() if final_conf.get(k) != x]
            lost += [f"column {n}" for n in cols if n not in final_cols]
            if lost:
                anomalies.append(
                    Anomaly(
                        "lost-metadata-update",
                        "C7",
                        f"Op {op.id} ({op.f}) was acknowledged ok, but the metadata of the final version "
                        f"{log.latest_version} lacks {', '.join(lost)} (spec C7, C17).",
                        ops=[op.id],
                        versions=[log.latest_version],
                    )
                )
        elif op.type == FAIL:
            applied = [f"{k}={x}" for k, x in props.items() if (k, x) in ever_conf]
            applied += [f"column {n}" for n in cols if n in ever_cols]
            if applied:
                anomalies.append(
                    Anomaly(
                        "failed-but-committed",
                        "C6",
                        f"Op {op.id} ({op.f}) failed ({op.error.cls.value if op.error else 'no error recorded'}), "
                        f"yet the log's metadata carries its change ({', '.join(applied)}).",
                        ops=[op.id],
                    )
                )

    classes, findings = _conflict_classes(history, commits)
    unsupported = Counter(
        op.f for op in history.client_ops() if op.error is not None and op.error.cls is ErrorClass.UNSUPPORTED
    )
    stats: dict[str, Any] = {
        "metadata_commits": len(metas),
        "metadata_ops": dict(Counter(f"{op.f}:{op.type}" for op in meta_ops)),
        "commits_after_a_metadata_change": sum(1 for c in commits if any(m.version < c.version for m in metas)),
        "read_version_unknown": len(unknown),
        "conflict_classes_near_metadata_changes": classes,
        "e4_class_findings": findings,
        "unsupported": dict(unsupported),
    }
    if unknown:
        stats["unknown"] = dict(list(unknown.items())[:50])
    cls_text = ", ".join(f"{k} x{n}" for k, n in sorted(classes.items())) or "none"
    tail = (
        f" Conflicts of writes racing metadata changes: {cls_text}; {len(findings)} lacked the E4 class "
        f"MetadataChangedException."
    )
    if unsupported:
        tail += (
            " Reported unsupported by the engine: "
            + ", ".join(f"{f} x{n}" for f, n in sorted(unsupported.items()))
            + "."
        )
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} metadata anomaly(ies) among {len(metas)} metadata change(s). Spec C17: a metadata "
            f"change makes every concurrent write fail. First: {anomalies[0].explanation}" + tail,
            anomalies,
            stats,
        )
    if unknown:
        first = next(iter(unknown.values()))
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"No violation found, but {len(unknown)} commit(s) after a metadata change have no known read version and "
            f"may have raced it, so C17 cannot be judged for them, e.g. {first}." + tail,
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"No commit read a version older than a metadata change committed before it ({len(metas)} metadata "
        f"change(s), {stats['commits_after_a_metadata_change']} later commit(s)), and every acknowledged property "
        f"set and column add is in the final metadata." + tail,
        [],
        stats,
    )


def _conflict_classes(history: History, commits: list[_Commit]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Classes of conflicts that raced a metadata change, and the ones whose
    only possible cause was a metadata change but that do not say E4."""
    attributed = [(c, c.op) for c in commits[1:] if c.op is not None]
    classes: Counter[str] = Counter()
    findings: list[dict[str, Any]] = []
    for op in history.client_ops():
        if op.type != FAIL or op.error is None or not op.error.cls.is_conflict:
            continue
        racing = [c for c, owner in attributed if owner.id != op.id and _overlaps(op, owner)]
        if not any(c.is_metadata for c in racing):
            continue
        classes[op.error.cls.value] += 1
        if all(c.is_metadata for c in racing) and op.error.cls is not ErrorClass.METADATA_CHANGED:
            findings.append(
                {
                    "op": op.id,
                    "f": op.f,
                    "class": op.error.cls.value,
                    "metadata_versions": [c.version for c in racing],
                    "raw": op.error.raw[:300],
                }
            )
    return dict(classes), findings
