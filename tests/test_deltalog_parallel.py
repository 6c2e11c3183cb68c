"""The log reader's fast paths give exactly what the plain paths give.

Long runs are read with worker processes (harness.deltalog: JSON commits
parsed and validated in workers, data files decoded in workers and sent back
as Arrow IPC), a one-pass JSON line parser, a cheaper parquet reader and a
per-commit action index. Here the thresholds are lowered so small tables take
the parallel path, and everything observable (commits, problems in order,
every file's rows and schema, the checkers' verdicts) is compared with the
sequential reader on the same folder, broken files included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.bench.synth_run import write_run
from harness.check.pipeline import check_run
from harness.core import fastjson
from harness.deltalog import Commit, _pool, actions, column_values, datafiles, read_log
from harness.deltalog import read as reader

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small tables take the parallel path, in many small batches."""
    monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 16)
    monkeypatch.setattr(_pool, "_PARALLEL_BATCH", 7)
    monkeypatch.setattr(_pool, "_PARALLEL_WINDOW", 3)
    monkeypatch.setattr(_pool, "_PARALLEL_WINDOW_COMMITS", 4)
    monkeypatch.setattr(_pool, "_PARALLEL_WINDOW_PREFETCH", 5)


def _sequential(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 10**9)


def _broken_run(tmp_path: Path) -> Path:
    """A generated run with every kind of damage the reader must report."""
    run = tmp_path / "run"
    write_run(run, 260, seed=9, checkpoint_interval=0)
    table = run / "table"
    log_dir = table / "_delta_log"
    adds = []
    for v in range(2, 200):
        for line in (log_dir / f"{v:020d}.json").read_text().splitlines():
            a = json.loads(line)
            if "add" in a:
                adds.append((v, a["add"]["path"]))
    (table / adds[10][1]).write_bytes(b"not parquet at all")  # unreadable data file
    (table / adds[20][1]).unlink()  # lost data file
    (table / adds[30][1]).write_bytes(b"")  # empty data file
    # Another schema: an extra column, and types that differ.
    pq.write_table(
        pa.table({"k": pa.array([7], pa.int32()), "writer": ["x"], "prev_writer": [None], "extra": [1.5]}),
        table / adds[40][1],
    )
    pq.write_table(
        pa.table({"k": pa.array([], pa.int64()), "writer": pa.array([], pa.string())}), table / adds[41][1]
    )  # no rows, a column fewer
    pq.write_table(
        pa.table(
            {
                "k": [8],
                "writer": ["y"],
                "prev_writer": [None],
                "ts": pa.array([1], pa.timestamp("ns", tz="UTC")),
                "d": pa.array([1], pa.decimal128(5, 2)),
            }
        ),
        table / adds[42][1],
    )  # types whose Python values do not make the same array again: sent as Arrow
    with (log_dir / f"{60:020d}.json").open("a") as fh:
        fh.write('{"add": {"path": "broken\n')  # unparseable commit
    text = (log_dir / f"{70:020d}.json").read_text()
    first_add = next(line for line in text.splitlines() if '"add"' in line)
    (log_dir / f"{70:020d}.json").write_text(text + first_add + "\n")  # duplicate file action
    (log_dir / f"{80:020d}.json").write_bytes(b"\xef\xbb\xbf" + (log_dir / f"{80:020d}.json").read_bytes())  # BOM
    (log_dir / f"{90:020d}.json").write_text('["not", "an", "action"]\n')
    (log_dir / f"{95:020d}.json").unlink()  # a gap
    return run


_COLUMNS = ("k", "writer", "prev_writer", "extra", "absent")


