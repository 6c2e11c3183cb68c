"""A cell's observation and its verdict against the spec's expectation.

Verdicts: conforms; conforms-retried (the loser's attempt on the snapshot
the schedule gave it did not commit, and the engine committed it as a new
transaction on a snapshot holding the winner's commit: what any conflict
required happened, and the retry is judged as serial after the winner);
deviates-safety (committed where the spec requires a conflict, from a
snapshot without the winner's commit, or a committed table no allowed
serial order produces);
deviates-availability (a conflict where the spec says cannot conflict);
deviates-exception-class (the right outcome, reported with a class the
E-list does not give for it); unsupported; uncontrolled (the schedule did
not take effect: never a pass); error (an op failed for a reason that is no
conflict: never a pass); unjudged (the outcome conforms, but the
serializability checker could not judge the committed table: never a
pass).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.core.history import ErrorClass
from harness.matrices.conformance.cells import COMPACTION, REMOVES_FILES, Cell, Expectation, Outcome

COMMITTED, FAILED, UNSUPPORTED, ERROR = "committed", "failed", "unsupported", "error"
# A compaction that completed, reported success and committed nothing (it
# found nothing left to compact): how a loser can satisfy M6's "cannot
# conflict" with deletion vectors, where rewriting the winner's files again
# would duplicate rows.
NOOP = "no-op"
NOT_RUN = "not run"  # the other op of the cell is unsupported
# read_version_source of a read version taken from the op's own commit.
COMMIT_READ_VERSION = "commitInfo.readVersion"

CONFORMS = "conforms"
RETRIED = "conforms-retried"
SAFETY = "deviates-safety"
AVAILABILITY = "deviates-availability"
EXCEPTION_CLASS = "deviates-exception-class"
V_UNSUPPORTED = "unsupported"
UNCONTROLLED = "uncontrolled"
V_ERROR = "error"
UNJUDGED = "unjudged"
VERDICTS = (CONFORMS, RETRIED, SAFETY, AVAILABILITY, EXCEPTION_CLASS, V_UNSUPPORTED, UNCONTROLLED, V_ERROR, UNJUDGED)
PASSES = (CONFORMS, RETRIED)


@dataclass
class TxnResult:
    status: str  # committed / failed / unsupported / error / not run
    cls: str | None = None  # ErrorClass value, for failed / error
    raw: str = ""
    version: int | None = None  # committed version, from the log
    # The snapshot its commit says it read (commitInfo.readVersion), else the
    # one the schedule put it on; the backend sets only the latter, and
    # matrix.observe_read_versions the former, for every engine alike.
    read_version: int | None = None
    # The snapshot the schedule put it on (its first attempt's): a pinned
    # table object, or the version before the one its held request was for.
    scheduled_read_version: int | None = None
    read_version_source: str = ""

    @property
    def claim(self) -> str | None:
        try:
            return ErrorClass(self.cls).claim if self.cls else None
        except ValueError:
            return None

    def label(self) -> str:
        if self.status == FAILED:
            return f"failed {self.claim or self.cls}"
        return self.status


@dataclass
class Observation:
    winner: TxnResult
    loser: TxnResult
    controlled: bool
    control_note: str = ""
    # What the winner's commit did, from the log: the E-list's class for a
    # conflict depends on it.
    winner_added_files: int = 0
    winner_removed_files: int = 0
    winner_changed_metadata: bool = False
    table: str | None = None
    seconds: float = 0.0
    # Post-cell checks (runner): a committed table no allowed serial order
    # gives, and the serializability checker's anomalies.
    data_violation: str | None = None
    checker_anomalies: list[str] = field(default_factory=list)
    checker_verdict: str | None = None
    checker_note: str = ""  # the checker's explanation when it could not judge
    # The isolation level the cell is judged at (spec C13): the one the
    # table carried at v0, else the one the loser's or winner's commitInfo
    # recorded, else the engine's default; and where it came from.
    level: str | None = None
    level_source: str | None = None
    # Why the loser's commit is a retry (empty if it is none): its schedule,
    # its commit's readVersion and txnId, and the engine's own log lines.
    retry: list[str] = field(default_factory=list)
    # What the loser's engine logged about its commit attempts during the
    # cell (delta-spark: its JVM's OptimisticTransaction lines).
    loser_engine_log: list[str] = field(default_factory=list)

    @property
    def loser_retried(self) -> bool:
        """The schedule put the loser on a snapshot without the winner's
        commit, and its one commit, right after the winner's, is a new
        transaction's that read a snapshot holding it: the attempt from the
        schedule's snapshot left no commit, and the engine retried it. Only a
        commit's own readVersion says so; an assumed one never does."""
        lo, w = self.loser, self.winner
        return (
            lo.status == COMMITTED
            and w.version is not None
            and lo.version == w.version + 1
            and lo.read_version is not None
            and lo.scheduled_read_version is not None
            and lo.scheduled_read_version < w.version <= lo.read_version
            and lo.read_version_source.startswith(COMMIT_READ_VERSION)
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Observation:
        d = dict(d)
        d["winner"] = TxnResult(**d["winner"])
        d["loser"] = TxnResult(**d["loser"])
        return cls(**d)

    def observed(self) -> str:
        if UNSUPPORTED in (self.winner.status, self.loser.status):
            return "unsupported"
        if not self.controlled:
            return "uncontrolled"
        if self.winner.status != COMMITTED:
            return f"winner {self.winner.label()}"
        if self.loser_retried:
            return f"{COMMITTED} (retried)"
        return self.loser.label()


def allowed_classes(cell: Cell, exp: Expectation, obs: Observation) -> frozenset[str]:
    """The E-claims a conflict of this cell may carry: the claim's own class,
    else the class the E-list gives for what the winner did: E1 it added
    files, E2 it removed a file the loser read, E3 it removed a file the
    loser also removes, E4 it changed metadata."""
    if exp.classes is not None:
        return exp.classes
    out = set()
    if obs.winner_added_files:
        out.add("E1")
    if obs.winner_removed_files:
        out.add("E2")
        if cell.loser in REMOVES_FILES:
            out.add("E3")
    if obs.winner_changed_metadata:
        out.add("E4")
    return frozenset(out)


def judge(cell: Cell, exp: Expectation, obs: Observation) -> tuple[str, str]:
    """(verdict, why)."""
    verdict, why = _judge(cell, exp, obs)
    if verdict in PASSES and obs.checker_verdict == "unknown":
        # The outcome is as the spec says, but whether the committed table is
        # right is not known: no pass on data the harness could not judge.
        return UNJUDGED, f"the serializability checker could not judge the table: {obs.checker_note[:300]}"
    return verdict, why


def _judge(cell: Cell, exp: Expectation, obs: Observation) -> tuple[str, str]:
    if obs.observed() == "unsupported":
        which = obs.winner if obs.winner.status == UNSUPPORTED else obs.loser
        return V_UNSUPPORTED, which.raw[:200]
    if not obs.controlled:
        return UNCONTROLLED, obs.control_note
    if obs.winner.status != COMMITTED:
        return V_ERROR, f"the winner did not commit: {obs.winner.label()} {obs.winner.raw[:200]}"
    if obs.data_violation or obs.checker_anomalies:
        why = "; ".join(filter(None, [obs.data_violation, *obs.checker_anomalies]))
        return SAFETY, why
    lo = obs.loser
    if lo.status == NOOP:
        if cell.loser not in COMPACTION:
            return V_ERROR, "the loser reported success but committed nothing, and only a compaction may"
        if exp.outcome is Outcome.MUST_CONFLICT:
            return EXCEPTION_CLASS, (
                f"{exp.claim}: completed as a no-op where the spec requires a conflict "
                f"({'/'.join(sorted(exp.classes or ())) or 'a class of the E-list'})"
            )
        return CONFORMS, ""
    if lo.status == COMMITTED:
        if obs.loser_retried:
            return RETRIED, _retried_why(exp, obs)
        if exp.outcome is Outcome.MUST_CONFLICT:
            why = f"the loser committed at version {lo.version} {_snapshot(obs)}, where a conflict is required"
            return SAFETY, f"{exp.claim}: {why}"
        return CONFORMS, ""
    if lo.status == ERROR:
        return V_ERROR, f"the loser failed with no conflict: {lo.raw[:200]}"
    if exp.outcome is Outcome.MUST_COMMIT:
        return AVAILABILITY, f"{exp.claim}: cannot conflict, but the loser failed with {lo.claim or lo.cls}"
    allowed = allowed_classes(cell, exp, obs)
    if lo.claim not in allowed:
        return EXCEPTION_CLASS, (
            f"{exp.claim}: conflict reported as {lo.claim or lo.cls}; the E-list gives "
            f"{'/'.join(sorted(allowed)) or 'no class'} for what the winner did"
        )
    return CONFORMS, ""


def _snapshot(obs: Observation) -> str:
    lo, w = obs.loser, obs.winner.version
    if lo.read_version is None:
        return "(its read version is not known)"
    read = f"from version {lo.read_version} ({lo.read_version_source})"
    if w is not None and lo.read_version < w:
        return f"{read}, a snapshot without the winner's commit (version {w})"
    return f"{read}, and nothing shows that an attempt on an earlier snapshot was refused"


def _retried_why(exp: Expectation, obs: Observation) -> str:
    lo = obs.loser
    what = {
        Outcome.MUST_CONFLICT: "the conflict the claim requires happened, and the retry is no concurrent write",
        Outcome.CAN_CONFLICT: "the spec allows the conflict",
        Outcome.MUST_COMMIT: "the spec says they cannot conflict; the engine's retry kept the statement from failing",
    }[exp.outcome]
    return (
        f"{exp.claim}: the loser's attempt on version {lo.scheduled_read_version} left no commit; the engine "
        f"committed it at version {lo.version} as a new transaction that read version {lo.read_version}, which "
        f"holds the winner's commit ({obs.winner.version}): {what}; the table and the checker judge the retry as "
        "serial after the winner"
    )
