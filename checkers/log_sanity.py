"""Log sanity (spec C4): versions contiguous from 0, every commit parseable,
one metaData/protocol per commit at most; plus every data file the log
names present in the store (spec C7: a missing one is lost data) and
readable (one the harness cannot decode makes the verdict unknown)."""

from __future__ import annotations

from urllib.parse import unquote

from checkers.base import Anomaly, CheckResult, Verdict
from harness.core.history import History
from harness.deltalog import TransactionLog

NAME = "log-sanity"
# Problems that mean the log itself is broken, not that we can't read a part.
_BROKEN = {
    "gap",
    "unparseable",
    "missing-commit",
    "multiple-metadata",
    "multiple-protocol",
    # The protocol forbids two actions on one file in a commit; a checkpoint
    # that disagrees with the commits it summarizes defines two tables.
    "duplicate-file-action",
    "checkpoint-mismatch",
    # A checkpoint file cut off mid-write: readers that start from it fail.
    "checkpoint-broken",
    # The protocol has in-commit timestamps grow with the version; readers
    # resolve time travel by them.
    "in-commit-timestamp",
}


def check(history: History, log: TransactionLog) -> CheckResult:
    # The reader reports a missing or empty _delta_log as an "empty-log" problem.
    if not log.versions and all(p.kind == "empty-log" for p in log.problems):
        return CheckResult(
            NAME, Verdict.UNKNOWN, "No transaction log was found, so nothing about the table can be checked."
        )
    # Read every data file first: that records their problems
    # ("data-file-unreadable") on the log, and they must be seen below.
    log.read_data_files()
    # The reader trusts checkpoints to skip JSON; whether each agrees with
    # the JSON commits it summarizes is only known by comparing them.
    log.check_checkpoints()
    anomalies = []
    unknowns = []
    if log.deleted_files and log.latest_version is not None:
        # Read from the run's kept copy, a file the latest version names
        # is still gone from the table as it stands.
        for path in log.live_files(log.latest_version):
            if unquote(path) in log.deleted_files:
                version = log.added_at(path)
                anomalies.append(
                    Anomaly(
                        kind="missing-data-file",
                        claim="C7",
                        explanation=f"Version {version} adds a data file the store no longer has (the run kept a "
                        f"copy, so its rows are known), and the latest version {log.latest_version} still names "
                        f"it: {path}",
                        versions=[version] if version is not None else [],
                    )
                )
    if log.expired_commits:
        # Log cleanup may delete commits a checkpoint stands in for, never
        # one above the newest checkpoint: the table could not be read whole.
        newest = max(log.checkpoint_versions, default=-1)
        for v in sorted(x for x in log.expired_commits if x > newest):
            anomalies.append(
                Anomaly(
                    kind="log-missing-commit",
                    claim="C4",
                    explanation=f"Version {v}'s commit is gone from the store (the run kept a copy), and no "
                    f"checkpoint at or above it stands in for it (the newest is "
                    f"{newest if newest >= 0 else 'none'}): the table as it stands cannot be read whole.",
                    versions=[v],
                )
            )
    for p in log.problems:
        if p.kind == "data-file-missing":
            anomalies.append(
                Anomaly(
                    kind="missing-data-file",
                    claim="C7",
                    explanation=f"Version {p.version} adds a data file the store does not have, so the rows it "
                    f"committed are gone: {p.detail}",
                    versions=[p.version] if p.version is not None else [],
                )
            )
        elif p.kind in _BROKEN:
            anomalies.append(
                Anomaly(
                    kind=f"log-{p.kind}",
                    claim="C4",
                    explanation=f"Version {p.version}: {p.detail}" if p.version is not None else p.detail,
                    versions=[p.version] if p.version is not None else [],
                )
            )
        else:
            unknowns.append(f"{p.kind} at version {p.version}: {p.detail}")
    stats = {
        "versions": len(log.versions),
        "latest_version": log.latest_version,
        "checkpoints": len(log.checkpoint_versions),
        "problems": len(log.problems),
        "expired_commits": len(log.expired_commits),
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"The transaction log is not a contiguous, parseable sequence of commits: {len(anomalies)} problem(s), "
            f"e.g. {anomalies[0].explanation}. Spec C4 says each commit adds exactly one log entry and the table at "
            "version v is defined by entries 0..v, so a gap or an unreadable entry leaves some versions undefined.",
            anomalies,
            stats,
        )
    if unknowns:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"The log is contiguous, but part of it could not be read: {'; '.join(unknowns[:3])}.",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Versions 0..{log.latest_version} are contiguous and every commit and data file parses"
        + (
            f"; log cleanup deleted {len(log.expired_commits)} commit(s), each one a checkpoint stands in for "
            "(read from the run's kept copies)."
            if log.expired_commits
            else "."
        ),
        [],
        stats,
    )
