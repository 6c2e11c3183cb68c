"""A cell's observation and its verdict against the spec's expectation.

Verdicts: conforms; deviates-safety (committed where the spec requires a
conflict, or a committed table no allowed serial order produces);
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

CONFORMS = "conforms"
SAFETY = "deviates-safety"
AVAILABILITY = "deviates-availability"
EXCEPTION_CLASS = "deviates-exception-class"
V_UNSUPPORTED = "unsupported"
UNCONTROLLED = "uncontrolled"
V_ERROR = "error"
UNJUDGED = "unjudged"
VERDICTS = (CONFORMS, SAFETY, AVAILABILITY, EXCEPTION_CLASS, V_UNSUPPORTED, UNCONTROLLED, V_ERROR, UNJUDGED)


@dataclass
class TxnResult:
    status: str  # committed / failed / unsupported / error / not run
    cls: str | None = None  # ErrorClass value, for failed / error
    raw: str = ""
    version: int | None = None  # committed version, from the log
    read_version: int | None = None  # the snapshot the op ran on

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
    if verdict == CONFORMS and obs.checker_verdict == "unknown":
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
        if exp.outcome is Outcome.MUST_CONFLICT:
            return SAFETY, f"{exp.claim}: the loser committed at version {lo.version} where a conflict is required"
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
