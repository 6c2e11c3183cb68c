"""Time travel (spec T1): a read of version v returns exactly the rows the
log gives version v, or fails.

Each `read-as-of` op names the version it asked for; the log's replay
(checkers.facts) gives that version's rows. A read that returns anything
else, or returns rows of a version the log does not have, is a
`time-travel-mismatch`. A read that fails is within the claim (VACUUM may
have deleted the version's files, or log cleanup its entries); how many
failed, and why, is in the stats. A read is judged only where every file
of its version could be read (kept copies included); the others are
counted as unjudged.

A `read-as-of-time` op asked for the table as of a time T: the newest
version committed by then. An engine resolves T by the commit's in-commit
timestamp where the table has them, else by the commit file's time in the
store, which the log does not record and which differs from the
commitInfo's `timestamp` by the commit's own latency and the store's clock
granularity (S3 listings: whole seconds). So the versions T may resolve to
are those that were the newest at some moment within `SLACK_MS` of T by
the commitInfo timestamps; the rows must be one of those versions' (and,
where the engine says which version it read, that version's, and that
version one of them). Where log cleanup deleted commits, the run's copies
of them still say which versions a time resolves to: before the cleanup a
read finds them, after it T1's answer is an error, so a read of any other
version is a mismatch. A read asked before the table's first commit, or in
a run whose nemesis moved clocks, is not judged.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import Fingerprint, TableFacts, fault_windows, fmt_ids, table_facts
from harness.core.history import OK, ErrorClass, History, Op
from harness.deltalog import TransactionLog

NAME = "time-travel"
READ_AS_OF = "read-as-of"
READ_AS_OF_TIME = "read-as-of-time"
SLACK_MS = 2000


def _asked(op: Op) -> tuple[int | None, list[Any] | None]:
    v = op.value if isinstance(op.value, dict) else {}
    version = v.get("version")
    ids = v.get("ids")
    return (int(version) if isinstance(version, int) else None), (list(ids) if isinstance(ids, list) else None)


def commit_times(log: TransactionLog) -> list[tuple[int, int]]:
    """(version, its commit's time in Unix ms), by version: the in-commit
    timestamp where the commit has one, else commitInfo's `timestamp`."""
    out = []
    for v in log.versions:
        c = log.commit(v)
        info = c.commit_info or {}
        ts = info.get("inCommitTimestamp", c.timestamp)
        if isinstance(ts, int):
            out.append((v, ts))
    return out


def newest_by(times: list[tuple[int, int]], at_ms: int) -> int | None:
    """The newest version committed at or before `at_ms`."""
    return max((v for v, t in times if t <= at_ms), default=None)


def _mismatch(op: Op, what: str, version: int, ids: list[Any], facts: TableFacts) -> Anomaly | None:
    """The anomaly of a read that asked for `what` and should have returned
    version `version`'s rows, if it did not."""
    fp = Fingerprint.of(ids)
    if fp == facts.fingerprints.get(version):
        return None
    expected = facts.state(version)
    got = Counter(ids)
    extra = sorted(i for i in got if i not in expected)
    missing = sorted(i for i in expected if i not in got)
    twice = sorted(i for i, n in got.items() if n > 1)
    if not (extra or missing or twice):
        return None
    parts = []
    if missing:
        parts.append(f"lacks {len(missing)} row(s) version {version} has ({fmt_ids(missing)})")
    if extra:
        parts.append(f"has {len(extra)} row(s) version {version} does not ({fmt_ids(extra)})")
    if twice:
        parts.append(f"returns {len(twice)} row(s) more than once ({fmt_ids(twice)})")
    # Which version, if any, the rows are from: a read of the wrong version.
    same = facts.by_fingerprint.get(fp, []) if not twice else []
    also = f" The rows are those of version(s) {same[:5]}." if same else ""
    return Anomaly(
        kind="time-travel-mismatch",
        claim="T1",
        explanation=f"Read {op.id} (process {op.process}) asked for {what}: it {'; '.join(parts)}.{also}",
        ops=[op.id],
        versions=[version, *same[:1]],
        rows=missing + extra + twice,
        details={"version": version, "missing": missing[:50], "extra": extra[:50], "twice": twice[:50]},
    )


def _judge_time(
    op: Op, log: TransactionLog, facts: TableFacts, times: list[tuple[int, int]]
) -> tuple[Anomaly | None, str | None]:
    """(anomaly, None), or (None, why it is not judged) for a read as of a time."""
    v = op.value if isinstance(op.value, dict) else {}
    at, ids, said = v.get("timestamp_ms"), v.get("ids"), v.get("resolved")
    if not isinstance(at, int) or not isinstance(ids, list):
        return None, f"{op.id} (no time or rows recorded)"
    if not times:
        return None, f"{op.id} (the log has no commit times)"
    if at < times[0][1]:
        # Before version 0, or before the oldest commit a log read without
        # the run's copies has: no version the log holds says what is right.
        return None, f"{op.id} (asked for a time before the oldest commit the log has)"
    lo = newest_by(times, at - SLACK_MS)
    hi = newest_by(times, at + SLACK_MS)
    assert hi is not None
    lo = times[0][0] if lo is None else lo
    may = [ver for ver, _ in times if lo <= ver <= hi]
    what = (
        f"the table as of {at} ms (by the log's commit times version {newest_by(times, at)}, within "
        f"{SLACK_MS} ms of it {lo}..{hi})"
    )
    if isinstance(said, int):
        if said not in log.commits or said not in may:
            # A time whose versions cleanup has since deleted: before the
            # cleanup a read finds them, after it T1's answer is an error.
            gone = sorted(set(may) & log.expired_commits)
            cleaned = (
                f" Log cleanup deleted the commits of version(s) {gone[0]}..{gone[-1]} (the run kept copies): "
                "before that a read finds them, after it T1's answer is an error."
                if gone
                else ""
            )
            return Anomaly(
                kind="time-travel-mismatch",
                claim="T1",
                explanation=f"Read {op.id} (process {op.process}) asked for {what}, and the engine read version {said}"
                + (", which the log does not have." if said not in log.commits else ", committed outside that span.")
                + cleaned,
                ops=[op.id],
                versions=[said],
                details={"timestamp_ms": at, "may": may, "resolved": said, "cleaned": gone},
            ), None
        if set(log.live_files(said)) & log.unreadable_files:
            return None, f"{op.id} (version {said} has data files that could not be read)"
        return _mismatch(op, f"{what}, and the engine read version {said}", said, list(ids), facts), None
    if any(set(log.live_files(ver)) & log.unreadable_files for ver in may):
        return None, f"{op.id} (a version it may resolve to has data files that could not be read)"
    if Fingerprint.of(ids) in {facts.fingerprints.get(ver) for ver in may}:
        return None, None
    nearest = newest_by(times, at)
    return _mismatch(op, what, nearest if nearest is not None else lo, list(ids), facts), None


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "time-travel reads")
    ops = [o for o in history.ops() if o.f in (READ_AS_OF, READ_AS_OF_TIME)]
    done = [o for o in ops if o.type == OK and o.f == READ_AS_OF]
    timed = [o for o in ops if o.type == OK and o.f == READ_AS_OF_TIME]
    # An op the engine cannot run at all is not a read that failed.
    unsupported = {o.id for o in ops if o.error is not None and o.error.cls is ErrorClass.UNSUPPORTED}
    failed = [o for o in ops if o.type != OK and o.id not in unsupported]
    anomalies: list[Anomaly] = []
    judged = 0
    unjudged: list[str] = []
    for op in done:
        version, ids = _asked(op)
        if version is None or ids is None:
            unjudged.append(f"{op.id} (no version or rows recorded)")
            continue
        if version > facts.latest or version not in log.commits:
            anomalies.append(
                Anomaly(
                    kind="time-travel-mismatch",
                    claim="T1",
                    explanation=f"Read {op.id} asked for version {version} and returned {len(ids)} rows, but the "
                    f"log has no version {version} (latest {facts.latest}).",
                    ops=[op.id],
                    versions=[version],
                )
            )
            continue
        if set(log.live_files(version)) & log.unreadable_files:
            unjudged.append(f"{op.id} (version {version} has data files that could not be read)")
            continue
        judged += 1
        anomaly = _mismatch(op, f"version {version}", version, ids, facts)
        if anomaly is not None:
            anomalies.append(anomaly)
    if timed:
        clocks = [w for w in fault_windows(history) if w.what == "clock"]
        times = commit_times(log)
        for op in timed:
            if clocks:
                unjudged.append(f"{op.id} (the nemesis moved clocks in this run)")
                continue
            anomaly, why = _judge_time(op, log, facts, times)
            if why is not None:
                unjudged.append(why)
                continue
            judged += 1
            if anomaly is not None:
                anomalies.append(anomaly)
    errors = Counter(_error_kind(o) for o in failed)
    stats = {
        "reads": len(ops),
        "judged": judged,
        "unjudged": len(unjudged),
        "failed": len(failed),
        "unsupported": len(unsupported),
        "failed_by": dict(errors),
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} of {judged + len(anomalies)} time-travel read(s) returned another state than the "
            f"version they asked for (spec T1), e.g. {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if judged == 0:
        why = f"; e.g. {unjudged[0]}" if unjudged else ""
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"No time-travel read could be judged ({len(ops)} invoked, {len(failed)} failed{why}).",
            [],
            stats,
        )
    fails = (
        f"; {len(failed)} failed with an error ({', '.join(f'{k} x{n}' for k, n in errors.items())}): spec T1 "
        "allows an error (a version whose files or log entries are gone must fail), never another state"
        if failed
        else ""
    )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the {judged} judged time-travel read(s) returned exactly the rows of the version it asked for"
        f"{fails}.",
        [],
        stats,
    )


def _error_kind(op: Op) -> str:
    err = op.completion.error if op.completion is not None else None
    if err is None:
        return "no completion"
    raw = (err.raw or "").lower()
    if "not found" in raw or "no such file" in raw or "does not exist" in raw:
        return "data file gone"
    return err.cls.value
