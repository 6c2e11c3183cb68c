"""create-race (spec E6, with C4, C6, C7, C12): several writers create the
same table at an empty path at once; one must win and the others fail.

Evidence per round: the create/append/read ops of the history (grouped by
their `table`, e.g. "races/r3") and that table's own log, which
harness.check.pipeline loads into ``log.related``. Commits name their op through
commitInfo (`dj.op` for delta-rs, `userMetadata` for Spark writers).

Safety anomalies: a round's log that is not one sane table history
(`race-log-corrupt`, C4), two or more creates acknowledged
(`multiple-creators`, E6), a commit after version 0 that creates the table
again (`table-recreated`, E6), a single acknowledged create that no commit
names (`phantom-create`, E6/C7), an acknowledged create with no table at all
(`lost-create`, C7), a failed op whose commit is in the log
(`failed-but-committed`, C6), an acknowledged append whose row is missing
(`lost-append`, C7), a read of a state no version had
(`read-state-never-existed`, C12).

Not safety: the class a loser failed with. E6 names ProtocolChangedException;
a definite "table already exists" is the loser seeing the winner's table
before it tried to commit, also correct. Any other class is reported as an
exception-class finding (stats and explanation), not as an anomaly.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.log_sanity import _BROKEN as BROKEN_LOG_PROBLEMS
from harness.core.history import FAIL, OK, ErrorClass, History, Op
from harness.deltalog import Commit, TransactionLog

NAME = "create-race"
CREATE, APPEND, READ = "create", "append", "read"
# Creates whose invocations lie within this window count as racing.
RACE_WINDOW_S = 0.1
# How an engine says a table already exists (delta-rs, Sail, delta-spark).
_EXISTS_RE = re.compile(r"already exists|DELTA_PATH_EXISTS|TABLE_OR_VIEW_ALREADY_EXISTS|PATH_ALREADY_EXISTS", re.I)
E6_CLASS = "ProtocolChangedException (E6)"
EXISTS_CLASS = "table already exists (definite)"


def committer(commit: Commit) -> str | None:
    """The op id a commit names, if its engine records one."""
    info = commit.commit_info or {}
    op = info.get("dj.op") or info.get("userMetadata")
    return str(op) if op else None


def loser_class(op: Op) -> str:
    err = op.error
    if err is None:
        return "no error recorded"
    if err.cls is ErrorClass.PROTOCOL_CHANGED:
        return E6_CLASS
    if err.cls is ErrorClass.NOT_A_CONFLICT and op.type == FAIL and _EXISTS_RE.search(err.raw):
        return EXISTS_CLASS
    return err.cls.value


@dataclass
class _Round:
    table: str
    number: int | None = None
    ops: list[Op] = field(default_factory=list)

    def of(self, f: str, type: str | None = None) -> list[Op]:
        return [o for o in self.ops if o.f == f and (type is None or o.type == type)]


def _round_number(table: str) -> int | None:
    m = re.search(r"(\d+)$", table)
    return int(m[1]) if m else None


def _rounds(history: History, log: TransactionLog) -> list[_Round]:
    rounds: dict[str, _Round] = {}
    for op in history.client_ops():
        v = op.invoke.value
        if op.f in (CREATE, APPEND, READ) and isinstance(v, dict) and isinstance(v.get("table"), str):
            rounds.setdefault(v["table"], _Round(v["table"], v.get("round"))).ops.append(op)
    for table in log.related:
        rounds.setdefault(table, _Round(table, _round_number(table)))
    return sorted(rounds.values(), key=lambda r: (r.number if r.number is not None else -1, r.table))


def _table_id(commit: Commit) -> str | None:
    meta = commit.metadata
    return meta.get("id") if meta else None


def _is_creation(commit: Commit, first_id: str | None) -> bool:
    """A commit that creates the table: its operation says so (Sail's losing
    creates commit "CREATE TABLE" with no metaData at all), or it installs a
    table id other than version 0's."""
    if (commit.operation or "").upper().startswith("CREATE"):
        return True
    return commit.metadata is not None and first_id is not None and _table_id(commit) != first_id


def _creation_text(commit: Commit) -> str:
    who = committer(commit) or "an unnamed op"
    if commit.metadata is None:
        return f"version {commit.version} by {who}, recorded as {commit.operation} but with no metaData action"
    return f"version {commit.version} by {who}, table id {_table_id(commit)}"


def _ids(log: TransactionLog, version: int) -> frozenset[int]:
    return frozenset(int(i) for i in log.rows_at(version, ["id"]).column("id").to_pylist())


def _spread_ms(ops: list[Op]) -> float | None:
    walls = [o.invoke.wall for o in ops if o.invoke.wall is not None]
    return round((max(walls) - min(walls)) * 1000, 1) if len(walls) >= 2 else None


