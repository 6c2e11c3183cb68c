"""What the log says happened to rows, replayed once for all checkers.

Rows are identified by their unique ``id``; every row carries its writer's op
id in ``writer``. From the log we learn, per version, which rows were added
and removed, so each row's lifetime is an interval of versions
``[added, removed)``; a table state is the set of rows alive at a version.
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.core.history import OK, History, Op
from harness.deltalog import TransactionLog

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64: a fixed, well-spread hash of a row id (Python's hash of
    ints is the identity, which would make sums of ids collide)."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _row_key(row_id: Any) -> int:
    if isinstance(row_id, int):
        return row_id
    return int.from_bytes(str(row_id).encode()[:16].ljust(16, b"\0"), "little") ^ len(str(row_id))


@dataclass(frozen=True)
class Fingerprint:
    """An order-independent multiset hash of row ids: adding or removing a row
    updates it in O(1), so every version's state gets one without rebuilding."""

    count: int
    h1: int
    h2: int

    @classmethod
    def of(cls, ids: Iterable[Any]) -> Fingerprint:
        f = cls(0, 0, 0)
        for i in ids:
            f = f.add(i)
        return f

    def add(self, row_id: Any, sign: int = 1) -> Fingerprint:
        k = _row_key(row_id)
        return Fingerprint(
            self.count + sign,
            (self.h1 + sign * _mix(k)) & _MASK,
            (self.h2 + sign * _mix(k ^ 0x5DEECE66D)) & _MASK,
        )


@dataclass
class RowLife:
    id: Any
    writer: str | None
    added: int
    removed: int | None = None  # version whose commit removed it


@dataclass
class TableFacts:
    versions: list[int]
    # All row lifetimes, in version order of addition; a row id appearing in
    # more than one entry was added more than once.
    lives: list[RowLife]
    # op id -> versions at which rows written by that op were added
    writer_versions: dict[str, list[int]] = field(default_factory=dict)
    # op id -> row ids added, per version
    writer_rows: dict[str, dict[int, list[Any]]] = field(default_factory=dict)
    # version -> fingerprint of the table state at that version
    fingerprints: dict[int, Fingerprint] = field(default_factory=dict)
    by_fingerprint: dict[Fingerprint, list[int]] = field(default_factory=dict)
    # version -> op id recorded in commitInfo by engines that can (delta-rs)
    commit_ops: dict[int, str] = field(default_factory=dict)
    # Adds of a data file already live: (version, path, the version that
    # made it live, the writers of its rows). The file stays live once.
    readds: list[tuple[int, str, int, list[str]]] = field(default_factory=list)
    _op_commits: dict[str, int] | None = field(default=None, repr=False)

    @property
    def latest(self) -> int | None:
        return self.versions[-1] if self.versions else None

    def state(self, version: int) -> set[Any]:
        return {r.id for r in self.lives if r.added <= version and (r.removed is None or r.removed > version)}

    def writers_at(self, version: int) -> set[str]:
        """The op(s) a commit is attributed to: writers of its new rows, or
        the op id the engine put in commitInfo."""
        out = {w for w, per_version in self.writer_rows.items() if version in per_version}
        if version in self.commit_ops:
            out.add(self.commit_ops[version])
        return out

    def life_of(self, row_id: Any) -> RowLife | None:
        for life in reversed(self.lives):
            if life.id == row_id:
                return life
        return None

    def version_of(self, op_id: str) -> int | None:
        """The version at which an op's rows first appeared (its commit)."""
        vs = self.writer_versions.get(op_id)
        return vs[0] if vs else None

    def commit_version(self, op_id: str) -> int | None:
        """An op's commit: where its rows first appeared, else the commit
        whose commitInfo names it (a write that adds no rows, e.g. a DELETE)."""
        v = self.version_of(op_id)
        if v is not None:
            return v
        if self._op_commits is None:
            self._op_commits = {}
            for version, op in sorted(self.commit_ops.items(), reverse=True):
                self._op_commits[op] = version  # the earliest wins
        return self._op_commits.get(op_id)


# One replay per log object, for as long as the log lives.
_FACTS: weakref.WeakKeyDictionary[TransactionLog, TableFacts] = weakref.WeakKeyDictionary()


def table_facts(log: TransactionLog) -> TableFacts:
    """Facts of a log, computed once and shared by every checker of a run."""
    cached = _FACTS.get(log)
    if cached is None:
        cached = _FACTS[log] = _replay(log)
    return cached


def commit_op_id(info: dict[str, Any] | None) -> str | None:
    """The op a commit belongs to, where the engine wrote it into commitInfo:
    delta-rs custom metadata ``dj.op``, or Spark's ``userMetadata``."""
    if not info:
        return None
    for key in ("dj.op", "userMetadata"):
        if info.get(key) is not None:
            return str(info[key])
    return None


