"""Reader processes for tables of many local files: JSON commits read, parsed
and validated, and data files decoded, by niced worker processes a bounded
window ahead of the thread that replays the log, with the pipe protocol
(pickled, length-prefixed frames) between them and the batching on top."""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from harness.core.procs import HELPER_NICE, die_with_parent
from harness.deltalog.actions import (
    LogProblem,
    _check_actions,
    _parse_orjson,
    parse_commit_bytes,
    parse_commit_bytes_by,
)
from harness.deltalog.checkpoints import _pool_compare
from harness.deltalog.names import _SCHEME_RE
from harness.deltalog.readahead import _read_ahead, _take
from harness.deltalog.schema import _read_parquet

_fastpq: ModuleType | None
try:  # built with the project (pyproject.toml); without it Arrow decodes every file
    import harness.deltalog._fastpq as _fastpq
except ImportError:  # pragma: no cover - a build without a C compiler
    _fastpq = None

# A long run's table is 100k+ small files: JSON commits and parquet data
# files. Per file, this thread would wait for the disk (page-cache misses are
# the norm on small VMs) and decode a parquet footer; reader *threads* do not
# help, because every read or decode has to win back the GIL from the thread
# that parses. Reader processes (``python -m harness.deltalog``, niced) work
# on batches of files in log order, a bounded window ahead of this thread:
# JSON commits come back parsed and validated (parse_commit_bytes,
# _check_actions: the same code), data files as Arrow IPC (one payload per
# batch, sliced back into files here), commits first. Whatever a worker
# cannot do (a missing, unreadable, unparseable or invalid file, a URI path,
# a dead worker) comes back as None, and this thread then does it itself
# the ordinary way, so results and problems are exactly those of the
# sequential path.
#
# The other modules read the tunables below as ``_pool.NAME`` at the time of
# use, so that one assignment here (tests lower them) reaches every reader.

_PARALLEL_MIN_FILES = 4096  # fewer files than this: the sequential path
_PARALLEL_BATCH = 256  # files per task
_PARALLEL_CHECKPOINTS = 32  # fewer checkpoints to compare than this: this thread reads them
_PARALLEL_BATCH_CHECKPOINTS = 32  # a task sends its first checkpoint's live paths whole
# Tasks in flight or done but not yet consumed, for JSON commits, for data
# files decoded on demand, and after prefetch_data_files (the run-ahead that
# lets workers and this thread overlap; tens of KB a task). The run-ahead
# covers what this thread does alone between parsing the last commit and
# replaying the first (indexing the log, loading the history: at 1M
# commits 15-20 s, in which the workers decode 400k files).
_PARALLEL_WINDOW_COMMITS = 64
_PARALLEL_WINDOW = 8
_PARALLEL_WINDOW_PREFETCH = 2048
# Processes: one per core (they run niced: HELPER_NICE). One more, to
# keep the cores busy while a read waits on the disk, measured slower: with
# the page cache warm, the extra process's switches cost more CPU than it
# saved (bench-check, 100k commits, 2 cores: 12.1 s with 3, 11.0 s with 2).
_PARALLEL_WORKERS = max(2, min(8, os.cpu_count() or 1))


class _WorkerTask:
    __slots__ = ("done", "value", "abandoned", "worker", "tid")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.abandoned = False
        self.worker: _Worker | None = None
        self.tid = 0

    def result(self) -> Any:
        """The task's return value; None if the worker failed or died."""
        self.done.wait()
        return self.value

    def cancel(self) -> None:
        self.abandoned = True  # its reply is read and dropped
        self.value = None

    def withdraw(self) -> None:
        """Cancel it, and have the worker skip it if it has not begun it
        (the caller does the work itself)."""
        self.cancel()
        if self.worker is not None and not self.done.is_set():
            self.worker.withdraw(self.tid)


_F_SETPIPE_SZ = 1031  # Linux fcntl
# Worker-side priority: a JSON commit's bytes are waited for now, a data
# file is decoded ahead of need, a checkpoint is compared last of all.
_PRIORITY = {"commits": 0, "parquet": 1, "checkpoints": 2}
# A request naming a task the parent now does itself: skipped if not begun.
_WITHDRAW = "withdraw"