def _observe(run: Path, prefetch: bool) -> dict:
    log = read_log(str(run / "table"), prefetch_data=prefetch)
    # What a checker replaying the log reads first (values the workers may
    # have sent), then every file's table (built from those values).
    columns = {}
    for _v, _c, adds, _r in log.replay():
        for a in adds:
            columns[a["path"]] = log.add_columns(a, _COLUMNS)
    tables = {}
    for _v, _c, adds, _r in log.replay():
        for a in adds:
            t = log.file_rows(a["path"])
            tables[a["path"]] = (t.schema, t.to_pylist())
            assert log.add_columns(a, _COLUMNS) == [column_values(t, c) for c in _COLUMNS]
    return {
        "columns": columns,
        "versions": log.versions,
        "actions": {v: log.commits[v].actions for v in log.versions},
        "problems": [p.to_json() for p in log.problems],
        "tables": tables,
        "checkpoints": log.checkpoint_versions,
    }


def _assert_same(a: dict, b: dict) -> None:
    assert a["versions"] == b["versions"]
    assert a["columns"] == b["columns"]
    assert a["actions"] == b["actions"]
    assert a["problems"] == b["problems"]
    assert a["tables"].keys() == b["tables"].keys()
    for path, (schema, rows) in a["tables"].items():
        other_schema, other_rows = b["tables"][path]
        assert schema.equals(other_schema, check_metadata=True), path
        assert rows == other_rows, path


def test_parallel_read_is_the_sequential_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _broken_run(tmp_path)
    _sequential(monkeypatch)
    want = _observe(run, prefetch=False)
    kinds = {p["kind"] for p in want["problems"]}
    assert {"data-file-unreadable", "data-file-missing", "unparseable", "duplicate-file-action", "gap"} <= kinds
    unpacked: list[int] = []
    real_unpack = datafiles._unpack_parquet

    def counting_unpack(result, n):
        tables = real_unpack(result, n)
        unpacked.append(sum(t is not None for t in tables))
        kinds.update(type(t).__name__ for t in tables if t is not None)
        return tables

    kinds: set[str] = set()

    parsed: list[int] = []
    real_fetch = reader._parallel_fetch

    def counting_fetch(*a):
        for v, body in real_fetch(*a):
            parsed.append(type(body) is tuple)  # what a worker read (_pool.Parsed)
            yield v, body

    monkeypatch.setattr(datafiles, "_unpack_parquet", counting_unpack)
    monkeypatch.setattr(reader, "_parallel_fetch", counting_fetch)
    for prefetch in (True, False):  # the hint, and the stream a sequential replay starts by itself
        monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 16)
        monkeypatch.setattr(_pool, "_PARALLEL_BATCH", 7)
        monkeypatch.setattr(_pool, "_PARALLEL_WINDOW", 3)
        monkeypatch.setattr(_pool, "_PARALLEL_WINDOW_COMMITS", 4)
        monkeypatch.setattr(_pool, "_PARALLEL_WINDOW_PREFETCH", 5)
        unpacked.clear()
        parsed.clear()
        _assert_same(want, _observe(run, prefetch=prefetch))
        # The workers did the work, except for the broken files.
        assert sum(unpacked) >= len(want["tables"]) - 40 and len(parsed) == len(want["versions"]) + 2
        assert sum(parsed) == len(parsed) - 2  # the unparseable one and the one that is not actions
        assert kinds == {"_Rows", "Table"}  # values where they make the same table again, else Arrow


def test_commit_batches_the_checking_thread_reads_itself_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: None
) -> None:
    # Never finding the next batch done, the checking thread reads the last
    # one in flight itself, again and again: the log is the same, damage
    # and all, as one read in order by one thread.
    run = _broken_run(tmp_path)
    with monkeypatch.context() as m:
        _sequential(m)
        want = _observe(run, prefetch=False)
    taken: list[tuple[int, int]] = []
    take_back = _pool._BatchStream.take_back

    def taking(self: _pool._BatchStream) -> tuple[int, int] | None:
        got = take_back(self)
        if got is not None:
            taken.append(got)
        return got

    monkeypatch.setattr(_pool._BatchStream, "front_ready", lambda self: False)
    monkeypatch.setattr(_pool._BatchStream, "take_back", taking)
    _assert_same(want, _observe(run, prefetch=True))
    assert len(taken) > 10 and len({start for start, _ in taken}) == len(taken)


