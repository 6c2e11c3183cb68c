"""The :class:`TransactionLog`: a table's parsed log (commits, checkpoints,
problems), its replay to the live files and metadata at any version, and
lazy access to the rows, with deletion vectors applied."""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa

import harness.deltalog._pool as _pool
from harness.deltalog._pool import _BatchStream, _Rows
from harness.deltalog.actions import Commit, LogProblem, _check_actions, _dv_key, _file_key
from harness.deltalog.checkpoints import (
    _Checkpoint,
    _column_summary,
    _gap_problems,
    _load_checkpoint,
    _pool_compare,
    _summarizable,
    checkpoint_problems,
)
from harness.deltalog.coordinated import Coordination
from harness.deltalog.datafiles import _DataFiles, _logical
from harness.deltalog.dv import DeletionVectorError, _without_positions, dv_positions
from harness.deltalog.names import LOG_DIR
from harness.deltalog.schema import _conform, _Schema, _schema_of
from harness.deltalog.store import _S3_WORKERS, _LocalStore, _Store


def column_values(table: pa.Table, name: str) -> list[Any] | None:
    """table[name] as a Python list, None when the table has no such column.

    What `table.column(name).to_pylist() if name in table.column_names`
    gives, at a fraction of the cost for the small tables of data files
    (run once per file and column, 100k+ times in a long run)."""
    i = table.schema.get_field_index(name)
    if i < 0:  # absent, or a name that appears twice: the plain way decides
        return table.column(name).to_pylist() if name in table.column_names else None
    col = table.column(i)
    return col.chunk(0).to_pylist() if col.num_chunks == 1 else col.to_pylist()


class _TableValues:
    """An Arrow table's columns as Python values, as _Rows gives them."""

    __slots__ = ("table",)

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    def column(self, name: str) -> list[Any] | None:
        return column_values(self.table, name)


class _LivePaths:
    """The live files' paths of a replay from version 0 (the keys of
    live_files), kept up to date commit by commit, and which paths entered
    and left since it was last asked."""

    def __init__(self) -> None:
        self.keys: set[tuple[str, str | None]] = set()
        self.count: dict[str, int] = {}  # path -> its live keys (one DV at a time, normally)
        self.changed: dict[str, bool] = {}  # path -> live now, for paths that entered or left since changes()

    def apply(self, commit: Commit) -> None:
        # Called for every action of a long log: the actions walked without
        # a generator, the usual file action (no deletion vector) keyed
        # without a call, `changed` updated in place.
        keys, count, changed = self.keys, self.count, self.changed
        kinds, adds, removes = commit.file_actions()
        if not adds and not removes:
            return
        at_add = at_remove = 0
        for kind in kinds:
            if kind == "add":
                inner = adds[at_add]
                at_add += 1
                path = inner["path"]
                key = (path, None) if inner.get("deletionVector") is None else _file_key(inner)
                if key not in keys:
                    keys.add(key)
                    n = count[path] = count.get(path, 0) + 1
                    if n == 1:
                        if changed.get(path, True) is not True:
                            del changed[path]  # left and entered again
                        else:
                            changed[path] = True
            elif kind == "remove":
                inner = removes[at_remove]
                at_remove += 1
                path = inner["path"]
                key = (path, None) if inner.get("deletionVector") is None else _file_key(inner)
                if key in keys:
                    keys.remove(key)
                    n = count[path] = count[path] - 1
                    if n == 0:
                        del count[path]
                        if changed.get(path, False) is not False:
                            del changed[path]  # entered and left again
                        else:
                            changed[path] = False

    def changes(self) -> tuple[list[str], list[str]]:
        """(paths that entered, paths that left) since the last call."""
        entered = [p for p, live in self.changed.items() if live]
        left = [p for p, live in self.changed.items() if not live]
        self.changed = {}
        return entered, left


