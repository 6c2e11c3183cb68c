"""A table's data files as Arrow tables: read through the store (or taken
from from_commits' tables), ahead of need when they are asked for in log
order (threads for a remote store, worker processes for a local one with
many files), given the log's column names and partition columns; and the
DV files their deletion vectors are read from."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa

import harness.deltalog._pool as _pool
from harness.deltalog._pool import _BatchStream, _Rows, _unpack_parquet
from harness.deltalog.actions import Commit, LogProblem
from harness.deltalog.dv import DeletionVectorError
from harness.deltalog.schema import _partition_array, _read_parquet, _Schema
from harness.deltalog.store import _io_pool, _is_not_found, _LocalStore, _Store

# Read-ahead of remote data files for file_rows: at most this many files /
# bytes (by the adds' sizes) in flight or waiting. (Local files are not read
# by threads: reader threads contending for the GIL with the decoding thread
# cost more than they overlap; local tables of many files are decoded by
# worker processes instead: harness.deltalog._pool.)
_READAHEAD_FILES = 64
_READAHEAD_BYTES = 64 << 20
_DV_FILE_CACHE = 16  # DV files kept in memory (one holds the DVs of many data files)


class _DataFiles:
    """One log's data files: where they are read from, the tables file_rows
    made of them, the files that could not be read, and the reads and decodes
    under way ahead of need. A file is read ahead only while files are asked
    for in the order the log adds them (`adds`: every add action, in log
    order), so random access costs no wasted reads."""

    def __init__(self, adds: Callable[[], Iterator[dict]]) -> None:
        self.store: _Store | None = None
        self.tables: dict[str, pa.Table] | None = None  # from_commits' stand-ins for the files
        self.cache: dict[str, pa.Table] = {}  # file_rows' results, by path
        self.unreadable: set[str] = set()  # data files _read_file could not read
        # A run's copies of the data files it saw (DataFileKeeper): where a
        # file the store no longer has is read from instead.
        self.kept: Path | None = None
        self._adds = adds
        # Read-ahead (see _read_ahead): adds' paths in log order, and reads in flight.
        self._add_order: list[tuple[str, int]] | None = None
        self._add_pos: dict[str, int] = {}
        self._ahead: dict[str, tuple[Future, int]] = {}
        self._ahead_next = 0
        self._ahead_last = -1
        self._ahead_bytes = 0
        self._ahead_lock = threading.Lock()
        # Local stores: data files decoded by worker processes (_decoded_ahead).
        self._pready: dict[str, pa.Table | _Rows] = {}
        self._pstream: _BatchStream | None = None
        self._pfrontier = 0  # next add position the stream will decode
        self._pfrom = 0  # add position of the stream's first file
        self._plast = -1
        self._prun = 0
        # DV files read, a few kept (see _dv_file).
        self._dv_files: OrderedDict[str, bytes] = OrderedDict()
        self._dv_lock = threading.Lock()

    def read(self, path: str, version: int | None) -> tuple[pa.Table | _Rows | None, LogProblem | None]:
        """The rows of one data file as stored (before _logical), or None and
        why not; `version` is the one that added it, for the problem. A file
        a worker process decoded may come as its columns' values (_Rows)."""
        table = self._decoded_ahead(path)
        if table is not None:
            return table, None
        return self._read_file(path, version, self._read_ahead(path))

    def _ensure_add_order(self) -> list[tuple[str, int]]:
        """(path, size) of every added file, in log order, first add only."""
        if self._add_order is None:
            order: list[tuple[str, int]] = []
            for a in self._adds():
                p = a["path"]
                if p not in self._add_pos:
                    self._add_pos[p] = len(order)
                    size = a.get("size")
                    order.append((p, size if isinstance(size, int) and size > 0 else 1 << 20))
            self._add_order = order
        return self._add_order

    def _decoded_ahead(self, path: str) -> pa.Table | _Rows | None:
        """Local stores with many data files: `path` as decoded by a worker
        process (the file's table, before _logical), or None: then read it
        the ordinary way. Worker processes decode files in log order, a
        window ahead, after prefetch_data_files or once files are asked for
        in that order (a checker replaying the log: 32 in a row); asked for
        away from it, the stream stops."""
        store = self.store
        if not isinstance(store, _LocalStore) or self.tables is not None:
            return None
        with self._ahead_lock:
            order = self._ensure_add_order()
            if len(order) < _pool._PARALLEL_MIN_FILES:
                return None
            table = self._pready.pop(path, None)
            if table is not None:
                return table
            pos = self._add_pos.get(path)
            if pos is None:
                return None
            self._prun = self._prun + 1 if self._plast < pos <= self._plast + 4 else 0
            self._plast = pos
            if self._pfrom <= pos < self._pfrontier:
                return None  # its batch is done and it is not there: the worker could not read it
            if self._pstream is not None:
                reach = self._pfrontier + _pool._PARALLEL_BATCH * self._pstream.window
                if not self._pfrom <= pos < reach:
                    self._stop_stream()
            if self._pstream is None:
                if self._prun < 32:
                    return None
                self._start_stream(store, order, pos, _pool._PARALLEL_WINDOW)
            stream = self._pstream
            assert stream is not None
            while self._pfrontier <= pos:
                got = stream.next()
                if got is None:
                    self._stop_stream(keep_ready=True)
                    break
                start, n, result = got
                batch = stream.items[start : start + n]
                tables: list[pa.Table | _Rows | None] = [None] * n
                if result is not None:
                    try:
                        tables = _unpack_parquet(result, n)
                    except Exception:  # noqa: BLE001 - these files go the ordinary way
                        pass
                for p, t in zip(batch, tables, strict=False):
                    if t is not None and p not in self.cache:
                        self._pready[p] = t
                self._pfrontier = self._pfrom + start + n
            return self._pready.pop(path, None)

    def _start_stream(self, store: _LocalStore, order: list[tuple[str, int]], pos: int, window: int) -> None:
        stream = _BatchStream("parquet", store._root_str, window)
        stream.extend(p for p, _ in order[pos:])
        stream.finish()
        self._pstream = stream
        self._pfrom = self._pfrontier = pos

    def adopt_stream(self, prefetch: _DataPrefetch, same_commits: bool) -> None:
        """Take over the stream read_log started while parsing, and the add
        order it kept, when it saw the log's commits in the log's order
        (`same_commits`); else the stream is dropped."""
        stream = prefetch.stream
        if stream is None:
            return
        with self._ahead_lock:
            known = self._add_order
            if not same_commits or self.tables is not None or (known is not None and known != prefetch.order):
                stream.close()
                return
            if known is None:
                self._add_order, self._add_pos = prefetch.order, prefetch.pos
            stream.finish()
            self._pstream = stream
            self._pfrom = self._pfrontier = 0
            self._plast, self._prun = -1, 32  # the replay to come is sequential

    def prefetch(self) -> None:
        """TransactionLog.prefetch_data_files: start decoding every data file
        in worker processes now, on a local table with many files."""
        store = self.store
        if not isinstance(store, _LocalStore) or self.tables is not None:
            return
        with self._ahead_lock:
            order = self._ensure_add_order()
            if len(order) < _pool._PARALLEL_MIN_FILES or self._pstream is not None:
                return
            pos = 0
            while pos < len(order) and order[pos][0] in self.cache:
                pos += 1
            if pos < len(order):
                self._start_stream(store, order, pos, _pool._PARALLEL_WINDOW_PREFETCH)
                self._plast, self._prun = pos - 1, 32  # the replay to come is sequential

    def _stop_stream(self, keep_ready: bool = False) -> None:
        if self._pstream is not None:
            self._pstream.close()  # what the workers still do for it is dropped
            self._pstream = None
        if not keep_ready:
            self._pready.clear()

    def _read_ahead(self, path: str) -> Future | None:
        """Remote stores: the read of `path` if it was started ahead, and,
        while files are asked for in the order the log adds them (a checker
        replaying the log), start reading the next ones in threads: this
        thread decodes one file while the next GETs are in flight. Asked for
        out of that order, nothing is read ahead."""
        store = self.store
        if store is None or not store.remote or self.tables is not None:
            return None
        with self._ahead_lock:
            order = self._ensure_add_order()
            got = self._ahead.pop(path, None)
            if got is not None:
                self._ahead_bytes -= got[1]
            pos = self._add_pos.get(path)
            if pos is None:
                return got[0] if got else None
            if not self._ahead_last < pos <= self._ahead_last + _READAHEAD_FILES:
                self._ahead.clear()  # whatever was read ahead is not wanted next
                self._ahead_bytes = 0
                self._ahead_next = pos + 1
                self._ahead_last = pos
                return got[0] if got else None
            self._ahead_last = pos
            pool = _io_pool()
            n = max(self._ahead_next, pos + 1)
            while n < len(order) and n <= pos + _READAHEAD_FILES and self._ahead_bytes < _READAHEAD_BYTES:
                p, size = order[n]
                n += 1
                if p in self.cache or p in self._ahead:
                    continue
                self._ahead[p] = (pool.submit(store.read_path, p), size)
                self._ahead_bytes += size
            self._ahead_next = n
            return got[0] if got else None

    def _read_file(
        self, path: str, version: int | None, ahead: Future | None = None
    ) -> tuple[pa.Table | None, LogProblem | None]:
        try:
            if self.tables is not None:
                if path not in self.tables:
                    raise KeyError("no table given for this path")
                return self.tables[path], None
            if self.store is None:
                raise ValueError("log has no storage location")
            try:
                data = ahead.result() if ahead is not None else self.store.read_path(path)
            except Exception as e:
                kept = self._kept_bytes(path) if _is_not_found(e) else None
                if kept is None:
                    raise
                data = kept
            return _read_parquet(data), None
        except Exception as e:  # noqa: BLE001 - recorded; what it means depends on what failed
            self.unreadable.add(path)
            # A file the log names and the store does not have is evidence of
            # lost data (spec C7); one the harness read but could not decode
            # says nothing about the engine, only that its rows are unknown.
            kind = "data-file-missing" if _is_not_found(e) else "data-file-unreadable"
            return None, LogProblem(kind, version, f"{path}: {type(e).__name__}: {e}"[:500])

    def _kept_bytes(self, path: str) -> bytes | None:
        """The kept copy of a data file the store no longer has, if any."""
        if self.kept is None or "://" in path:
            return None
        try:
            return (self.kept / unquote(path)).read_bytes()
        except OSError:
            return None

    def _dv_file(self, kind: str, name: str) -> bytes:
        """A DV file by its name relative to the table root (kind "rel") or
        its absolute path ("path"), through the store data files come from.
        A few are kept: one DV file holds the DVs a commit wrote for many
        data files."""
        with self._dv_lock:
            data = self._dv_files.get(f"{kind}:{name}")
            if data is not None:
                self._dv_files.move_to_end(f"{kind}:{name}")
                return data
        if self.store is None:
            raise DeletionVectorError("log has no storage location to read DV files from")
        data = self.store.read_rel(name) if kind == "rel" else self.store.read_path(name)
        with self._dv_lock:
            self._dv_files[f"{kind}:{name}"] = data
            while len(self._dv_files) > _DV_FILE_CACHE:
                self._dv_files.popitem(last=False)
        return data

    def dv_read_rel(self, rel: str) -> bytes:
        return self._dv_file("rel", rel)

    def dv_read_path(self, path: str) -> bytes:
        return self._dv_file("path", path)


