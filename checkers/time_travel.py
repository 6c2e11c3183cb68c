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
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import Fingerprint, fmt_ids, table_facts
from harness.core.history import OK, History, Op
from harness.deltalog import TransactionLog

NAME = "time-travel"
READ_AS_OF = "read-as-of"


def _asked(op: Op) -> tuple[int | None, list[Any] | None]:
    v = op.value if isinstance(op.value, dict) else {}
    version = v.get("version")
    ids = v.get("ids")
    return (int(version) if isinstance(version, int) else None), (list(ids) if isinstance(ids, list) else None)


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "time-travel reads")
    ops = [o for o in history.ops() if o.f == READ_AS_OF]
    done = [o for o in ops if o.type == OK]
    failed = [o for o in ops if o.type != OK]
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
        fp = Fingerprint.of(ids)
        if fp == facts.fingerprints.get(version):
            continue
        expected = facts.state(version)
        got = Counter(ids)
        extra = sorted(i for i in got if i not in expected)
        missing = sorted(i for i in expected if i not in got)
        twice = sorted(i for i, n in got.items() if n > 1)
        if extra or missing or twice:
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
            anomalies.append(
                Anomaly(
                    kind="time-travel-mismatch",
                    claim="T1",
                    explanation=f"Read {op.id} (process {op.process}) asked for version {version}: it "
                    f"{'; '.join(parts)}.{also}",
                    ops=[op.id],
                    versions=[version, *same[:1]],
                    rows=missing + extra + twice,
                    details={"version": version, "missing": missing[:50], "extra": extra[:50], "twice": twice[:50]},
                )
            )
    errors = Counter(_error_kind(o) for o in failed)
    stats = {
        "reads": len(ops),
        "judged": judged,
        "unjudged": len(unjudged),
        "failed": len(failed),
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
        f"; {len(failed)} failed with an error ({', '.join(f'{k} x{n}' for k, n in errors.items())}), which spec "
        "T1 allows once a version's files or log entries are gone"
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
