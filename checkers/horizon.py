"""How far a log with a hole in it can be judged.

A commit file that cannot be read, or that is missing where no checkpoint
stands in for it, leaves the table undefined from its version on (spec C4).
Replaying the commits past it as if that version had changed nothing
invents a table no reader ever saw: every later read looks like a state
that never existed, and a write committed in the hole looks lost. So
log-sanity reports the hole, and every checker that follows the table
version by version judges the log only up to the version before it (the
horizon, `TransactionLog.up_to`). What rests on a later version is unknown,
never an anomaly:

- a finding that names a version past the horizon;
- a finding about an op that may have written or seen such a version: one
  with no commit in the judged versions that had not completed before the
  newest invocation among the writers of those versions. A later version
  was written after all of those commits (commit order, which every checker
  assumes: version v + 1 is written after version v), so an op that
  completed before then met none of it: its absence from the judged
  versions is a loss, and its read was of one of them.

A checker whose verdict rests on every version of the table (durability's
final state, say) is unknown past the horizon even with no finding there;
the few whose verdict rests on some ops only (`RESTS_ON_OPS`) stay valid
when none of those ops may have met a later version. A readable checkpoint
past the hole defines the table again from its version on, but the
checkers follow rows and ops commit by commit from version 0, so they do
not judge past the hole either way; the explanation says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from checkers import RESTS_ON_OPS, WHOLE_LOG, checker_fn
from checkers.base import CheckResult, Verdict
from checkers.facts import TableFacts, fmt_ids, table_facts
from harness.core.history import INFO, History, Op
from harness.deltalog import TransactionLog

# Findings drawn from the history alone (a read's own balances; an error's
# class against the op's own kind), on which no version of the log bears.
_FROM_HISTORY_ALONE: dict[str, frozenset[str | None] | None] = {
    "read-wrong-total": None,
    "conflict-unclassified": None,
    "wrong-conflict-class": frozenset({"E3", "E5"}),
}


# The log problems that stand for a version with no readable commit.
_BROKEN_COMMITS = frozenset({"unparseable", "unreadable", "gap", "missing-commit"})


@dataclass(frozen=True)
class Horizon:
    last: int  # the newest version judged; -1 when none is
    hole: int  # the first version whose state cannot be reconstructed
    top: int  # the newest version the log has an entry for
    what: str  # what is wrong at `hole`, in a few words
    detail: str = ""  # the reader's words for it, e.g. the parse error
    resumes: int | None = None  # a readable checkpoint past the hole

    @property
    def why(self) -> str:
        """One sentence: how far the log is judged, and why no further."""
        judged = f"Judged on versions 0..{self.last} only" if self.last >= 0 else "No version is judged"
        if self.resumes is None:
            rest = "the table from there on cannot be reconstructed"
        else:
            rest = (
                f"{_versions(self.hole, self.resumes - 1)} cannot be reconstructed (checkpoint {self.resumes} "
                "restores the table from there on, but the checkers replay the commits from version 0)"
            )
        return f"{judged}: {self.what}, so {rest}."


def _versions(lo: int, hi: int) -> str:
    return f"version {lo}" if lo == hi else f"versions {lo}..{hi}"


def horizon(log: TransactionLog) -> Horizon | None:
    """Where replaying `log` from version 0 has to stop; None when nothing stops it."""
    hole = log.first_hole
    if hole is None:
        return None
    problem = next((p for p in log.problems if p.version == hole and p.kind in _BROKEN_COMMITS), None)
    kind = problem.kind if problem is not None else None
    what = {
        "unparseable": f"the commit file of version {hole} is unparseable",
        "unreadable": f"the commit file of version {hole} could not be read",
    }.get(kind or "", f"version {hole} has no commit file")
    entries = (p.version for p in log.problems if p.kind in _BROKEN_COMMITS and p.version is not None)
    top = max([hole, *log.versions, *log.checkpoint_versions, *entries])
    resumes = next((c for c in log.checkpoint_versions if c > hole and log.is_reconstructible(c)), None)
    return Horizon(hole - 1, hole, top, what, problem.detail if problem else "", resumes)


def run_checkers(
    history: History, log: TransactionLog, names: Iterable[str], timings: dict[str, float] | None = None
) -> list[CheckResult]:
    """The named checkers' results on (history, log), each judged as far as
    the log can be (see the module docstring); `timings` gets each one's
    seconds, as "checker <name>"."""
    h = horizon(log)
    judged = log if h is None else log.up_to(h.last)
    names = list(names)
    by_name: dict[str, CheckResult] = {}
    # log-sanity does little with each data file it has decoded; a checker
    # that does more, run first, does it while the files are still being
    # decoded (on a long local log, by reader processes), and log-sanity
    # then finds them decoded. Results keep the order asked for.
    for name in sorted(names, key=lambda n: n == "log-sanity"):
        t0 = time.monotonic()
        by_name[name] = _run(name, history, log if h is None or name in WHOLE_LOG else judged)
        if timings is not None:
            timings[f"checker {name}"] = round(time.monotonic() - t0, 3)
    results = [by_name[name] for name in names]
    if h is not None:
        facts = table_facts(judged)
        opened = _open_ops(history, facts)
        for r in results:
            if r.checker not in WHOLE_LOG:
                _restrict(r, history, h, opened)
    return results


def _run(name: str, history: History, log: TransactionLog) -> CheckResult:
    try:
        return checker_fn(name)(history, log)
    except Exception as e:  # a checker bug must not hide the other verdicts
        return CheckResult(name, Verdict.UNKNOWN, f"checker crashed: {type(e).__name__}: {e}")


def _open_ops(history: History, facts: TableFacts) -> dict[str, Op]:
    """The ops that may have written or seen a version past the judged
    ones; the setup's too (a bank's initial load may be in the hole)."""
    starts = {op.id: op.start for op in history.ops()}
    writers = [starts[w] for w in (*facts.writer_rows, *facts.commit_ops.values()) if w in starts]
    # No later version was written before every judged version's writer had
    # been invoked.
    since = max(writers, default=None)
    return {
        op.id: op
        for op in history.ops()
        if op.process != "nemesis"
        and facts.commit_version(op.id) is None
        # An indeterminate op may commit at any time, also after its end.
        and (since is None or op.type == INFO or op.end is None or op.end >= since)
    }


def _past(
    kind: str, claim: str | None, versions: Iterable[object], ops: Iterable[str], h: Horizon, opened: dict
) -> bool:
    if any(isinstance(v, int) and v > h.last for v in versions):
        return True
    if kind in _FROM_HISTORY_ALONE:
        claims = _FROM_HISTORY_ALONE[kind]
        if claims is None or claim in claims:
            return False
    return any(o in opened for o in ops)


def _restrict(r: CheckResult, history: History, h: Horizon, opened: dict[str, Op]) -> None:
    """Set aside what `r` found past the horizon, and make it unknown where
    its verdict rests on what was not judged."""
    past = [_past(a.kind, a.claim, a.versions, a.ops, h, opened) for a in r.anomalies]
    aside = [a for a, p in zip(r.anomalies, past, strict=True) if p]
    kept = [a for a, p in zip(r.anomalies, past, strict=True) if not p]
    r.anomalies = kept
    # exception-classes' findings beside a valid verdict: the same rule.
    deviations = r.stats.get("deviations")
    if isinstance(deviations, list):
        judged = [d for d in deviations if not _past(d["kind"], d["claim"], [], [d["op"]], h, opened)]
        if len(judged) < len(deviations):
            r.stats["deviations"] = judged
            r.explanation += (
                f" {len(deviations) - len(judged)} of these findings concern ops that may have met a version past "
                f"{h.last} and are set aside."
            )
    rests_on = RESTS_ON_OPS.get(r.checker)
    ops = rests_on(history) if rests_on is not None else history.client_ops()
    unjudged = [op.id for op in ops if op.id in opened]
    r.stats["horizon"] = {
        "last_judged": h.last,
        "hole": h.hole,
        "resumes": h.resumes,
        "findings_set_aside": len(aside),
        "ops_not_judged": len(unjudged),
    }
    seen = "one of them" if rests_on is None else f"version {h.hole} or later"
    ops_text = f"{len(unjudged)} op(s) that may have written or seen {seen} ({fmt_ids(unjudged, 3)})"
    if rests_on is None:
        not_judged = _versions(h.hole, h.top) + (f", and {ops_text}" if unjudged else "")
    else:
        not_judged = ops_text if unjudged else "no op"
    set_aside = f"; {len(aside)} finding(s) resting on them are not reported" if aside else ""
    if kept:
        if aside:
            r.explanation = (
                f"{len(kept)} anomal{'y' if len(kept) == 1 else 'ies'} in the judged versions 0..{h.last}, "
                f"first: {kept[0].explanation} {h.why} Not judged: {not_judged}{set_aside}."
            )
        else:
            r.explanation += f" {h.why}"
        return
    if rests_on is not None and not unjudged and not aside:
        r.explanation += f" {h.why}"
        return
    upto = f" Up to version {h.last}: {r.explanation}" if h.last >= 0 and not aside else ""
    r.verdict = Verdict.UNKNOWN
    r.explanation = f"Unknown: {h.why} Not judged: {not_judged}{set_aside}.{upto}"