def test_check_run_verdicts_are_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    write_run(run, 300, seed=4, inject="G2-item", checkpoint_interval=50)
    _sequential(monkeypatch)
    want = check_run(run, write=False).doc
    monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 16)
    monkeypatch.setattr(_pool, "_PARALLEL_BATCH", 5)
    got = check_run(run, write=False).doc
    for doc in (want, got):  # timings differ run to run
        doc.pop("check_seconds"), doc.pop("stage_seconds")
    assert got == want
    assert got["verdict"] == "invalid"


def test_random_access_after_a_replay(tmp_path: Path, parallel: None) -> None:
    """rows_at and out-of-order file_rows calls still read the right files."""
    run = tmp_path / "run"
    write_run(run, 200, seed=3, checkpoint_interval=0)
    log = read_log(str(run / "table"), prefetch_data=True)
    paths = [a["path"] for _v, _c, adds, _r in log.replay() for a in adds]
    for p in reversed(paths[len(paths) // 2 :]):
        log.file_rows(p)
    plain = read_log(str(run / "table"))
    for v in (5, 50, log.latest_version):
        assert log.rows_at(v).to_pylist() == plain.rows_at(v).to_pylist()
    for p in paths[:40]:
        assert log.file_rows(p).to_pylist() == plain.file_rows(p).to_pylist()


def test_dead_workers_fall_back_to_the_ordinary_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallel: None
) -> None:
    run = _broken_run(tmp_path)
    pool = _pool._process_pool()
    for w in pool.workers:
        w.proc.kill()
        w.proc.wait()
    got = _observe(run, prefetch=True)
    _sequential(monkeypatch)
    _assert_same(_observe(run, prefetch=False), got)
    # A broken pool is replaced by a fresh one next time.
    monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 16)
    _assert_same(got, _observe(run, prefetch=True))
    assert any(w.alive for w in _pool._process_pool().workers)


_SCRIPT = """
import harness.deltalog as dl
from harness.deltalog import _pool
_pool._PARALLEL_MIN_FILES = 16
_pool._PARALLEL_BATCH = 7
log = dl.read_log({table!r}, prefetch_data=True)
n = sum(len(log.file_rows(a["path"])) for _v, _c, adds, _r in log.replay() for a in adds)
print("ran", n, flush=True)
print("workers", *[w.proc.pid for w in _pool._process_pool().workers], flush=True)
{tail}
"""


def test_an_unguarded_script_runs_once_and_leaves_no_workers(tmp_path: Path) -> None:
    """Reader processes never re-run the caller's __main__ (multiprocessing's
    spawn would), and they die with their parent, even a killed one."""
    run = tmp_path / "run"
    write_run(run, 120, seed=1, checkpoint_interval=0)
    script = tmp_path / "script.py"
    for tail in ("", "import os; os.kill(os.getpid(), 9)"):
        script.write_text(_SCRIPT.format(table=str(run / "table"), tail=tail))
        proc = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        lines = proc.stdout.splitlines()
        assert [line.split()[0] for line in lines] == ["ran", "workers"], proc.stdout + proc.stderr
        pids = [int(x) for x in lines[1].split()[1:]]
        assert pids
        deadline = time.monotonic() + 10
        alive = pids
        while alive and time.monotonic() < deadline:
            alive = [p for p in pids if _running(p)]
            time.sleep(0.05)
        assert not alive, f"reader processes {alive} outlived their parent"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------- JSON lines