def _check_round(r: _Round, race: TransactionLog | None) -> tuple[list[Anomaly], list[str], dict[str, Any]]:
    """Anomalies, reasons for unknown, and a summary of one round."""
    anomalies: list[Anomaly] = []
    unknown: list[str] = []
    creates = r.of(CREATE)
    ok_creates = r.of(CREATE, OK)
    summary: dict[str, Any] = {
        "table": r.table,
        "round": r.number,
        "creates": len(creates),
        "ok": len(ok_creates),
        "fail": len(r.of(CREATE, FAIL)),
        "info": len(creates) - len(ok_creates) - len(r.of(CREATE, FAIL)),
        "spread_ms": _spread_ms(creates),
        "winners": [o.id for o in ok_creates],
        "losers": dict(Counter(loser_class(o) for o in r.of(CREATE, FAIL))),
    }
    where = f"Round table {r.table}"
    if race is None or (not race.versions and all(p.kind == "empty-log" for p in race.problems)):
        summary["versions"] = 0
        if ok_creates:
            anomalies.append(
                Anomaly(
                    "lost-create",
                    "C7",
                    f"{where}: create op(s) {', '.join(o.id for o in ok_creates)} were acknowledged, but the table has "
                    "no transaction log at all: the acknowledged creation is not durable.",
                    ops=[o.id for o in ok_creates],
                )
            )
        for op in r.of(APPEND, OK):
            anomalies.append(
                Anomaly(
                    "lost-append",
                    "C7",
                    f"{where}: append {op.id} was acknowledged, but the table has no log.",
                    ops=[op.id],
                    rows=list(op.invoke.value.get("ids", [])),
                )
            )
        return anomalies, unknown, summary

    summary["versions"] = len(race.versions)
    broken = [p for p in race.problems if p.kind in BROKEN_LOG_PROBLEMS]
    for p in race.problems:
        if p.kind not in BROKEN_LOG_PROBLEMS:
            unknown.append(f"{r.table}: {p.kind} at version {p.version}: {p.detail}")
    first = race.commits.get(0)
    if first is None and not broken:
        broken_detail = "there is no version 0"
    elif first is not None and (first.protocol is None or first.metadata is None):
        broken_detail = "version 0 lacks " + " and ".join(
            k for k, a in (("protocol", first.protocol), ("metaData", first.metadata)) if a is None
        )
    else:
        broken_detail = None
    if broken or broken_detail:
        details = [f"{p.kind}: {p.detail}" for p in broken] + ([broken_detail] if broken_detail else [])
        anomalies.append(
            Anomaly(
                "race-log-corrupt",
                "C4",
                f"{where}: after the create race the log is not one sane table history: {'; '.join(details[:3])}.",
                versions=sorted({p.version for p in broken if p.version is not None}),
            )
        )

    by_op: dict[str, list[int]] = defaultdict(list)
    for v in race.versions:
        op_id = committer(race.commits[v])
        if op_id:
            by_op[op_id].append(v)
    attributed = bool(by_op)
    first_id = _table_id(first) if first is not None else None
    creations = [v for v in race.versions if _is_creation(race.commits[v], first_id)]
    summary["creation_versions"] = creations
    summary["version0_by"] = committer(first) if first is not None else None

    def describe(op: Op) -> str:
        mine = by_op.get(op.id)
        if mine:
            what = f"committed version(s) {', '.join(map(str, mine))}"
            ids = {i for v in mine if (i := _table_id(race.commits[v])) is not None}
            if ids and ids != {first_id}:
                what += f" with table id {', '.join(sorted(ids))} (version 0 has {first_id})"
        elif attributed:
            what = (
                "is named by no commit: it committed nothing, or its version-0 file was overwritten "
                f"(version 0 names {summary['version0_by']})"
            )
        else:
            what = "(the log names no ops)"
        if op.version is not None:
            what += f"; the engine reported version {op.version}"
        return f"{op.id} {what}"

    if len(ok_creates) >= 2:
        anomalies.append(
            Anomaly(
                "multiple-creators",
                "E6",
                f"{where}: {len(ok_creates)} writers creating the table at an empty path at once were all acknowledged "
                f"(error-if-exists): {'; '.join(describe(o) for o in ok_creates)}. Spec E6: all but one must fail "
                "(ProtocolChangedException); each of these writers believes it created the table.",
                ops=[o.id for o in ok_creates],
                versions=creations,
                details={
                    "table": r.table,
                    "committed": {o.id: by_op.get(o.id, []) for o in ok_creates},
                    "reported_versions": {o.id: o.version for o in ok_creates},
                },
            )
        )
    elif len(ok_creates) == 1 and first is not None and attributed and ok_creates[0].id not in by_op:
        op = ok_creates[0]
        anomalies.append(
            Anomaly(
                "phantom-create",
                "E6",
                f"{where}: create {describe(op)}. An acknowledged error-if-exists create must have created the table "
                "(else fail, spec E6); if its commit was overwritten, that is a lost commit (C7).",
                ops=[op.id],
                versions=[0],
            )
        )
    recreations = [v for v in creations if v > 0]
    if recreations:
        anomalies.append(
            Anomaly(
                "table-recreated",
                "E6",
                f"{where}: the table, created at version 0 (by {summary['version0_by'] or 'an unnamed op'}, table id "
                f"{first_id}), is created again: {'; '.join(_creation_text(race.commits[v]) for v in recreations)}. "
                "A create that lost the race committed on top of the winner's table instead of failing (spec E6).",
                ops=[c for v in recreations if (c := committer(race.commits[v]))],
                versions=recreations,
            )
        )

    for op in r.ops:
        if op.type == FAIL and op.f in (CREATE, APPEND) and by_op.get(op.id):
            anomalies.append(
                Anomaly(
                    "failed-but-committed",
                    "C6",
                    f"{where}: {op.f} {op.id} failed ({op.error.cls.value if op.error else 'no error'}), so it "
                    f"definitely did not apply, yet commit(s) {', '.join(map(str, by_op[op.id]))} name it.",
                    ops=[op.id],
                    versions=by_op[op.id],
                )
            )

    latest = race.latest_version
    if latest is None or not race.is_reconstructible(latest):
        if r.of(APPEND, OK) or r.of(READ, OK):
            unknown.append(f"{r.table}: the latest state cannot be reconstructed")
        return anomalies, unknown, summary
    final = _ids(race, latest)
    summary["rows"] = len(final)
    for op in r.of(APPEND, OK):
        missing = [i for i in op.invoke.value.get("ids", []) if i not in final]
        if missing:
            anomalies.append(
                Anomaly(
                    "lost-append",
                    "C7",
                    f"{where}: append {op.id} was acknowledged, but its row(s) {missing} are not in the table's latest "
                    f"version {latest}.",
                    ops=[op.id],
                    versions=[latest],
                    rows=missing,
                )
            )
    reads = r.of(READ, OK)
    if reads:
        states = {_ids(race, v) for v in race.versions if race.is_reconstructible(v)}
        for op in reads:
            got = frozenset(int(i) for i in (op.value or {}).get("ids", []))
            if got not in states:
                anomalies.append(
                    Anomaly(
                        "read-state-never-existed",
                        "C12",
                        f"{where}: read {op.id} returned {len(got)} row(s) {sorted(got)[:10]}, which no version "
                        f"0..{latest} of the table held.",
                        ops=[op.id],
                        rows=sorted(got),
                    )
                )
    return anomalies, unknown, summary


