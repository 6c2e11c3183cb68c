"""RESTORE (spec T3): a RESTORE commit leaves the table exactly as the
version it restored, and says so.

For every commit whose commitInfo names the operation RESTORE and the
version restored, the files live after it must be the files live at that
version. Under WriteSerializable a blind append that committed between the
RESTORE's snapshot and its commit may stay (it serializes after the
RESTORE, spec C15); nothing else may differ. An acknowledged `restore` op
whose commit names another version than the op asked for is the same
anomaly. Kind: `restore-mismatch`.
"""

from __future__ import annotations

from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id, fmt_ids
from harness.core.history import OK, History
from harness.core.isolation import WRITE_SERIALIZABLE
from harness.deltalog import TransactionLog

NAME = "restore"


def _target(info: dict[str, Any]) -> int | None:
    params = info.get("operationParameters") or {}
    v = params.get("version")
    try:
        return int(v) if v is not None and str(v).strip() not in ("", "null", "None") else None
    except ValueError:
        return None


def _blind_append(info: dict[str, Any] | None) -> bool:
    if not info:
        return False
    if info.get("isBlindAppend") is True:
        return True
    params = info.get("operationParameters") or {}
    return info.get("operation") in ("WRITE", "STREAMING UPDATE") and params.get("mode") == "Append"


def check(history: History, log: TransactionLog) -> CheckResult:
    if log.latest_version is None:
        return no_versions(NAME, "restores")
    default_level = history.table_declaration().default_isolation
    anomalies: list[Anomaly] = []
    restores: dict[str, tuple[int, int | None]] = {}  # op id -> (commit version, target)
    commits = judged = 0
    for v in log.versions:
        info = log.commit(v).commit_info or {}
        if info.get("operation") != "RESTORE":
            continue
        commits += 1
        target = _target(info)
        op_id = commit_op_id(info)
        if op_id:
            restores[op_id] = (v, target)
        if target is None or target not in log.commits or not log.is_reconstructible(target):
            continue
        judged += 1
        after, before = set(log.live_files(v)), set(log.live_files(target))
        extra, lost = after - before, before - after
        read = info.get("readVersion")
        level = log.configuration_at(v - 1).get("delta.isolationLevel") or default_level
        if extra and level == WRITE_SERIALIZABLE and isinstance(read, int):
            # Blind appends committed across the RESTORE serialize after it.
            across = {
                p
                for w in log.versions
                if read < w < v and _blind_append(log.commit(w).commit_info)
                for p in (a["path"] for a in log.commit(w).adds)
            }
            extra -= across
        if extra or lost:
            parts = []
            if lost:
                parts.append(f"lacks {len(lost)} file(s) version {target} has ({fmt_ids(sorted(lost), 3)})")
            if extra:
                parts.append(f"keeps {len(extra)} file(s) version {target} did not have ({fmt_ids(sorted(extra), 3)})")
            anomalies.append(
                Anomaly(
                    kind="restore-mismatch",
                    claim="T3",
                    explanation=f"Version {v} restores version {target}"
                    + (f" (op {op_id})" if op_id else "")
                    + f", but the table after it {'; '.join(parts)}.",
                    ops=[op_id] if op_id else [],
                    versions=[v, target],
                    details={"lost": sorted(lost)[:50], "extra": sorted(extra)[:50]},
                )
            )
    acked = [o for o in history.ops() if o.f == "restore" and o.type == OK]
    for op in acked:
        asked = (op.value or {}).get("target") if isinstance(op.value, dict) else None
        got = restores.get(op.id)
        if got is not None and asked is not None and got[1] is not None and got[1] != asked:
            anomalies.append(
                Anomaly(
                    kind="restore-mismatch",
                    claim="T3",
                    explanation=f"Op {op.id} asked to restore version {asked}, but its commit (version {got[0]}) "
                    f"says it restored version {got[1]}.",
                    ops=[op.id],
                    versions=[got[0], asked],
                )
            )
    stats = {"restore_commits": commits, "judged": judged, "acknowledged": len(acked)}
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} RESTORE(s) did not leave the table as the version they restored (spec T3), e.g. "
            f"{anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if judged == 0:
        return CheckResult(NAME, Verdict.UNKNOWN, "No RESTORE commit to judge: none committed.", [], stats)
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the {judged} RESTORE commit(s) left exactly the files of the version it names.",
        [],
        stats,
    )