def _replay(log: TransactionLog) -> TableFacts:
    """Replay the log once: row lifetimes, per-op versions, per-version fingerprints."""
    lives: list[RowLife] = []
    alive: dict[str, list[RowLife]] = {}  # data file path -> lives of its rows
    live_since: dict[str, int] = {}  # data file path -> the version its add made it live
    readds: list[tuple[int, str, int, list[str]]] = []
    writer_rows: dict[str, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    fingerprints: dict[int, Fingerprint] = {}
    by_fp: dict[Fingerprint, list[int]] = defaultdict(list)
    commit_ops: dict[int, str] = {}
    fp = Fingerprint(0, 0, 0)
    versions: list[int] = []
    for version, commit, adds, removes in log.replay():
        versions.append(version)
        op_id = commit_op_id(commit.commit_info)
        if op_id is not None:
            commit_ops[version] = op_id
        # Rows a copy-on-write rewrite carries over (same id, same writer, in
        # a file removed by this commit) keep their life: not a new addition.
        # A deletion-vector update, remove(F) + add(F, DV), is such a rewrite:
        # the rows of F its DV leaves are carried over, the ones it deletes
        # leave (add_rows gives an add's rows with its DV applied).
        leaving: dict[tuple[Any, Any], list[RowLife]] = defaultdict(list)
        for rm in removes:
            live_since.pop(rm["path"], None)
            for life in alive.pop(rm["path"], []):
                leaving[(life.id, life.writer)].append(life)
        for add in adds:
            if add["path"] in live_since:
                # The table at a version is the set of files live then (spec
                # C4): adding a live file again (a commit applied twice) keeps
                # it live once, its rows carried over like a rewrite's.
                path = add["path"]
                old = alive.pop(path, [])
                if add.get("dataChange", True) is not False:  # not a stats-only re-add
                    readds.append((version, path, live_since[path], sorted({str(x.writer) for x in old if x.writer})))
                for life in old:
                    leaving[(life.id, life.writer)].append(life)
            else:
                live_since[add["path"]] = version
            # An unreadable file reads as no rows; the reader records why
            # (log.problems), and the run's check turns what that hides into
            # unknown (harness.check.pipeline).
            ids, writers = log.add_columns(add, ("id", "writer"))
            ids = ids or []
            if writers is None or not ids:
                writers = [None] * len(ids)
            file_lives = []
            for rid, w in zip(ids, writers, strict=True):
                carried = leaving.get((rid, w))
                if carried:
                    file_lives.append(carried.pop())
                    continue
                life = RowLife(rid, w, version)
                file_lives.append(life)
                lives.append(life)
                fp = fp.add(rid)
                if w is not None:
                    writer_rows[w][version].append(rid)
            alive.setdefault(add["path"], []).extend(file_lives)
        for gone in leaving.values():
            for life in gone:
                life.removed = version
                fp = fp.add(life.id, -1)
        fingerprints[version] = fp
        by_fp[fp].append(version)
    return TableFacts(
        versions=versions,
        lives=lives,
        writer_versions={w: sorted(vs) for w, vs in writer_rows.items()},
        writer_rows={w: dict(vs) for w, vs in writer_rows.items()},
        fingerprints=fingerprints,
        by_fingerprint=dict(by_fp),
        commit_ops=commit_ops,
        readds=readds,
    )


def expected_ids(op: Op) -> list[Any]:
    """Row ids a write op meant to write (from its invocation)."""
    v = op.invoke.value
    return list(v.get("ids", [])) if isinstance(v, dict) else []


# Ops that only insert: their rows must stay in the table. Other writes
# (UPDATE, MERGE, ...) install row versions that later writes may replace.
INSERT_ONLY = frozenset({"append"})


def writes(history: History) -> list[Op]:
    """Client ops that write rows: their invocation names the new row ids."""
    return [
        op
        for op in history.client_ops()
        if op.f != "read" and isinstance(op.invoke.value, dict) and "ids" in op.invoke.value
    ]


def reads(history: History) -> list[Op]:
    return [op for op in history.client_ops() if op.f == "read" and op.type == OK]


def fmt_ids(ids: Iterable[Any], limit: int = 5) -> str:
    ids = list(ids)
    head = ", ".join(str(i) for i in ids[:limit])
    return head + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


@dataclass(frozen=True)
class FaultWindow:
    start: int
    end: int
    what: str


def fault_windows(history: History) -> list[FaultWindow]:
    """When a fault of the nemesis was active: from a `start-x` invoke to the
    `stop-x` (or `heal`) that ends it; any other nemesis op over its own
    span. A fault still open at the end lasts to the end."""
    events = history.events
    last = events[-1].time if events else 0
    open_: dict[str, int] = {}
    out: list[FaultWindow] = []
    for op in history.ops():
        if op.process != "nemesis":
            continue
        end = op.end if op.end is not None else last
        if op.f.startswith("start-"):
            open_.setdefault(op.f.removeprefix("start-"), op.start)
        elif op.f.startswith("stop-") and op.f.removeprefix("stop-") in open_:
            name = op.f.removeprefix("stop-")
            out.append(FaultWindow(open_.pop(name), end, name))
        elif op.f == "heal":
            out += [FaultWindow(start, end, name) for name, start in open_.items()]
            open_.clear()
        else:
            out.append(FaultWindow(op.start, end, op.f))
    out += [FaultWindow(start, last, name) for name, start in open_.items()]
    return out
