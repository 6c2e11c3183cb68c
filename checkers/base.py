"""What a checker is: a pure function of (history, transaction log) -> result.

Checkers never import an engine. They see the recorded history
(:mod:`harness.core.history`) and the table's own log (:mod:`harness.deltalog`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from checkers.kinds import kind_of
from harness.core.history import History
from harness.deltalog import TransactionLog


class Verdict(str, Enum):
    """valid, invalid, or unknown (not enough evidence either way)."""

    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"  # not enough evidence either way


def combine(verdicts: list[Verdict]) -> Verdict:
    """The conjunction: any invalid wins, then any unknown."""
    if Verdict.INVALID in verdicts:
        return Verdict.INVALID
    if Verdict.UNKNOWN in verdicts:
        return Verdict.UNKNOWN
    return Verdict.VALID


@dataclass
class Anomaly:
    """One violation, with enough detail for a person to check it by hand."""

    kind: str  # e.g. "lost-write", "partial-op", "duplicate-row"
    claim: str | None  # spec claim it violates, e.g. "C7"
    explanation: str  # one or two sentences, concrete: ops, versions, rows
    ops: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    rows: list[Any] = field(default_factory=list)
    # Checker-specific evidence, e.g. a cycle's edges and its DOT graph.
    details: dict[str, Any] = field(default_factory=dict)
    title: str = field(init=False, default="")  # from checkers/kinds.py

    def __post_init__(self) -> None:
        # The kinds table is the one place a kind's claims are written down.
        self.title = kind_of(self.kind, self.claim).title

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "claim": self.claim,
            "explanation": self.explanation,
            "ops": self.ops,
            "versions": self.versions,
            "rows": self.rows[:50],
            "rows_total": len(self.rows),
            **({"details": self.details} if self.details else {}),
        }


@dataclass
class CheckResult:
    """A checker's verdict on a run, in words, with its anomalies."""

    checker: str
    verdict: Verdict
    explanation: str  # one paragraph for a human
    anomalies: list[Anomaly] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "checker": self.checker,
            "verdict": self.verdict.value,
            "explanation": self.explanation,
            "anomalies": [a.to_json() for a in self.anomalies],
            "stats": self.stats,
        }


def no_versions(checker: str, what: str) -> CheckResult:
    """Unknown, never valid: the log has no readable version to judge `what` by
    (no log at all, say, after a killed harness whose store was in memory)."""
    return CheckResult(checker, Verdict.UNKNOWN, f"The table has no readable versions; {what} cannot be judged.")


class Checker(Protocol):
    name: str

    def __call__(self, history: History, log: TransactionLog) -> CheckResult: ...


CheckerFn = Callable[[History, TransactionLog], CheckResult]
