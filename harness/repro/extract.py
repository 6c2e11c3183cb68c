"""Read a run folder into the schedule of one anomaly: the transactions it
names (its ops, and the ops that committed the versions it names), what each
read and when each committed (from the log; the history where the log is
silent), and the rows live at the earliest snapshot among them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from checkers import list_append
from checkers.facts import commit_op_id, table_facts
from harness.core.errors import HarnessError
from harness.core.history import History, Op, load_history
from harness.deltalog import read_log
from harness.deltalog.coordinated import load_coordinator
from harness.repro.schedule import OK, Schedule, Txn

# Transactions one replay runs at most: a schedule is re-run for every
# shrinking step, so it stays a few dozen commits.
MAX_TXNS = 60


@dataclass(frozen=True)
class AnomalyRef:
    """An anomaly of results.json, numbered as `reproduce --anomaly` counts."""

    number: int
    checker: str
    anomaly: dict[str, Any]

    def label(self) -> str:
        a = self.anomaly
        claim = f", spec {a['claim']}" if a.get("claim") else ""
        return f"#{self.number} {self.checker}: {a.get('kind')}{claim} (ops {', '.join(a.get('ops') or []) or '-'})"


def load_json(path: Path, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise HarnessError(f"{path} is missing: {what}") from None
    except (OSError, ValueError) as e:
        raise HarnessError(f"{path} unreadable: {e}") from None
    if not isinstance(doc, dict):
        raise HarnessError(f"{path} is not a JSON object")
    return doc


def anomalies(results: dict[str, Any]) -> list[AnomalyRef]:
    """Every anomaly of every checker, numbered from 1 in results.json order."""
    out: list[AnomalyRef] = []
    for c in results.get("checkers") or []:
        for a in c.get("anomalies") or []:
            out.append(AnomalyRef(len(out) + 1, str(c.get("checker")), a))
    return out


def op_versions(log: Any) -> dict[str, int]:
    """op id -> the version it committed, from commitInfo (the first, where an
    op is split over several commits)."""
    out: dict[str, int] = {}
    for v in log.versions:
        op_id = commit_op_id(log.commits[v].commit_info)
        if op_id is not None:
            out.setdefault(op_id, v)
    return out


class _Clock:
    """The latest version committed before a moment of the history: what a
    snapshot taken then saw, where the log does not say."""

    def __init__(self, history: History, committed: dict[str, int]):
        marks = []
        for op in history.ops():
            if op.completion is None:
                continue
            v = committed.get(op.id)
            if v is None and op.f == "create-table" and op.type == OK:
                v = op.version if op.version is not None else 0
            if v is not None:
                marks.append((op.completion.time, v))
        marks.sort()
        self.marks = marks

    def before(self, t: int) -> int:
        latest = 0
        for time, v in self.marks:
            if time >= t:
                break
            latest = max(latest, v)
        return latest


class ListReads:
    """What each list-append transaction read, from its rows: an element's
    `pos` and `prev_writer` are its key's list as read. For a commit that
    records no snapshot (Sail), the versions at which all its reads held are
    the snapshots it can have read; the list-append checker's own spans."""

    def __init__(self, log: Any):
        self.log = log
        self.txns: dict[str, Any] | None = None  # read on first use: only Sail's commits need it

    def read_version(self, op_id: str, focus_key: Any = None) -> int | None:
        """The latest version at which every read of `op_id` held; where no
        one version holds them all (a statement that read no one snapshot),
        the latest at which its read of `focus_key` held: the key of the
        anomaly, whose replay needs that read (None: no list rows)."""
        if self.txns is None:
            self.txns = list_append.txn_reads(list_append.elements(self.log))
        txn = self.txns.get(op_id)
        if not txn:
            return None
        spans = list_append.common_spans(txn) or [s for e, spans in txn if e.k == focus_key for s in spans]
        return max(0, spans[-1][1] - 1) if spans else None


def _txn(op: Op, log: Any, committed: dict[str, int], clock: _Clock, lists: ListReads, focus_key: Any = None) -> Txn:
    version = committed.get(op.id)
    commit = log.commits.get(version) if version is not None else None
    read_version = commit.read_version if commit is not None and commit.read_version is not None else None
    if read_version is None and version is not None:
        read_version = lists.read_version(op.id, focus_key)
    told = op.value.get("read_version") if isinstance(op.value, dict) else None
    if read_version is None and version is not None and isinstance(told, int):
        # The client's own word (an overwrite reads at one snapshot and
        # commits from it), where the commit records none.
        read_version = told
    if read_version is None and version is not None:
        # A commit that records no snapshot (a blind append): it committed on
        # the version before its own, whatever it started from (delta-rs
        # retries an append on a newer snapshot), so that is what it read.
        read_version = version - 1
    if read_version is None:
        read_version = op.version if op.f == "read" and op.version is not None else clock.before(op.start)
    end = op.end if op.end is not None else (clock.marks[-1][0] + 1 if clock.marks else op.start)
    return Txn(
        op_id=op.id,
        f=op.f,
        value=op.invoke.value,
        outcome=op.type,
        read_version=int(read_version),
        commit_version=version,
        attempt_after=None if version is not None else max(clock.before(end), int(read_version)),
        error=op.error.cls.value if op.error is not None else None,
        lost_version=op.version if version is None and op.type == OK and op.f != "read" else None,
    )