def check(history: History, log: TransactionLog) -> CheckResult:
    rounds = _rounds(history, log)
    if not any(r.of(CREATE) for r in rounds):
        return CheckResult(
            NAME, Verdict.UNKNOWN, "No create-race round ran, so there is nothing to judge.", stats={"rounds": 0}
        )
    anomalies: list[Anomaly] = []
    unknown: list[str] = []
    summaries = []
    for r in rounds:
        a, u, s = _check_round(r, log.related.get(r.table))
        anomalies += a
        unknown += u
        summaries.append(s)
    losers: Counter[str] = Counter()
    for s in summaries:
        losers.update(s["losers"])
    raced = [
        s
        for s in summaries
        if s["creates"] >= 2 and s["spread_ms"] is not None and s["spread_ms"] <= RACE_WINDOW_S * 1000
    ]
    no_winner = [s["table"] for s in summaries if s["creates"] and not s["ok"] and not s.get("versions")]
    findings = []
    other = {k: n for k, n in losers.items() if k not in (E6_CLASS, EXISTS_CLASS)}
    if other:
        findings.append(
            "spec E6 names ProtocolChangedException for a writer that loses a create race, but "
            + ", ".join(f"{n} loser(s) failed with {k}" for k, n in sorted(other.items()))
            + " (an exception-class finding, not a safety violation)"
        )
    if no_winner:
        findings.append(
            f"no create won in round(s) {', '.join(no_winner[:5])}: every create failed and no table exists"
        )
    stats = {
        "rounds": len(summaries),
        "raced_rounds": len(raced),
        "race_window_ms": RACE_WINDOW_S * 1000,
        "creates": sum(s["creates"] for s in summaries),
        "ok_creates": sum(s["ok"] for s in summaries),
        "loser_classes": dict(losers),
        "findings": findings,
        "per_round": summaries,
    }
    tail = (" Findings: " + "; ".join(findings) + ".") if findings else ""
    head = (
        f"{len(summaries)} round(s), {len(raced)} with 2+ creates invoked within {RACE_WINDOW_S * 1000:.0f} ms; "
        f"losers: {', '.join(f'{k} x{n}' for k, n in sorted(losers.items())) or 'none'}."
    )
    if anomalies:
        kinds = Counter(a.kind for a in anomalies)
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{head} {len(anomalies)} anomaly(ies): {', '.join(f'{k} x{n}' for k, n in sorted(kinds.items()))}; "
            f"e.g. {anomalies[0].explanation}{tail}",
            anomalies,
            stats,
        )
    if unknown:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"{head} Part of the evidence could not be read: {'; '.join(unknown[:3])}.{tail}",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"{head} Each round's log is one sane table history created once at version 0, at most one create was "
        f"acknowledged, every acknowledged append is present and every read saw a real version.{tail}",
        [],
        stats,
    )