_LINE_PIECES = st.sampled_from(
    [
        b'{"add": {"path": "a", "size": 1}}',
        b'{"commitInfo": {"x": "\xe2\x80\xa8 sep"}}',
        b"{}",
        b"[1, 2]",
        b"1",
        b"null",
        b'"str"',
        b" ",
        b"\t",
        b"\r",
        b"\x0b",
        b"\x0c",
        b"\xef\xbb\xbf",
        b"\x00",
        b"\xff",
        b"\xc3\xa9",
        b"\xed\xa0\x80",
        b"{",
        b"}",
        b",",
        b'{"a": 1}, {"b": 2}',
        b"[",
        b"]",
        b"NaN",
        b"\xe3\x80\x80",
        b"\xc2\xa0",
        b'{"a": "\\ud800"}',
        b"\n",
        # What orjson reads otherwise, or only nearly so.
        b'{"n": 123456789012345678901234567890}',
        b'{"n": 9223372036854775808}',
        b'{"n": 9007199254740993}',
        b'{"f": 1e400}',
        b'{"f": 1.5e-320}',
        b'{"f": 0.1, "g": -0.0}',
        b'{"d": 1, "d": 2}',
        b'{"s": "\\u0000"}',
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=12))
def test_json_fast_path_is_json_loads_per_line(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    try:
        want = ("ok", actions._parse_lines(data))
    except ValueError as e:
        want = ("error", str(e))
    try:
        got = ("ok", actions.parse_commit_bytes(data))
    except ValueError as e:
        got = ("error", str(e))
    assert got == want


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=12))
def test_a_commit_a_worker_parsed_is_parsed_again_as_json_would(pieces: list[bytes]) -> None:
    """The parent parses a worker's commit again without looking for long
    ints when the worker's orjson parse succeeded: it gets what json gives."""
    data = b"".join(pieces)
    with tempfile.TemporaryDirectory() as root:
        Path(root, "c.json").write_bytes(data)
        (parsed,) = _pool._pool_read_commits(root, [(1, "c.json")])
    if parsed is None:
        return  # the parent reads and judges it the ordinary way
    assert _pool.parsed_actions(parsed) == actions._parse_lines(data)
    assert parsed[2] == (actions._parse_orjson(data) is not None)  # whether orjson parsed it


def test_a_long_int_in_a_commit_a_worker_parsed_stays_an_int(tmp_path: Path) -> None:
    data = b'{"commitInfo": {"timestamp": 1, "n": 123456789012345678901234567890}}\n'
    (tmp_path / "c.json").write_bytes(data)
    (parsed,) = _pool._pool_read_commits(str(tmp_path), [(1, "c.json")])
    assert parsed is not None and not parsed[2]  # orjson did not parse it
    assert _pool.parsed_actions(parsed) == [{"commitInfo": {"timestamp": 1, "n": 123456789012345678901234567890}}]


_FILE_ACTIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "remove", "commitInfo"]),
        st.sampled_from(["p", "q", "r"]),
        st.one_of(
            st.none(),
            st.just("junk"),
            st.builds(
                lambda d, off: {"storageType": "u", "pathOrInlineDv": d, "offset": off},
                st.sampled_from(["x", "y"]),
                st.sampled_from([None, 1]),
            ),
        ),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_FILE_ACTIONS, st.booleans()), max_size=12))
def test_live_paths_follow_the_replay(commits: list[tuple[list[tuple[str, str, Any]], bool]]) -> None:
    """_LivePaths (what the checkpoint comparisons are given) against its
    definition: the paths of the live (path, deletion vector) keys, in file
    order, and what entered and left between two asks."""
    from harness.deltalog.actions import _file_key
    from harness.deltalog.log import _LivePaths

    live_paths = _LivePaths()
    keys: set[tuple[str, Any]] = set()
    asked: set[str] = set()
    for v, (acts, ask) in enumerate(commits):
        actions: list[dict] = []
        for kind, path, dv in acts:
            if kind == "commitInfo":
                actions.append({"commitInfo": {}})
                continue
            inner: dict[str, Any] = {"path": path}
            if dv is not None:
                inner["deletionVector"] = dv
            actions.append({kind: inner})
            if kind == "add":
                keys.add(_file_key(inner))
            else:
                keys.discard(_file_key(inner))
        live_paths.apply(Commit(v, actions))
        now = {p for p, _ in keys}
        assert set(live_paths.count) == now
        if ask:
            entered, left = live_paths.changes()
            assert (set(entered), set(left)) == (now - asked, asked - now)
            asked = now