class _Worker:
    """One reader process (``python -m harness.deltalog``): pickled
    (task id, function name, root, items) requests in, pickled (task id,
    reply) out, each frame length-prefixed; a request (0, "withdraw", "",
    task id) asks it to fail that task unstarted. The process serves JSON
    reads before data files; a thread here takes replies off the pipe as
    they come, so the process never waits for this one to ask."""

    def __init__(self) -> None:
        pkg_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH")) if p)
        # No preexec_fn (unsafe in a process with threads): the worker sets
        # its own parent-death signal and niceness.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.deltalog", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            # Its own process group (a terminal's Ctrl-C is the parent's to handle)
            # but not its own session: a session is a scheduler autogroup of
            # its own, where the niceness below would weigh nothing against
            # the parent's (bench-check 100k: the parent got 0.65 of a core).
            process_group=0,
        )
        try:  # a whole reply fits in the pipe: one read takes it
            import fcntl

            assert self.proc.stdout is not None
            fcntl.fcntl(self.proc.stdout.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except (OSError, ImportError, AssertionError):
            pass
        self.lock = threading.Lock()
        self.outstanding: dict[int, _WorkerTask] = {}
        self.seq = 0
        self.alive = True
        self.frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        threading.Thread(target=self._replies, name="deltalog-reader", daemon=True).start()
        threading.Thread(target=self._writes, name="deltalog-requests", daemon=True).start()

    @property
    def load(self) -> int:
        return len(self.outstanding)

    def submit(self, fn: str, root: str, items: list[Any]) -> _WorkerTask:
        task = _WorkerTask()
        with self.lock:
            if self.alive:
                self.seq += 1
                task.worker, task.tid = self, self.seq
                data = pickle.dumps((self.seq, fn, root, items), protocol=pickle.HIGHEST_PROTOCOL)
                self.outstanding[self.seq] = task
                self.frames.put(len(data).to_bytes(8, "little") + data)
                return task
        task.done.set()  # failed: the caller does it the ordinary way
        return task

    def withdraw(self, tid: int) -> None:
        data = pickle.dumps((0, _WITHDRAW, "", tid), protocol=pickle.HIGHEST_PROTOCOL)
        with self.lock:
            if self.alive:
                self.frames.put(len(data).to_bytes(8, "little") + data)

    def _writes(self) -> None:
        # The worker takes requests off its pipe only between decodes: a
        # write here would often wait for it (a second and more of a long
        # check), so requests go out from this thread, not the caller's.
        pipe = self.proc.stdin
        try:
            while (frame := self.frames.get()) is not None:
                assert pipe is not None
                pipe.write(frame)
                pipe.flush()
        except (OSError, ValueError, AssertionError):
            with self.lock:
                self.alive = False
        try:
            if pipe is not None:
                pipe.close()  # EOF: it exits, and its replies' end fails what is outstanding
        except OSError:
            pass

    def _replies(self) -> None:
        out = self.proc.stdout
        try:
            while True:
                assert out is not None
                head = out.read(8)
                if len(head) < 8:
                    break
                n = int.from_bytes(head, "little")
                body = out.read(n)
                if len(body) < n:
                    break
                tid, value = pickle.loads(body)
                with self.lock:
                    task = self.outstanding.pop(tid, None)
                if task is not None:
                    task.value = None if task.abandoned else value
                    task.done.set()
        except Exception:  # noqa: BLE001 - the pipe broke: the worker is gone
            pass
        with self.lock:  # every task still waiting fails; nothing new is accepted
            self.alive = False
            left, self.outstanding = list(self.outstanding.values()), {}
        for task in left:
            task.value = None
            task.done.set()

    def stop(self) -> None:
        with self.lock:
            self.alive = False
        self.frames.put(None)  # the writer closes stdin after what is queued: the worker exits
        try:
            self.proc.wait(timeout=2)
        except Exception:  # noqa: BLE001
            self.proc.kill()
            self.proc.wait()


class _ReadPool:
    """Reader processes, started on first use, stopped at exit. Not
    multiprocessing: its spawned children re-run the parent's __main__
    script, and a forked child of a process running Arrow threads is unsafe."""

    def __init__(self, n: int) -> None:
        self.workers = [_Worker() for _ in range(n)]

    def submit(self, fn: str, root: str, items: list[Any]) -> _WorkerTask:
        with _pool_lock:
            live = [w for w in self.workers if w.alive]
            if not live:
                raise RuntimeError("no reader process left")
            return min(live, key=lambda w: w.load).submit(fn, root, items)

    def stop(self) -> None:
        with _pool_lock:
            for w in self.workers:
                w.stop()


_pool_lock = threading.RLock()
_read_pool_instance: _ReadPool | None = None


def _process_pool() -> _ReadPool:
    global _read_pool_instance
    with _pool_lock:
        if _read_pool_instance is None:
            _read_pool_instance = _ReadPool(_PARALLEL_WORKERS)
            atexit.register(_read_pool_instance.stop)
        return _read_pool_instance


def stop_process_pool() -> None:
    """Stop the reader processes now (they start again when next needed)."""
    with _pool_lock:
        pool = _read_pool_instance
    if pool is not None:
        _discard_process_pool(pool)


def _discard_process_pool(pool: Any) -> None:
    global _read_pool_instance
    with _pool_lock:
        if _read_pool_instance is pool:
            _read_pool_instance = None
    try:
        pool.stop()
    except Exception:  # noqa: BLE001 - a broken pool is being dropped anyway
        pass


def _worker_main(parent: int) -> None:
    """A reader process: serve requests from stdin until it closes, JSON
    reads before data files, oldest first within each."""
    die_with_parent()  # the harness leaves no orphans, even when it is killed
    if os.getppid() != parent:
        return  # the parent died before that took effect
    try:  # a helper: the thread that parses and checks goes first
        os.nice(HELPER_NICE)
    except OSError:
        pass
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    requests: queue.PriorityQueue = queue.PriorityQueue()
    end = (-1, 0, None)  # stdin closed: nobody wants what is still queued
    withdrawn: set[int] = set()

    def drain() -> None:  # keep stdin empty, so the parent's writes never block
        try:
            while True:
                head = inp.read(8)
                if len(head) < 8:
                    break
                tid, fn, root, items = pickle.loads(inp.read(int.from_bytes(head, "little")))
                if fn == _WITHDRAW:
                    withdrawn.add(items)
                    continue
                requests.put((_PRIORITY.get(fn, 1), tid, (fn, root, items)))
        except Exception:  # noqa: BLE001 - a broken request stream ends the worker
            pass
        requests.put(end)

    threading.Thread(target=drain, daemon=True).start()
    funcs: dict[str, Callable[[str, Any], Any]] = {
        "commits": _pool_read_commits,
        "parquet": _pool_read_parquet,
        "checkpoints": _pool_compare,
    }
    while True:
        _, tid, req = requests.get()
        if req is None:
            return
        try:
            fn, root, items = req
            if tid in withdrawn:  # the parent does it: replied to as failed, and dropped there
                withdrawn.discard(tid)
                result = None
            else:
                result = funcs[fn](root, items)
            data = pickle.dumps((tid, result), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:  # noqa: BLE001 - the parent does the batch itself
            data = pickle.dumps((tid, None), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(data).to_bytes(8, "little") + data)
        out.flush()


def _local_file(root: str, path: str) -> str | None:
    """The local file an add path names (relative URI), or None for an
    absolute URI, which the worker leaves to the ordinary path."""
    # The usual data file path has neither a scheme nor an escape: no
    # pattern matched and no unquoting, a few microseconds a file.
    if ":" in path and _SCHEME_RE.match(path):
        return None
    return os.path.join(root, unquote(path) if "%" in path else path)


# A commit a worker process read, parsed and validated: its bytes (they
# cost less to send and parse again than its actions cost to send), the
# problems _check_actions found (only commits with no fatal error), whether
# orjson parsed it (then it has no int orjson may misread, and the parent
# need not look for one again), and its actions where it was read in the
# process that uses them (else None). A plain tuple: a long log sends a
# million, and pickle makes tuples without a call.
Parsed = tuple[bytes, list[LogProblem], bool, list[dict] | None]


def parsed_actions(p: Parsed) -> list[dict]:
    """The actions of a commit a worker read (or the checking process)."""
    data, _, fast, kept = p
    if kept is not None:
        return kept
    got = _parse_orjson(data, digits_checked=True) if fast else None
    return got if got is not None else parse_commit_bytes(data)


def _pool_read_commits(root: str, items: list[tuple[int, str]], keep: bool = False) -> list[Parsed | None]:
    """Commit files read, parsed and validated (a worker's task); `keep`:
    in the process that uses them, which keeps the parsed actions."""
    out: list[Parsed | None] = []
    fds = _read_ahead([os.path.join(root, rel) for _, rel in items])
    for (version, _rel), fd in zip(items, fds, strict=True):
        try:
            data = _take(fd)
            actions, fast = parse_commit_bytes_by(data)
            err, problems = _check_actions(version, actions)
            out.append(None if err else (data, problems, fast, actions if keep else None))
        except Exception:  # noqa: BLE001 - the parent reads it again and reports
            out.append(None)
    return out


def _pool_read_parquet(root: str, paths: list[str]) -> tuple[list[tuple[int, int, int] | None], list[Any]]:
    """Decode data files; entry i is (payload, offset, rows) or None. Files
    with the same schema (metadata included) share one payload: the
    columns' values as Python lists where the schema's types come back
    from them exactly (_list_safe), else Arrow IPC."""
    entries: list[tuple[int, int, int] | None] = []
    # Each group: its schema, and its files as Arrow tables or column lists.
    groups: list[tuple[pa.Schema, list[pa.Table | list[list[Any]]]]] = []
    offset = 0
    fds = _read_ahead([_local_file(root, path) for path in paths])
    for fd in fds:
        try:
            schema, got, n = _decode_parquet(_take(fd))
        except Exception:  # noqa: BLE001 - the parent retries it and reports
            entries.append(None)
            continue
        if groups and (groups[-1][0] is schema or groups[-1][0].equals(schema, check_metadata=True)):
            groups[-1][1].append(got)
        else:
            groups.append((schema, [got]))
            offset = 0
        entries.append((len(groups) - 1, offset, n))
        offset += n
    payloads: list[Any] = []
    for gi, (schema, files) in enumerate(groups):
        try:
            if _list_safe(schema):
                # The parent's checkers want Python values: one conversion
                # per column of a run of Arrow-decoded files here, not one
                # per file there.
                cols: list[list[Any]] = [[] for _ in schema]
                tables: list[pa.Table] = []
                for got in [*files, None]:
                    if isinstance(got, pa.Table):
                        tables.append(got)
                        continue
                    if tables:
                        table = pa.concat_tables(tables).combine_chunks() if len(tables) > 1 else tables[0]
                        for col, c in zip(cols, table.columns, strict=True):
                            col += c.to_pylist()
                        tables = []
                    if got is not None:
                        for col, c in zip(cols, got, strict=True):
                            col += c
                payloads.append((schema, cols))
                continue
            # One contiguous batch: per-file record batches would cost more
            # to frame than the files cost to decode.
            arrow = [t for t in files if isinstance(t, pa.Table)]  # all of them: not _list_safe
            table = pa.concat_tables(arrow).combine_chunks() if len(arrow) > 1 else arrow[0]
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            payloads.append(sink.getvalue().to_pybytes())
        except Exception:  # noqa: BLE001 - e.g. a type IPC cannot carry: the parent reads these
            payloads.append(b"")
            entries = [None if e is not None and e[0] == gi else e for e in entries]
    return entries, payloads


# Arrow's view types (delta-rs 1.x writes its strings as them), where this
# pyarrow has them, and the kind _fastpq decodes each as.
_VIEW_KINDS = {pa.string_view(): "s", pa.binary_view(): "y"} if hasattr(pa, "string_view") else {}


# The Python value each Arrow type of a data file's column becomes, as the
# kind _fastpq decodes it (None: Arrow decodes the file).
_FAST_KINDS = {
    pa.int32(): "i",
    pa.uint32(): "I",
    pa.int64(): "q",
    pa.uint64(): "Q",
    pa.float32(): "f",
    pa.float64(): "d",
    pa.bool_(): "b",
    pa.string(): "s",
    pa.large_string(): "s",
    pa.binary(): "y",
    pa.large_binary(): "y",
    **_VIEW_KINDS,
}
# By a footer's key (its bytes but the row counts and row groups, which is
# all the Arrow schema is made from): that schema, as Arrow read the first
# file with it, and the kinds _fastpq decodes such files' columns as.
_fast_schemas: dict[bytes, pa.Schema] = {}
_fast_kinds: dict[bytes, str | None] = {}
_FAST_SCHEMAS_KEPT = 256


def _decode_parquet(data: bytes) -> tuple[pa.Schema, pa.Table | list[list[Any]], int]:
    """A data file's schema, its values (as column lists where _fastpq
    decodes it, else its Arrow table) and its row count. The first file of
    each footer key is Arrow's, and _fastpq is used for that key only if it
    decodes that file to the very values Arrow does."""
    got = _fastpq.decode(data, _fast_kinds) if _fastpq is not None else None
    if got is not None and got[1] is not None:
        cols = got[1]
        return _fast_schemas[got[0]], cols, len(cols[0])
    table = _read_parquet(data)
    schema = table.schema  # a new object each time it is asked for
    if _fastpq is not None and got is not None and got[0] not in _fast_kinds:
        key = got[0]
        if len(_fast_kinds) >= _FAST_SCHEMAS_KEPT:
            _fast_kinds.clear()
            _fast_schemas.clear()
        _fast_schemas[key] = schema
        _fast_kinds[key] = _kinds_of(schema)
        if _fast_kinds[key] is not None:
            again = _fastpq.decode(data, _fast_kinds)
            if again is not None and again[1] is not None and again[1] != [c.to_pylist() for c in table.columns]:
                _fast_kinds[key] = None
    return schema, table, table.num_rows


def _kinds_of(schema: pa.Schema) -> str | None:
    """The kind _fastpq decodes each column of a schema as; None where it
    decodes none of its files."""
    kinds = "".join(_FAST_KINDS.get(f.type, "?") for f in schema)
    return kinds if kinds and "?" not in kinds and _list_safe(schema) else None


def _list_safe(schema: pa.Schema) -> bool:
    """Types whose values pa.array(values, type) turns back into the same
    array, and names that are unique (a column is found by its name)."""
    t = pa.types
    return len(set(schema.names)) == len(schema.names) and all(
        t.is_integer(f.type)
        or t.is_float32(f.type)
        or t.is_float64(f.type)
        or t.is_boolean(f.type)
        or t.is_string(f.type)
        or t.is_large_string(f.type)
        or t.is_binary(f.type)
        or t.is_large_binary(f.type)
        or f.type in _VIEW_KINDS
        or t.is_date32(f.type)
        or t.is_null(f.type)
        for f in schema
    )


class _Rows:
    """A data file a worker process decoded, as Python values per column:
    what the checkers read (column), and the Arrow table it was (table)."""

    __slots__ = ("schema", "_cols", "_offset", "num_rows")

    def __init__(self, schema: pa.Schema, cols: dict[str, list[Any]], offset: int, num_rows: int) -> None:
        """`cols`: the batch's columns by name (its names are unique: _list_safe)."""
        self.schema, self._cols, self._offset, self.num_rows = schema, cols, offset, num_rows

    def column(self, name: str) -> list[Any] | None:
        """The column's values (a list of the caller's own); None when the
        file has no such column."""
        col = self._cols.get(name)
        return None if col is None else col[self._offset : self._offset + self.num_rows]

    def table(self) -> pa.Table:
        return pa.Table.from_arrays(
            [pa.array(self.column(f.name), type=f.type) for f in self.schema], schema=self.schema
        )


def _unpack_parquet(result: tuple[list, list[Any]], n: int) -> list[pa.Table | _Rows | None]:
    entries, payloads = result
    tables: list[Any] = []
    for p in payloads:
        if isinstance(p, tuple):
            # By name once per batch: a checker asks a few columns of every file.
            tables.append((p[0], dict(zip(p[0].names, p[1], strict=True))))
        else:
            tables.append(pa.ipc.open_stream(pa.py_buffer(p)).read_all() if p else None)
    out: list[pa.Table | _Rows | None] = []
    for e in entries:
        got = None if e is None else tables[e[0]]
        if got is None:
            out.append(None)
        elif isinstance(got, tuple):
            out.append(_Rows(got[0], got[1], e[1], e[2]))
        else:
            out.append(got.slice(e[1], e[2]))
    if len(out) != n:
        raise ValueError("worker returned a wrong number of files")
    return out


class _BatchStream:
    """`fn` ("commits" or "parquet") over a list of files in batches of
    _PARALLEL_BATCH, done by the worker processes in order, at most `window`
    batches ahead of the consumer. Files may be appended while it runs (the
    log is still being parsed); finish() says there are no more."""

    def __init__(self, fn: str, root: str, window: int, batch: int | None = None) -> None:
        self.fn, self.root, self.window, self.batch = fn, root, window, batch
        self.items: list[Any] = []
        self.complete = False
        self.submitted = 0
        self.tasks: deque[tuple[int, int, _WorkerTask | None]] = deque()
        self.pool: _ReadPool | None
        try:
            self.pool = _process_pool()
        except Exception:  # noqa: BLE001 - no processes here: the ordinary path does it all
            self.pool = None

    def extend(self, items: Iterable[Any]) -> None:
        self.items.extend(items)
        self._submit()

    def finish(self) -> None:
        self.complete = True
        self._submit()

    def _submit(self) -> None:
        while len(self.tasks) < self.window:
            avail = len(self.items) - self.submitted
            size = self.batch or _PARALLEL_BATCH
            if avail <= 0 or (avail < size and not self.complete):
                return
            start, n = self.submitted, min(size, avail)
            task = None
            if self.pool is not None:
                try:
                    task = self.pool.submit(self.fn, self.root, self.items[start : start + n])
                except Exception:  # noqa: BLE001 - a broken pool: the rest goes the ordinary way
                    _discard_process_pool(self.pool)
                    self.pool = None
            self.tasks.append((start, n, task))
            self.submitted += n

    def next(self) -> tuple[int, int, Any] | None:
        """(first item, items, the worker's reply or None) of the next batch;
        None when every batch has been taken."""
        self._submit()
        if not self.tasks:
            return None
        start, n, task = self.tasks.popleft()
        result = task.result() if task is not None else None
        self._submit()
        return start, n, result

    def front_ready(self) -> bool:
        """Whether next() would return without waiting for a worker."""
        self._submit()
        return not self.tasks or self.tasks[0][2] is None or self.tasks[0][2].done.is_set()

    def take_back(self, leave: int = 2) -> tuple[int, int] | None:
        """(first item, items) of the batch submitted last, withdrawn from
        its worker for the caller to do itself while it waits for the
        first: the caller works from the other end. None when no more than
        `leave` batches are in flight, or the last is done already."""
        if len(self.tasks) <= leave:
            return None
        start, n, task = self.tasks[-1]
        if task is not None and task.done.is_set():
            return None
        self.tasks.pop()
        if task is not None:
            task.withdraw()
        return start, n

    def take_last(self) -> tuple[int, int] | None:
        """take_back once every batch is submitted: the very last batch,
        while another is left."""
        if not self.complete or self.submitted < len(self.items):
            return None
        return self.take_back(leave=1)

    def close(self) -> None:
        for _, _, task in self.tasks:
            if task is not None:
                task.cancel()
        self.tasks.clear()
        self.complete, self.items = True, self.items[: self.submitted]