def _faults(history: History) -> list[tuple[int, int, dict[str, Any]]]:
    """(start, end, fault) of every proxy fault the nemesis applied."""
    open_: dict[int, tuple[int, dict[str, Any]]] = {}
    out = []
    last = history.events[-1].time if history.events else 0
    for e in history.events:
        if e.process != "nemesis" or e.type != OK or not isinstance(e.value, dict):
            continue
        v = e.value
        if e.f.startswith("start-") and "kind" in v and "rule" in v:
            fault = {"nemesis": e.f.removeprefix("start-"), "kind": v["kind"], "target": v.get("target") or {}}
            open_[v["rule"]] = (e.time, {**fault, "params": v.get("params") or {}})
        elif e.f.startswith("stop-") and v.get("rule") in open_:
            start, fault = open_.pop(v["rule"])
            out.append((start, e.time, fault))
    out += [(start, last, fault) for start, fault in open_.values()]
    return out


def _fault_during(history: History, ops: list[Op]) -> dict[str, Any] | None:
    """The fault active while the transactions ran, if any."""
    for start, end, fault in _faults(history):
        for op in ops:
            op_end = op.end if op.end is not None else end
            if op.start <= end and op_end >= start:
                return fault
    return None


def extract(run_dir: str | Path, number: int = 1) -> tuple[Schedule, AnomalyRef, list[AnomalyRef]]:
    """The schedule of anomaly `number` of a checked run folder."""
    run_dir = Path(run_dir)
    results = load_json(run_dir / "results.json", "check the run first (delta-jepsen check RUN_DIR)")
    spec = load_json(run_dir / "spec.json", "not a run folder")
    refs = anomalies(results)
    if not refs:
        raise NothingToReproduce(f"{run_dir}: verdict {results.get('verdict')}, no anomaly to reproduce")
    if not 1 <= number <= len(refs):
        raise HarnessError(f"--anomaly {number}: the run has anomalies 1..{len(refs)}")
    ref = refs[number - 1]
    history = load_history(run_dir / "history.jsonl")
    log = read_log(str(run_dir / "table"), coordinator=load_coordinator(run_dir))
    committed = op_versions(log)
    facts = table_facts(log)
    for op in history.client_ops():
        if op.id not in committed and (v := facts.commit_version(op.id)) is not None:
            committed[op.id] = v  # an engine that names no op in commitInfo (Sail): its rows do
    clock = _Clock(history, committed)
    lists = ListReads(log)
    focus_key = (ref.anomaly.get("details") or {}).get("key")
    ops = {op.id: op for op in history.client_ops()}
    names = list(ref.anomaly.get("ops") or [])
    by_version = {v: o for o, v in committed.items()}
    names += [by_version[v] for v in ref.anomaly.get("versions") or [] if v in by_version]
    # A party that is no op of the history (a commit whose writer the log
    # does not name, say one an engine made unasked) cannot be replayed, and
    # a replay of the others alone is not the anomaly.
    unmade = [n for n in dict.fromkeys(names) if n not in ops and n not in committed]
    if unmade:
        raise NothingToReplay(
            f"anomaly {ref.label()} names {', '.join(unmade)}, a commit the log ties to no client op of the history: "
            "a replay cannot make it"
        )
    txns = []
    named = [ops[n] for n in dict.fromkeys(names) if n in ops]
    for op in named:
        txns.append(_txn(op, log, committed, clock, lists, focus_key))
    if txns:
        # The commits a named transaction saw that the earliest snapshot did
        # not hold (say, the append whose file a later OPTIMIZE compacted),
        # and those that committed between a named transaction's snapshot and
        # its commit (the race it won or lost): replayed too, so each snapshot
        # holds what it held in the run and each commit meets what it met.
        # The shrinker drops those that do not matter.
        base = min(t.read_version for t in txns)
        seen = {t.op_id for t in txns}
        saw = range(base + 1, max(t.read_version for t in txns) + 1)
        raced = {v for t in txns if t.commit_version is not None for v in range(t.read_version + 1, t.commit_version)}
        for v in sorted(raced.union(saw)):
            name = by_version.get(v)
            if name is not None and name not in seen and name in ops and len(txns) < MAX_TXNS:
                seen.add(name)
                txns.append(_txn(ops[name], log, committed, clock, lists))
    if not txns:
        raise NothingToReplay(f"anomaly {ref.label()} names no client op of the history: no transaction to replay")
    base = min(t.read_version for t in txns)
    table = spec.get("table") or {}
    columns = [c[0] for c in table.get("columns") or []]
    setup = []
    for add in log.live_files(base).values():
        rows = log.add_rows(add)
        cols = [rows.column(c).to_pylist() if c in rows.column_names else [None] * rows.num_rows for c in columns]
        setup.append([list(r) for r in zip(*cols, strict=True)])
    run_spec = spec.get("spec") or {}
    isolation = (log.configuration_at(base) or {}).get("delta.isolationLevel") or run_spec.get("isolation")
    schedule = Schedule(
        engine=str(run_spec.get("engine") or spec.get("engine")),
        workload=str(run_spec.get("workload")),
        isolation=isolation,
        table=table,
        declaration=history.table_declaration().to_json(),
        base_version=base,
        setup=[f for f in setup if f],
        txns=sorted(txns, key=lambda t: (t.read_version, t.op_id)),
        anomaly={"checker": ref.checker, **{k: ref.anomaly.get(k) for k in ("kind", "claim", "ops", "versions")}},
        seed=run_spec.get("seed"),
        engine_versions=dict(spec.get("versions") or {}),
        fault=_fault_during(history, named),
    )
    schedule.anomaly["explanation"] = ref.anomaly.get("explanation")
    return schedule, ref, refs


class NothingToReproduce(HarnessError):
    """A valid run (or one whose checkers found nothing): exit 0."""


class NothingToReplay(Exception):
    """An anomaly of the log alone (no op named): not reproduced (exit 3)."""
