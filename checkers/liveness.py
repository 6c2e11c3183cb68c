"""Liveness (spec C10): Delta takes no locks on reads or writes, so no op
waits on another and none deadlocks.

What a run can observe of that is an op that got no reply at all: the
runner gave up on it at its time limit and recorded it indeterminate. Most
such ops say nothing about C10: a fault was active (a partition, a paused
or killed process, a slow store), or the limit was tight for the machine
(a few times what the op usually takes). What is left is an op that
- ran outside every fault window of the nemesis,
- went unanswered for at least `STALL_RATIO` times the median time of the
  ops of its kind that did complete,
- while at least `MIN_PROGRESS` ops of other clients, invoked after it
  began, completed (the table and the machine were making progress), and
- never committed.

That op is a `stalled-op`. It is what a deadlock in the engine looks like
from outside, and also what an op starved by another client's long job in
an engine they share looks like (a VACUUM's thousands of listing tasks on a
small Spark cluster), or a commit retry loop outlasting the time limit (an
engine may retry a lost commit race as long as it likes);
the harness cannot tell them apart, so a stall makes the verdict unknown,
never invalid.
"""

from __future__ import annotations

import statistics

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.facts import fault_windows, fmt_ids, table_facts
from harness.core.history import FAIL, INFO, NO_REPLY, OK, ErrorClass, History, Op
from harness.deltalog import TransactionLog

NAME = "liveness"
STALL_RATIO = 10.0
MIN_PROGRESS = 3


def _no_reply(op: Op) -> bool:
    err = op.error
    return op.type == INFO and err is not None and err.cls is ErrorClass.TIMEOUT and err.raw.startswith(NO_REPLY)


def check(history: History, log: TransactionLog) -> CheckResult:
    ops = history.client_ops()
    done = [op for op in ops if op.type in (OK, FAIL) and op.end is not None]
    by_f: dict[str, list[int]] = {}
    for op in done:
        by_f.setdefault(op.f, []).append(op.end - op.start)  # type: ignore[operator]
    every = [d for ds in by_f.values() for d in ds]
    windows = fault_windows(history)
    facts = table_facts(log)
    timed_out = [op for op in ops if _no_reply(op) and op.end is not None]
    under_fault: list[str] = []
    tight: list[str] = []
    committed: list[str] = []
    anomalies: list[Anomaly] = []
    for op in timed_out:
        start, end = op.start, op.end
        assert end is not None
        if any(w.start <= end and w.end >= start for w in windows):
            under_fault.append(op.id)
            continue
        sample = by_f.get(op.f) if len(by_f.get(op.f) or []) >= 3 else every
        median = statistics.median(sample) if sample else None
        if median is None or end - start < STALL_RATIO * median:
            tight.append(op.id)
            continue
        if facts.commit_version(op.id) is not None:
            committed.append(op.id)
            continue
        progress = [o for o in done if o.process != op.process and o.start > start and o.end <= end]  # type: ignore[operator]
        others = [o.id for o in progress]
        if len(others) < MIN_PROGRESS:
            tight.append(op.id)
            continue
        waited = (end - start) / 1e9
        last = max(o.end for o in progress) - start  # type: ignore[operator,type-var]
        anomalies.append(
            Anomaly(
                "stalled-op",
                "C10",
                f"Op {op.id} ({op.f}) got no reply for {waited:.1f} s, {(end - start) / median:.0f}x the median "
                f"{op.f if sample is by_f.get(op.f) else 'op'} ({median / 1e9:.2f} s), outside any fault, while "
                f"{len(others)} ops of other clients invoked after it completed ({fmt_ids(others, 3)}; the last "
                f"{last / 1e9:.1f} s into its wait), and it never committed. Delta takes no locks (C10), so no op "
                "should wait on another: a deadlock in the engine, an op starved by another's long job in an "
                "engine the clients share, or a commit retry loop that outlasted the time limit; the history "
                "cannot tell them apart.",
                ops=[op.id, *others[:5]],
                details={
                    "waited_s": round(waited, 3),
                    "median_s": round(median / 1e9, 3),
                    "progress": len(others),
                    "last_progress_s": round(last / 1e9, 3),
                },
            )
        )
    stats = {
        "timed_out": len(timed_out),
        "under_fault": len(under_fault),
        "tight_limit": len(tight),
        "committed_late": len(committed),
        "stalled": len(anomalies),
        "fault_windows": len(windows),
    }
    excused = ""
    if timed_out and not anomalies:
        parts = [
            f"{len(under_fault)} under a fault" if under_fault else "",
            f"{len(tight)} with a time limit under {STALL_RATIO:g}x the median op or no progress by others meanwhile"
            if tight
            else "",
            f"{len(committed)} committed after all" if committed else "",
        ]
        excused = f" {len(timed_out)} op(s) got no reply within the time limit: " + ", ".join(p for p in parts if p)
        excused += "; none of them says anything about C10."
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"{len(anomalies)} op(s) stalled outside any fault while others completed (first: "
            f"{anomalies[0].explanation}) Unknown, not invalid: a retry loop looks the same.",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"No op stalled (C10): {len(done)} op(s) answered.{excused}",
        stats=stats,
    )
