"""VACUUM (spec T2): no data file that a version within the retention
period references is deleted.

The run keeps a copy of every data file as it appears (kept/), so the log
knows which files the store no longer has (`deleted_files`). Of those the
log references:
- a file live at the latest version is gone from the table as it stands:
  `vacuumed-live-file`;
- a file the log removed at version r may go only by a VACUUM whose
  snapshot is past r (its VACUUM START commit comes after r) and whose
  retention r's removal is older than (by the commits' timestamps); a file
  no such VACUUM covers was deleted while a version within the retention
  period still referenced it: `vacuumed-live-file`.
Files the log never references (leftovers of writes that never committed,
spec C5) are VACUUM's to delete; they are counted only. Where the run kept
no copies, which files were deleted is unknown, and so is the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id
from harness.core.history import History
from harness.deltalog import TransactionLog

NAME = "vacuum"
VACUUM_OPS = ("vacuum", "vacuum-full")
_HOUR_MS = 3_600_000


@dataclass
class _Vacuum:
    op: str
    start: int  # the version of its VACUUM START commit
    retention_ms: int
    timestamp: int  # its START commit's timestamp


def _vacuums(history: History, log: TransactionLog) -> list[_Vacuum]:
    """Each vacuum op's START commit, with the retention the op asked for
    (else the one the commit records)."""
    asked: dict[str, Any] = {}
    for o in history.ops():
        if o.f in VACUUM_OPS and isinstance(o.invoke.value, dict):
            asked[o.id] = o.invoke.value.get("retention_hours")
    out = []
    for v in log.versions:
        info = log.commit(v).commit_info or {}
        if info.get("operation") != "VACUUM START":
            continue
        op = commit_op_id(info) or ""
        params = info.get("operationParameters") or {}
        retention: int | None = None
        if isinstance(asked.get(op), int):
            retention = int(asked[op]) * _HOUR_MS
        else:
            try:
                retention = int(str(params.get("specifiedRetentionMillis") or params.get("defaultRetentionMillis")))
            except ValueError:
                retention = None
        if retention is None:
            continue
        out.append(_Vacuum(op, v, retention, int(info.get("timestamp") or 0)))
    return out


def _describe(vac: _Vacuum) -> str:
    return f"{vac.op or '?'} (START at version {vac.start}, retention {vac.retention_ms / _HOUR_MS:g} h)"


def _file_events(log: TransactionLog) -> dict[str, list[tuple[int, str]]]:
    """Object name -> the (version, "add" | "remove") actions on it, in order."""
    out: dict[str, list[tuple[int, str]]] = {}
    for v in log.versions:
        c = log.commit(v)
        for a in c.adds:
            out.setdefault(unquote(a["path"]), []).append((v, "add"))
        for r in c.removes:
            out.setdefault(unquote(r["path"]), []).append((v, "remove"))
    return out


def check(history: History, log: TransactionLog) -> CheckResult:
    latest = log.latest_version
    if latest is None:
        return no_versions(NAME, "VACUUM")
    ops = [o for o in history.ops() if o.f in VACUUM_OPS]
    if log.deleted_files is None:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            "The run kept no copies of its data files, so which files VACUUM deleted is unknown.",
            [],
            {"vacuum_ops": len(ops)},
        )
    vacuums = _vacuums(history, log)
    events = _file_events(log)
    live = {unquote(p) for p in log.live_files(latest)}
    anomalies: list[Anomaly] = []
    referenced = sorted(f for f in log.deleted_files if f in events)
    untracked = len(log.deleted_files) - len(referenced)
    for f in referenced:
        evs = events[f]
        added = next((v for v, kind in evs if kind == "add"), None)
        if f in live:
            anomalies.append(
                Anomaly(
                    kind="vacuumed-live-file",
                    claim="T2",
                    explanation=f"Data file {f}, live at the latest version {latest} (added at version {added}), "
                    "is gone from the store: the table as it stands cannot be read whole.",
                    versions=[v for v, _ in evs][:10],
                    details={"file": f, "actions": evs[:20]},
                )
            )
            continue
        removed = max(v for v, kind in evs if kind == "remove")
        ts = int((log.commit(removed).commit_info or {}).get("timestamp") or 0)
        by = [vac for vac in vacuums if vac.start > removed and ts + vac.retention_ms <= vac.timestamp]
        if not by:
            anomalies.append(
                Anomaly(
                    kind="vacuumed-live-file",
                    claim="T2",
                    explanation=f"Data file {f} was deleted, but version {removed - 1} still referenced it "
                    f"(version {removed} removed it) and no VACUUM's retention had expired that version: "
                    + (", ".join(_describe(vac) for vac in vacuums[:3]) or "no VACUUM committed a START")
                    + ".",
                    ops=sorted({vac.op for vac in vacuums if vac.op})[:5],
                    versions=[removed - 1, removed],
                    details={"file": f, "actions": evs[:20]},
                )
            )
    stats = {
        "vacuum_ops": len(ops),
        "vacuum_commits": len(vacuums),
        "deleted_referenced": len(referenced),
        "deleted_untracked": untracked,
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} data file(s) were deleted while a version within the retention period referenced "
            f"them (spec T2), e.g. {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if not vacuums and not referenced:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"No VACUUM committed ({len(ops)} invoked), so there is nothing to judge.",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"{len(vacuums)} VACUUM(s) deleted {len(referenced)} data file(s) the log references, each removed longer "
        f"ago than the retention of a VACUUM that ran after its removal; none live at the latest version "
        f"({untracked} untracked file(s) deleted too).",
        [],
        stats,
    )