class TransactionLog:
    """A parsed ``_delta_log`` plus lazy access to the table's rows.

    Build one with :func:`read_log` or :meth:`from_commits`.
    """

    def __init__(self) -> None:
        self.commits: dict[int, Commit] = {}
        self.problems: list[LogProblem] = []
        self.location: str | None = None
        self.last_checkpoint: dict | None = None
        # Log entries that are neither commits, checkpoints nor the usual
        # side files, e.g. delta-rs' leftover "_commit_<uuid>.json.tmp" after
        # a crash mid-commit: evidence for a checker, never applied.
        self.ignored_files: list[str] = []
        # Other tables a workload writes besides this one, by their path
        # relative to this table's root (e.g. "races/r3" of create-race);
        # filled in by harness.checking from the workload's related_tables.
        self.related: dict[str, TransactionLog] = {}
        # A coordinated-commits table: what its coordinator ratified beyond
        # the backfilled commits (harness.deltalog.coordinated); None otherwise.
        self.coordination: Coordination | None = None
        # Data files a run kept a copy of that the store no longer has (what
        # VACUUM deleted), by object name relative to the table root; None
        # when the log was read without a run's kept copies (read_log).
        self.deleted_files: set[str] | None = None
        # Commits a run kept a copy of that the store no longer has (what log
        # cleanup deleted): read from the copies, so the log replays whole.
        self.expired_commits: set[int] = set()
        self._unreadable: set[int] = set()  # a commit file exists but is broken
        self._checkpoints: dict[int, _Checkpoint] = {}
        # The store (read_log sets it; checkpoints are read from it too), and
        # the data files read from it, cached and read ahead.
        # Through a weak reference: a log in no reference cycle is freed as
        # soon as its last user lets go, without the cyclic GC.
        me = weakref.ref(self)
        self._files = _DataFiles(lambda: me()._adds_in_order())  # type: ignore[union-attr]
        # Deletion vectors: add_rows' results by (path, DV id), and the
        # version that first added each (path, DV) (for problems).
        self._dv_rows: dict[tuple[str, str], pa.Table] = {}
        self._dv_versions: dict[tuple[str, str], int] = {}
        self._schema_cache: dict[int, tuple[dict | None, _Schema | None]] = {}
        self._versions: list[int] = []
        self._add_index: dict[str, tuple[int, dict]] = {}
        self._meta_versions: list[int] = []
        self._proto_versions: list[int] = []
        self._first_hole = 0
        self._live_cache: dict[int, tuple[int, dict[tuple[str, str | None], dict]]] = {}
        # Data files the worker processes sent as values (add_columns), until
        # file_rows turns one into its table; whether a schema is as stored.
        self._file_values: dict[str, _Rows] = {}
        self._stored_cache: dict[int, tuple[_Schema, bool]] = {}
        self._stored_span: tuple[int, int, bool] = (0, 0, False)  # versions [lo, hi) where _as_stored is the same
        self._property_cache: dict[tuple[int, str], tuple[dict | None, Any]] = {}
        # key -> versions [lo, hi) that property_at answers alike, and the answer
        self._property_spans: dict[str, tuple[int, int, Any]] = {}
        # Checkpoints the worker processes are reading for check_checkpoints.
        self._ck_stream: _BatchStream | None = None
        self._ck_stream_versions: list[int] = []

    def __repr__(self) -> str:
        return (
            f"TransactionLog({self.location!r}, versions={len(self._versions)},"
            f" latest={self.latest_version}, checkpoints={self.checkpoint_versions},"
            f" problems={len(self.problems)})"
        )

    # ---- building

    def _add_commit(self, version: int, actions: Any, checked: list[LogProblem] | None = None) -> None:
        if version in self.commits or version in self._unreadable:
            self.problems.append(LogProblem("duplicate-version", version, "more than one commit for this version"))
            return
        # `checked`: _check_actions already found no error, these problems.
        err, problems = (None, checked) if checked is not None else _check_actions(version, actions)
        if err:
            self._unreadable.add(version)
            self.problems.append(LogProblem("unparseable", version, err))
            return
        self.commits[version] = Commit(version, actions)
        self.problems.extend(problems)

    def _finish(self) -> None:
        self._index()
        # A checkpoint standing in for missing commits is load-bearing: read
        # it now, so its problems are in `problems` before anyone looks and
        # an unreadable one does not count as covering a gap.
        if self._checkpoints and self._first_hole <= max(self._checkpoints):
            self._base_for(max(self._checkpoints))
        self.problems.extend(_gap_problems(set(self.commits) | self._unreadable, self._checkpoints))
        self.problems.sort(key=lambda p: -1 if p.version is None else p.version)

    def _index(self) -> None:
        self._stored_span = (0, 0, False)
        self._property_spans = {}
        self._versions = sorted(self.commits)
        for v in self._versions:
            c = self.commits[v]
            for a in c.file_actions()[1]:
                self._add_index[a["path"]] = (v, a)
                self._note_dv(v, a)
            if c.metadata is not None:
                self._meta_versions.append(v)
            if c.protocol is not None:
                self._proto_versions.append(v)
        v = 0
        while v in self.commits:
            v += 1
        self._first_hole = v

    def _note_dv(self, version: int, add: dict) -> None:
        if add.get("deletionVector") is not None:
            self._dv_versions.setdefault(_dv_key(add), version)

    @classmethod
    def from_commits(
        cls,
        commits: Iterable[Commit] | Iterable[list[dict]],
        file_tables: dict[str, pa.Table] | None = None,
        *,
        checkpoints: dict[int, list[dict]] | None = None,
    ) -> TransactionLog:
        """A log built in memory, for synthetic tests.

        A ``list[dict]`` item is the actions of version = its position; a
        Commit keeps its own version. ``file_rows(path)`` returns
        ``file_tables[path]`` (plus partition columns it lacks).
        ``checkpoints`` maps a version to a checkpoint's actions.
        """
        log = cls()
        for pos, item in enumerate(commits):
            if isinstance(item, Commit):
                log._add_commit(item.version, item.actions)
            else:
                log._add_commit(pos, list(item) if isinstance(item, (list, tuple)) else item)
        for v, actions in (checkpoints or {}).items():
            log._checkpoints[v] = _Checkpoint(v, [], "memory", source=list(actions))
        log._files.tables = dict(file_tables or {})
        log._finish()
        return log

    def _adds_in_order(self) -> Iterator[dict]:
        """Every add action of the JSON commits, in log order."""
        for v in self._versions:
            yield from self.commits[v].file_actions()[1]

    @property
    def _store(self) -> _Store | None:
        return self._files.store

    @property
    def versions(self) -> list[int]:
        return list(self._versions)

    @property
    def latest_version(self) -> int | None:
        """The newest version whose state is known: the newest readable commit
        or checkpoint. A broken newest commit file is a problem, not a version."""
        tops = [*self._versions[-1:], *self._good_checkpoints()]
        return max(tops) if tops else None

    def _good_checkpoints(self) -> list[int]:
        return sorted(c for c, ck in self._checkpoints.items() if ck.failed is None)

    @property
    def checkpoint_versions(self) -> list[int]:
        """Versions with a complete checkpoint (all parts present). Whether it
        parses is learnt when it is first needed; known-unreadable ones are
        left out (and are in problems)."""
        return self._good_checkpoints()

    def commit(self, version: int) -> Commit:
        """The parsed commit; KeyError when missing or unparseable."""
        try:
            return self.commits[version]
        except KeyError:
            why = "unparseable" if version in self._unreadable else "missing"
            raise KeyError(f"commit {version} is {why}") from None

    @property
    def first_hole(self) -> int | None:
        """The first version, counting from 0, with no readable commit while
        a later version exists (a commit file, readable or not, a checkpoint,
        or a version the commit coordinator ratified): where a replay of the
        JSON commits from 0 has to stop. None when they run unbroken from 0
        to the newest version."""
        state = self.coordination.state if self.coordination is not None else None
        ratified = [state.ratified_version] if state is not None and state.ratified_version is not None else []
        top = max([*self.commits, *self._unreadable, *self._checkpoints, *ratified], default=-1)
        return self._first_hole if self._first_hole <= top else None

    def up_to(self, version: int) -> TransactionLog:
        """The log as of `version`: its commits and checkpoints 0..version
        and nothing later, for a checker that must not judge past it.

        It reads through this log's store and data-file caches, and its
        `problems` are this log's list: what reading a data file through it
        finds is a problem of the table, wherever it was found."""
        view = TransactionLog()
        view.location = self.location
        view.related = self.related
        view.ignored_files = self.ignored_files
        view.problems = self.problems
        view.commits = {v: c for v, c in self.commits.items() if v <= version}
        view._checkpoints = {v: ck for v, ck in self._checkpoints.items() if v <= version}
        view._files = self._files
        view._dv_rows = self._dv_rows
        view._index()
        return view

    def is_reconstructible(self, version: int) -> bool:
        """True when the state at `version` follows from readable log entries
        alone: JSON commits 0..version, or a readable checkpoint c <= version
        plus JSON commits c+1..version. Otherwise live_files is a best effort."""
        if version < self._first_hole:
            return True
        base = self._base_for(version)
        if base < 0:
            return False
        lo = bisect.bisect_right(self._versions, base)
        hi = bisect.bisect_right(self._versions, version)
        return hi - lo == version - base

    # ---- replay

    def _check_version(self, version: int) -> None:
        latest = self.latest_version
        if latest is None or version > latest:
            raise KeyError(f"version {version} is past the end of the log (latest {latest})")

    def _base_for(self, version: int) -> int:
        """Where to start replay for `version`: -1 (empty table, JSON from 0)
        or a checkpoint. JSON is preferred whenever it is complete, because it
        is the primary record; a checkpoint is a derived summary (spec C4)."""
        if version < self._first_hole:
            return -1
        for c in sorted((c for c in self._checkpoints if c <= version), reverse=True):
            if self._checkpoint_actions(c) is not None:
                return c
        return -1

    def _checkpoint_state(self, version: int) -> dict[tuple[str, str | None], dict]:
        # Only adds are live; a checkpoint's removes are tombstones kept for
        # VACUUM, already subtracted.
        actions = self._checkpoint_actions(version) or []
        return {_file_key(a["add"]): a["add"] for a in actions if "add" in a}

    @staticmethod
    def _apply(state: dict[tuple[str, str | None], dict], commit: Commit) -> None:
        for kind, inner in commit.in_order():
            if kind == "add":
                state[_file_key(inner)] = inner
            elif kind == "remove":
                state.pop(_file_key(inner), None)

    def live_files(self, version: int) -> dict[str, dict]:
        """path -> add action of every file live at `version` (spec C4).

        Replays JSON from 0 when every commit up to `version` is readable,
        else starts from the newest readable checkpoint <= version. Missing
        or unparseable commits are skipped (they are in `problems`); see
        is_reconstructible. Versions < 0 are the empty table before creation.
        Consecutive calls with growing versions roll forward from a cache.
        """
        if version < 0:
            return {}
        self._check_version(version)
        base = self._base_for(version)
        cached = self._live_cache.get(base)
        if cached is not None and cached[0] <= version:
            start, state = cached[0], dict(cached[1])
        else:
            start = base
            state = self._checkpoint_state(base) if base >= 0 else {}
        lo = bisect.bisect_right(self._versions, start)
        hi = bisect.bisect_right(self._versions, version)
        for v in self._versions[lo:hi]:
            self._apply(state, self.commits[v])
        self._live_cache[base] = (version, state)
        return {key[0]: add for key, add in state.items()}

    def replay(self) -> Iterator[tuple[int, Commit, list[dict], list[dict]]]:
        """(version, commit, adds, removes) for every readable commit in
        version order; adds/removes are that commit's own inner action dicts,
        in the commit's own lists (not copied: a long log replays a million
        commits a checker; not to be changed). One pass: a checker keeping
        its own state applies them as it goes."""
        commits = self.commits
        for v in self._versions:
            c = commits[v]
            _, adds, removes = c.file_actions()
            yield v, c, adds, removes

    def _at(self, version: int, json_versions: list[int], kind: str) -> dict | None:
        if version < 0:
            return None
        i = bisect.bisect_right(json_versions, version) - 1
        jv = json_versions[i] if i >= 0 else None
        if version >= self._first_hole:
            base = self._base_for(version)
            if base >= 0 and (jv is None or jv < base):
                found = [a[kind] for a in self._checkpoint_actions(base) or [] if kind in a]
                if found:
                    return found[-1]
        if jv is None:
            return None
        return self.commits[jv].metadata if kind == "metaData" else self.commits[jv].protocol

    def metadata_at(self, version: int) -> dict | None:
        """The newest metaData at or before `version`."""
        return self._at(version, self._meta_versions, "metaData")

    def configuration_at(self, version: int) -> dict[str, str]:
        md = self.metadata_at(version)
        conf = md.get("configuration") if md else None
        return dict(conf) if isinstance(conf, dict) else {}

    def property_at(self, version: int, key: str) -> Any:
        """``configuration_at(version).get(key)``, read once per metaData
        action (a checker asks it of every version of a long log)."""
        span = self._property_spans.get(key)
        if span is not None and span[0] <= version < span[1]:
            return span[2]
        meta = self.metadata_at(version)
        hit = self._property_cache.get((id(meta), key))
        if hit is None or hit[0] is not meta:  # the action is held, so its id is not reused
            hit = self._property_cache[(id(meta), key)] = (meta, self.configuration_at(version).get(key))
        if 0 <= version < self._first_hole:
            # Up to the next metaData the answer is this one; a replay asks
            # in version order.
            metas = self._meta_versions
            i = bisect.bisect_right(metas, version)
            hi = metas[i] if i < len(metas) else self._first_hole
            self._property_spans[key] = (metas[i - 1] if i > 0 else 0, min(hi, self._first_hole), hit[1])
        return hit[1]

    def protocol_at(self, version: int) -> dict | None:
        return self._at(version, self._proto_versions, "protocol")

    # ---- checkpoints

    def _checkpoint_actions(self, version: int) -> list[dict] | None:
        ck = self._checkpoints.get(version)
        if ck is None or ck.failed is not None:
            return None
        if ck.actions is None:
            loaded = _load_checkpoint(ck, self._store)
            if isinstance(loaded, LogProblem):
                self.problems.append(loaded)
                return None
            for a in loaded:
                if "add" in a:
                    self._add_index.setdefault(a["add"]["path"], (ck.version, a["add"]))
                    self._note_dv(ck.version, a["add"])
        return ck.actions

    def start_checkpoint_summaries(self) -> None:
        """A hint that check_checkpoints comes later: on a local table of many
        commits and checkpoints, worker processes compare the checkpoints with
        the JSON replay for it, when they have nothing else to do. What
        check_checkpoints finds is the same either way."""
        store = self._store
        if not isinstance(store, _LocalStore) or self._ck_stream is not None:
            return
        todo = [
            c
            for c in sorted(self._checkpoints)
            if c < self._first_hole and self._checkpoints[c].actions is None and _summarizable(self._checkpoints[c])
        ]
        if len(todo) < _pool._PARALLEL_CHECKPOINTS or len(self._versions) < _pool._PARALLEL_MIN_FILES:
            return
        batch = _pool._PARALLEL_BATCH_CHECKPOINTS
        live, done, items = _LivePaths(), 0, []
        for i, c in enumerate(todo):
            hi = bisect.bisect_right(self._versions, c)
            for v in self._versions[done:hi]:
                live.apply(self.commits[v])
            done = hi
            entered, left = live.changes()
            # A task's first checkpoint gets the whole set: tasks are independent.
            whole = list(live.count) if i % batch == 0 else None
            files = [f"{LOG_DIR}/{n}" for n in self._checkpoints[c].files]
            meta = self._at_json(c, self._meta_versions, "metaData")
            proto = self._at_json(c, self._proto_versions, "protocol")
            items.append(
                (c, files, whole, entered if whole is None else [], left if whole is None else [], meta, proto)
            )
        stream = _BatchStream("checkpoints", store._root_str, -(-len(todo) // batch), batch)
        stream.extend(items)
        stream.finish()
        self._ck_stream, self._ck_stream_versions = stream, todo

    def _worker_comparisons(self) -> dict[int, list[LogProblem]]:
        """What the worker processes found comparing checkpoints, by version
        (those they could not read are not there)."""
        stream, versions = self._ck_stream, self._ck_stream_versions
        out: dict[int, list[LogProblem]] = {}
        if stream is None:
            return out
        self._ck_stream = None

        def take(start: int, n: int, result: Any) -> None:
            if isinstance(result, list) and len(result) == n:
                out.update((v, r) for v, r in zip(versions[start : start + n], result, strict=True) if r is not None)

        try:
            while True:
                # Waiting for the workers, this thread compares the last
                # batches itself (at 1M commits, 8-11 s of checkpoints were
                # compared after everything else, with this thread idle).
                stolen = None if stream.front_ready() else stream.take_last()
                if stolen is not None:
                    start, n = stolen
                    try:
                        result: Any = _pool_compare(stream.root, stream.items[start : start + n])
                    except Exception:  # noqa: BLE001 - compared one by one below, as a worker's failure is
                        result = None
                    take(start, n, result)
                    continue
                if (batch := stream.next()) is None:
                    break
                take(*batch)
        finally:
            stream.close()
        return out

    def check_checkpoints(self) -> list[LogProblem]:
        """Compare every checkpoint with the JSON replay at its version, where
        JSON is complete; a mismatch means a reader that trusts the checkpoint
        sees another table than one that replays JSON (spec C4, C7). Returns
        the new problems and also appends them to `problems`."""
        new: list[LogProblem] = []
        compared = self._worker_comparisons()
        for c in sorted(self._checkpoints):
            if c >= self._first_hole:
                break
            if c in compared and self._checkpoints[c].failed is None:
                new += compared[c]
                continue
            summary = self._checkpoint_summary(c)
            if summary is None:
                continue
            new += checkpoint_problems(
                c,
                summary[0],
                summary[1],
                set(self.live_files(c)),
                self._at_json(c, self._meta_versions, "metaData"),
                self._at_json(c, self._proto_versions, "protocol"),
            )
        self.problems.extend(new)
        return new

    def _checkpoint_summary(self, version: int) -> tuple[set[str], list[dict]] | None:
        """A checkpoint's file paths and its metaData/protocol actions: read
        for just those columns where that is possible (_column_summary),
        else by the full reader."""
        ck = self._checkpoints.get(version)
        if ck is None or ck.failed is not None:
            return None
        summary = _column_summary(ck, self._store)
        if summary is not None:
            return summary
        actions = self._checkpoint_actions(version)
        if actions is None:
            return None
        return {a["add"]["path"] for a in actions if "add" in a}, actions

    def _at_json(self, version: int, json_versions: list[int], kind: str) -> dict | None:
        i = bisect.bisect_right(json_versions, version) - 1
        if i < 0:
            return None
        c = self.commits[json_versions[i]]
        return c.metadata if kind == "metaData" else c.protocol

    # ---- rows

    def _schema_at(self, version: int | None) -> _Schema | None:
        if version is None:
            version = self.latest_version
        if version is None:
            return None
        meta = self.metadata_at(version)
        # Parsed once per metaData action, not once per data file: the cache
        # holds the action too, so its id() is not reused while cached.
        hit = self._schema_cache.get(id(meta))
        if hit is None or hit[0] is not meta:
            hit = self._schema_cache[id(meta)] = (meta, _schema_of(meta))
        return hit[1]

    def prefetch_data_files(self) -> None:
        """A hint that every data file the log adds is about to be read, in
        log order (a checker replaying the log). On a local table with many
        files, worker processes start decoding them now, and file_rows then
        finds them ready. What file_rows returns, and the problems it
        records, are the same with or without the hint."""
        self._files.prefetch()

    def read_data_files(self) -> None:
        """Read every data file (and deletion vector) the JSON commits add,
        in log order, as a checker replaying the log would: each one's
        problems are then recorded. What was read already is not read again."""
        for add in self._adds_in_order():
            self.add_values(add)

    def file_rows(self, path: str) -> pa.Table:
        """Rows of one data file, logical column names, partition columns
        (from its add's partitionValues) appended when the file lacks them.

        Cached. An unreadable file yields an empty table and a problem.
        These are the file's physical rows, all of them, in file order (the
        order deletion-vector positions index): no deletion vector is
        applied. The rows an add makes live are add_rows(add).
        """
        cache = self._files.cache
        if path in cache:
            return cache[path]
        version, add = self._add_index.get(path, (None, None))
        got = self._file_values.pop(path, None)
        table, problem = (got, None) if got is not None else self._files.read(path, version)
        return self._cache_file(path, version, add, table, problem)

    def _cache_file(
        self, path: str, version: int | None, add: dict | None, got: pa.Table | _Rows | None, problem: Any
    ) -> pa.Table:
        if problem is not None:
            self.problems.append(problem)
        if got is None:
            schema = self._schema_at(version)
            table = schema.arrow().empty_table() if schema else pa.table({})
        else:
            table = got.table() if isinstance(got, _Rows) else got
            table, problems = _logical(table, add, self._schema_at(version), version, path)
            self.problems.extend(problems)
        self._files.cache[path] = table
        return table

    def add_columns(self, add: dict, names: Sequence[str]) -> list[list[Any] | None]:
        """``[column_values(add_rows(add), name) for name in names]``: the
        rows an add makes live, column by column, as Python values (None
        for a column they lack)."""
        values = self.add_values(add)
        return [values.column(n) for n in names]

    def add_values(self, add: dict) -> _Rows | _TableValues:
        """The rows an add makes live, to be read column by column as Python
        values: ``.column(name)`` is ``column_values(add_rows(add), name)``.
        A checker replaying a long log asks this of every add: a file the
        worker processes decoded is then read from the values they sent,
        with no Arrow table built."""
        path = add["path"]
        if add.get("deletionVector") is None:
            values = self._file_values.get(path)
            if values is not None:
                return values
            if path not in self._files.cache:
                version, first = self._add_index.get(path, (None, None))
                got, problem = self._files.read(path, version)
                if isinstance(got, _Rows) and self._as_stored(path):
                    # Kept only where the values are the file's rows as the log means them.
                    self._file_values[path] = got
                    return got
                self._cache_file(path, version, first, got, problem)
        return _TableValues(self.add_rows(add))

    def _as_stored(self, path: str) -> bool:
        """Whether the log means a file's columns as they are stored: no
        column mapping renames them and no partition column is added (what
        _logical leaves alone)."""
        version, add = self._add_index.get(path, (None, None))
        span = self._stored_span
        if version is not None and span[0] <= version < span[1]:
            return span[2]
        schema = self._schema_at(version)
        if schema is None:
            return not (add or {}).get("partitionValues")
        hit = self._stored_cache.get(id(schema))
        if hit is None or hit[0] is not schema:
            plain = not schema.partition_columns and all(f.physical == f.name for f in schema.fields)
            hit = self._stored_cache[id(schema)] = (schema, plain)
        if version is not None and version < self._first_hole:
            # Up to the next metaData the schema is this one: the files of a
            # long log's replay come in version order, and most share it.
            i = bisect.bisect_right(self._meta_versions, version)
            if i > 0:
                end = (
                    min(self._meta_versions[i], self._first_hole) if i < len(self._meta_versions) else self._first_hole
                )
                self._stored_span = (self._meta_versions[i - 1], end, hit[1])
        return hit[1]

    def add_rows(self, add: dict) -> pa.Table:
        """The rows an add (or remove) action makes live: file_rows(path)
        less the rows its deletionVector deletes.

        Cached per (path, DV). A DV that cannot be read or decoded, or that
        does not fit the file (its cardinality, a position past the file's
        last row), is a "deletion-vector-unreadable" problem, and the add
        then yields no rows: like an unreadable data file, never rows that
        may have been deleted."""
        path = add["path"]
        dv = add.get("deletionVector")
        if dv is None:
            return self.file_rows(path)
        key = _dv_key(add)
        hit = self._dv_rows.get(key)
        if hit is not None:
            return hit
        table = self.file_rows(path)
        if path in self._files.unreadable:
            rows = table  # already empty, and already a problem
        else:
            try:
                positions = dv_positions(dv, self._files.dv_read_rel, self._files.dv_read_path)
                if positions and positions[-1] >= table.num_rows:
                    raise DeletionVectorError(
                        f"deletes row position {positions[-1]} of a file of {table.num_rows} rows"
                    )
                rows = _without_positions(table, positions)
            except Exception as e:  # noqa: BLE001 - a lost or broken DV is evidence, like a lost file
                self.problems.append(
                    LogProblem(
                        "deletion-vector-unreadable",
                        self._dv_versions.get(key),
                        f"{path} (DV {key[1][:60]}): {type(e).__name__}: {e}"[:500],
                    )
                )
                rows = table.slice(0, 0)
        self._dv_rows[key] = rows
        return rows

    def added_at(self, path: str) -> int | None:
        """The version of the newest add of `path` (its raw log path)."""
        got = self._add_index.get(path)
        return got[0] if got else None

    @property
    def unreadable_files(self) -> frozenset[str]:
        """Data files (add paths) whose rows could not be read so far: missing
        from the store and not kept, or undecodable; they read as no rows."""
        return frozenset(self._files.unreadable)

    def rows_at(self, version: int, columns: list[str] | None = None) -> pa.Table:
        """The table's rows at `version`: the live files' rows (deletion
        vectors applied), in the schema of that version. `columns` selects
        (and orders) columns; a column no file has comes back as nulls."""
        schema = self._schema_at(max(version, 0)) if version >= 0 else None
        adds = list(self.live_files(version).values())
        store = self._store
        if store is not None and store.remote and len(adds) > 1:
            with ThreadPoolExecutor(min(_S3_WORKERS, len(adds))) as pool:
                tables = list(pool.map(self.add_rows, adds))
        else:
            tables = [self.add_rows(a) for a in adds]
        tables = [_conform(t, schema) for t in tables]
        if tables:
            result = pa.concat_tables(tables, promote_options="permissive")
        else:
            result = schema.arrow().empty_table() if schema else pa.table({})
        if columns is None:
            return result
        out = {}
        for c in columns:
            if c in result.column_names:
                out[c] = result[c]
            else:
                f = schema.field(c) if schema else None
                out[c] = pa.nulls(result.num_rows, f.type if f and f.type else pa.null())
        return pa.table(out)

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for p in self.problems:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        return {
            "location": self.location,
            "commits": len(self._versions),
            "latest_version": self.latest_version,
            "checkpoints": self.checkpoint_versions,
            "problems": kinds,
        }