def test_commit_action_index_is_a_view() -> None:
    c = Commit(
        3,
        [{"commitInfo": {"readVersion": 2}}, {"add": {"path": "a"}}, {"add": {"path": "b"}}, {"remove": {"path": "c"}}],
    )
    assert [a["path"] for a in c.adds] == ["a", "b"] and c.read_version == 2
    c.adds.append({"path": "z"})  # callers get their own lists
    assert len(c.adds) == 2
    c.actions.append({"add": {"path": "d"}})  # a copy: a commit is not changed once read
    assert [a["path"] for a in c.adds] == ["a", "b"]
    assert [k for k, _ in c.in_order()] == ["commitInfo", "add", "add", "remove"]
    c.actions = [{"metaData": {"id": "m"}}]  # a new list is seen
    assert c.adds == [] and c.metadata == {"id": "m"} and c.actions == [{"metaData": {"id": "m"}}]
    assert Commit(1, ["add"]).txns == [] and Commit(1, ["add"]).actions == ["add"]  # not actions: the plain way
    two = Commit(2, [{"add": {"path": "a"}, "remove": {"path": "b"}}])
    assert two.adds == [{"path": "a"}] and two.actions == [{"add": {"path": "a"}, "remove": {"path": "b"}}]


def test_signal_safety_of_worker_stop() -> None:
    """Stopping the pool twice, or after its workers died, is harmless."""
    pool = _pool._process_pool()
    for w in pool.workers:
        os.kill(w.proc.pid, signal.SIGKILL)
    _pool._discard_process_pool(pool)
    _pool._discard_process_pool(pool)
    assert _pool._process_pool() is not pool


def _damaged_checkpoints(tmp_path: Path) -> Path:
    """A run with a checkpoint every 5 commits, four of them wrong in a way
    check_checkpoints reports: a file dropped, a file added, another
    metaData, and one cut off mid-write."""
    run = tmp_path / "run"
    write_run(run, 160, seed=5, checkpoint_interval=5)
    log_dir = run / "table" / "_delta_log"

    def rewrite(v: int, change) -> None:
        path = log_dir / f"{v:020d}.checkpoint.parquet"
        pq.write_table(change(pq.read_table(path)), path)

    def drop_add(t: pa.Table) -> pa.Table:
        first = next(i for i, a in enumerate(t["add"].to_pylist()) if a is not None)
        return pa.concat_tables([t.slice(0, first), t.slice(first + 1)])

    def extra_add(t: pa.Table) -> pa.Table:
        i = next(i for i, a in enumerate(t["add"].to_pylist()) if a is not None)
        row = t.slice(i, 1).to_pylist()[0]
        row["add"]["path"] = "part-not-in-json.parquet"
        return pa.concat_tables([t, pa.Table.from_pylist([row], schema=t.schema)])

    def other_metadata(t: pa.Table) -> pa.Table:
        rows = t.to_pylist()
        for r in rows:
            if r.get("metaData"):
                r["metaData"]["description"] = "not the JSON's"
        return pa.Table.from_pylist(rows, schema=t.schema)

    rewrite(40, drop_add)
    rewrite(75, extra_add)
    rewrite(110, other_metadata)
    cut = log_dir / f"{130:020d}.checkpoint.parquet"
    cut.write_bytes(cut.read_bytes()[:100])
    return run


