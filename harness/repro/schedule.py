"""A reproduction schedule: the transactions an anomaly names, the table
state they read, and the order their snapshots and commits happened in.

Positions are the original run's table versions. A transaction's snapshot is
taken once every replayed commit that came before its read version is in;
it commits (or tries to) once the commits before its own version are in. A
replay holds fewer commits than the original run, so it takes each snapshot
and each commit at the same place relative to the commits it kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

OK, FAIL, INFO = "ok", "fail", "info"


@dataclass(frozen=True)
class Txn:
    """One op of the original run, as the replay re-executes it."""

    op_id: str
    f: str
    value: Any  # the op's value as invoked (what the workload's invoke takes)
    outcome: str  # ok / fail / info, as recorded
    read_version: int  # the version its snapshot was at
    commit_version: int | None = None  # the version it committed (from the log)
    # The latest version when a transaction that did not commit tried to.
    attempt_after: int | None = None
    error: str | None = None  # the recorded error class of a failed op
    # An acknowledged commit the log does not hold (replaced, under a fault):
    # the version the engine reported, where it committed before its owner.
    lost_version: int | None = None

    @property
    def committed(self) -> bool:
        return self.commit_version is not None

    @property
    def pin_key(self) -> tuple[int, int]:
        return (self.read_version, 0)

    @property
    def commit_key(self) -> tuple[int, int]:
        if self.commit_version is not None:
            return (self.commit_version - 1, 2)
        if self.lost_version is not None:
            return (max(self.lost_version - 1, self.read_version), 1)
        after = self.attempt_after if self.attempt_after is not None else self.read_version
        return (max(after, self.read_version), 1)

    def describe(self) -> str:
        what = {OK: "committed", FAIL: "failed", INFO: "indeterminate"}.get(self.outcome, self.outcome)
        at = f" v{self.commit_version}" if self.commit_version is not None else ""
        if self.lost_version is not None:
            at = f" v{self.lost_version} (acknowledged; not in the log)"
        err = f" ({self.error})" if self.error else ""
        return f"{self.op_id} {self.f} {_short(self.value)} (in the run: read v{self.read_version}, {what}{at}{err})"


def _short(value: Any, limit: int = 120) -> str:
    import json

    text = json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


PIN, COMMIT = "pin", "commit"


class NotReplayable(Exception):
    """The harness cannot control this schedule (its engine, or its shape) yet."""


@dataclass
class Schedule:
    """Everything a replay needs, JSON-serializable (repro/schedule.json)."""

    engine: str
    workload: str
    isolation: str | None  # the level the table carried (spec C13)
    table: dict[str, Any]  # the TableSpec as spec.json records it
    declaration: dict[str, Any]  # the create-table op's value
    base_version: int  # the original version the setup rebuilds
    setup: list[list[list[Any]]]  # one list of rows (column order) per setup commit: the live files at base
    txns: list[Txn]
    anomaly: dict[str, Any]  # checker, kind, claim, ops, versions, explanation
    seed: int | None = None
    engine_versions: dict[str, str] = field(default_factory=dict)
    # A proxy fault active while the transactions ran (nemesis, kind, target,
    # params): the replay re-applies it on S3 behind the fault proxy.
    fault: dict[str, Any] | None = None

    @property
    def rows(self) -> int:
        return sum(len(f) for f in self.setup)

    def size(self) -> tuple[int, int, int]:
        """What the shrinker makes smaller: transactions, setup files, rows."""
        return (len(self.txns), len(self.setup), self.rows)

    def events(self) -> list[tuple[str, Txn]]:
        """Snapshots and commits in the order the original run had them."""
        keyed = [(t.pin_key, i, PIN, t) for i, t in enumerate(self.txns)]
        keyed += [(t.commit_key, i, COMMIT, t) for i, t in enumerate(self.txns) if t.f != "read"]
        keyed.sort(key=lambda e: (e[0], e[1], e[2] == COMMIT))
        return [(kind, t) for _, _, kind, t in keyed]

    def with_txns(self, txns: list[Txn]) -> Schedule:
        return replace(self, txns=list(txns))

    def without_fault(self) -> Schedule:
        return replace(self, fault=None)

    def with_setup(self, setup: list[list[list[Any]]]) -> Schedule:
        return replace(self, setup=[list(f) for f in setup])

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Schedule:
        d = dict(d)
        d["txns"] = [Txn(**t) for t in d.get("txns", [])]
        return cls(**d)

    def _level(self) -> str:
        if self.isolation:
            return self.isolation
        default = self.declaration.get("default_isolation")
        return f"{default}, the engine's default," if default else "the engine's default"

    def describe(self) -> list[str]:
        """The schedule as numbered steps a person can follow."""
        lines = [
            f"create the table ({self._level()} isolation), "
            f"then {len(self.setup)} setup commit(s) of {self.rows} row(s) in all"
        ]
        if self.fault:
            lines.append(f"fault on: {describe_fault(self.fault)}")
        for kind, t in self.events():
            if kind == PIN:
                lines.append(f"{t.op_id} takes its snapshot ({t.f})")
            else:
                lines.append(f"{t.op_id} commits: {t.describe()}")
        return lines


def describe_fault(fault: dict[str, Any]) -> str:
    target = ", ".join(f"{k}={v}" for k, v in (fault.get("target") or {}).items()) or "every request"
    params = ", ".join(f"{k}={v}" for k, v in (fault.get("params") or {}).items())
    return f"{fault.get('kind')} (nemesis {fault.get('nemesis')}) on {target}" + (f" ({params})" if params else "")