def _logical(
    table: pa.Table, add: dict | None, schema: _Schema | None, version: int | None, path: str
) -> tuple[pa.Table, list[LogProblem]]:
    """A data file's rows as the log means them: logical column names, and
    the partition columns (from its add's partitionValues) the file lacks;
    with a problem for each partition value that is not of its type."""
    problems: list[LogProblem] = []
    if schema is not None:
        # Column mapping: files name columns by physical name.
        renames = {f.physical: f.name for f in schema.fields if f.physical != f.name}
        if renames:
            table = table.rename_columns([renames.get(c, c) for c in table.column_names])
    pv = (add or {}).get("partitionValues") or {}
    if schema is not None:  # the metadata, not the add, says what is a partition
        wanted = []
        for name in schema.partition_columns:
            f = schema.field(name)
            phys = f.physical if f else name
            wanted.append((name, pv.get(phys, pv.get(name)), f.type if f else None))
    else:
        wanted = [(k, v, None) for k, v in pv.items()]
    for name, raw, typ in wanted:
        if name in table.column_names:
            continue
        arr, ok = _partition_array(raw, typ, table.num_rows)
        if not ok:
            problems.append(LogProblem("partition-value", version, f"{path}: {name}={raw!r} is not a {typ}"))
        table = table.append_column(name, arr)
    return table, problems


class _DataPrefetch:
    """read_log(prefetch_data=True) on a local table: data files go to the
    worker processes as the commits adding them are parsed, in log order,
    once there are enough of them to be worth it."""

    def __init__(self, root: str) -> None:
        self.root = root
        # What _DataFiles._ensure_add_order makes of the commits seen, in the
        # order seen: (path, size) of each first add, and its position.
        self.order: list[tuple[str, int]] = []
        self.pos: dict[str, int] = {}
        self.versions: list[int] = []  # the commits seen
        self.stream: _BatchStream | None = None

    def __call__(self, commit: Commit) -> None:
        self.versions.append(commit.version)
        new = []
        for a in commit.adds:
            p = a["path"]
            if p not in self.pos:
                self.pos[p] = len(self.order)
                size = a.get("size")
                self.order.append((p, size if isinstance(size, int) and size > 0 else 1 << 20))
                new.append(p)
        if not new:
            return
        if self.stream is not None:
            self.stream.extend(new)
        elif len(self.order) >= _pool._PARALLEL_MIN_FILES:
            self.stream = _BatchStream("parquet", self.root, _pool._PARALLEL_WINDOW_PREFETCH)
            self.stream.extend(p for p, _ in self.order)