def test_checkpoints_compared_by_workers_find_what_the_plain_comparison_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _damaged_checkpoints(tmp_path)
    _sequential(monkeypatch)
    plain = read_log(str(run / "table"))
    want = [p.to_json() for p in plain.check_checkpoints()]
    assert {(p["kind"], p["version"]) for p in want} == {
        ("checkpoint-mismatch", 40),
        ("checkpoint-mismatch", 75),
        ("checkpoint-mismatch", 110),
    }
    assert ("checkpoint-broken", 130) in {(p.kind, p.version) for p in plain.problems}
    monkeypatch.setattr(_pool, "_PARALLEL_MIN_FILES", 16)
    monkeypatch.setattr(_pool, "_PARALLEL_CHECKPOINTS", 4)
    monkeypatch.setattr(_pool, "_PARALLEL_BATCH_CHECKPOINTS", 3)
    log = read_log(str(run / "table"))
    compared = log._worker_comparisons

    def counting() -> dict:
        got = compared()
        counted.update(got)
        return got

    counted: dict = {}
    monkeypatch.setattr(log, "_worker_comparisons", counting)
    assert [p.to_json() for p in log.check_checkpoints()] == want
    # Every checkpoint the workers could read, they compared: all but the cut one.
    assert sorted(counted) == plain.checkpoint_versions  # the cut one is known unreadable: not among them
    assert 130 not in counted and len(counted) > 20
    assert [p.to_json() for p in log.problems] == [p.to_json() for p in plain.problems]
    # The checking thread, never finding the first batch done, compares
    # every batch but the first itself, from the last one down (here with
    # no worker to take them from, so that it surely does): the same
    # problems.
    monkeypatch.setattr(_pool, "_process_pool", _no_pool)
    monkeypatch.setattr(_pool._BatchStream, "front_ready", lambda self: False)
    taken: list[tuple[int, int]] = []
    take_last = _pool._BatchStream.take_last

    def taking(self: _pool._BatchStream) -> tuple[int, int] | None:
        got = take_last(self)
        if got is not None:
            taken.append(got)
        return got

    monkeypatch.setattr(_pool._BatchStream, "take_last", taking)
    stolen = read_log(str(run / "table"))
    assert [p.to_json() for p in stolen.check_checkpoints()] == want
    assert [p.to_json() for p in stolen.problems] == [p.to_json() for p in plain.problems]
    batch = _pool._PARALLEL_BATCH_CHECKPOINTS
    assert [s for s, _ in taken] == list(range(batch, len(plain.checkpoint_versions), batch))[::-1]


def _no_pool() -> _pool._ReadPool:
    raise RuntimeError("no reader processes here")


def test_a_withdrawn_task_fails_and_the_worker_goes_on(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, 40, seed=2, checkpoint_interval=0)
    root = str(run / "table")
    items = [(v, f"_delta_log/{v:020d}.json") for v in range(40)]
    worker = _pool._Worker()
    try:
        first = worker.submit("commits", root, items)
        second = worker.submit("commits", root, items)
        second.withdraw()
        third = worker.submit("commits", root, items)
        for task in (first, second, third):
            assert task.done.wait(30)
        assert second.result() is None

        def datas(task: _pool._WorkerTask) -> list[bytes | None]:
            return [None if p is None else p[0] for p in task.result()]

        assert datas(first) == datas(third) and len(datas(third)) == 40
        assert sum(d is not None for d in datas(third)) >= 30
    finally:
        worker.stop()


def _json_loads(text: str | bytes) -> tuple[str, object]:
    try:
        return ("ok", json.loads(text))
    except ValueError as e:
        return ("error", str(e))


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE_PIECES, max_size=12), st.booleans())
def test_fastjson_loads_is_json_loads(pieces: list[bytes], as_text: bool) -> None:
    """The history's lines (text) and a commit's (bytes) parse as json.loads
    parses them, or fail as it fails."""
    data = b"".join(pieces)
    text: str | bytes = data.decode("utf-8", "replace") if as_text else data
    want = _json_loads(text)
    try:
        got = ("ok", fastjson.loads(text, short=not fastjson.has_long_digits(text)))
    except ValueError as e:
        got = ("error", str(e))
    assert got == want
