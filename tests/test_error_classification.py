"""Error classification (harness/engines/errors.py) against real engine errors.

Three parts:
1. delta-rs: real commit conflicts, provoked by loading two DeltaTable objects
   at the same version and committing with one, then the other (no mocks).
2. Sail: a real Spark Connect server; concurrent UPDATEs from separate
   sessions until a commit conflict appears; plus parse/analysis errors and a
   dead server.
3. Recorded texts: delta-spark / Databricks errors (no JVM here: Maven is out
   of reach), converted by PySpark's own Spark Connect error conversion;
   delta-rs texts that cannot be provoked here; network errors.

Conflicts the spec expects but the engine does not raise are reported with
``pytest.xfail`` and the evidence, so they show in the run summary.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.core.history import FAIL, INFO
from harness.core.history import ErrorClass as E
from harness.engines.errors import (
    RAW_LIMIT,
    Classified,
    classify_deltars,
    classify_deltars_text,
    classify_spark,
    classify_spark_text,
)

REPO = Path(__file__).resolve().parent.parent


# ===========================================================================
# 1. delta-rs, real conflicts
# ===========================================================================

import deltalake  # noqa: E402
import pyarrow as pa  # noqa: E402
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake  # noqa: E402
from deltalake.exceptions import CommitFailedError  # noqa: E402


def _rows(keys: list[int], v: int = 0, p: int | None = None) -> Any:
    n = len(keys)
    return pa.table(
        {
            "k": pa.array(keys, pa.int64()),
            "v": pa.array([v] * n, pa.int64()),
            "p": pa.array([p if p is not None else k % 2 for k in keys], pa.int64()),
        }
    )


def _make_table(path: Path, isolation: str | None = None, partitioned: bool = False) -> str:
    """Two data files (versions 0 and 1), so compaction has work to do."""
    uri = str(path)
    cfg = {"delta.isolationLevel": isolation} if isolation else None
    write_deltalake(uri, _rows(list(range(10))), configuration=cfg, partition_by=["p"] if partitioned else None)
    write_deltalake(uri, _rows([100, 101]), mode="append")
    return uri


def _count(dt: DeltaTable) -> int:
    # QueryBuilder, not to_pyarrow_table(): the latter intermittently aborts
    # the interpreter at exit with deltalake 1.6.6 + pyarrow 26
    # ("terminate called without an active exception").
    from deltalake import QueryBuilder

    t = QueryBuilder().register("t", dt).execute("SELECT count(*) AS c FROM t").read_all()
    return int(t.column("c")[0].as_py())


Op = Callable[[DeltaTable], Any]

OPS: dict[str, Op] = {
    "append": lambda dt: write_deltalake(dt, _rows([999]), mode="append"),
    "delete": lambda dt: dt.delete("k = 1"),
    "delete-all": lambda dt: dt.delete(),
    "update": lambda dt: dt.update(updates={"v": "v + 1"}, predicate="k = 1"),
    "merge": lambda dt: (
        dt.merge(_rows([1], v=7), "s.k = t.k", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    ),
    "delete-p0": lambda dt: dt.delete("p = 0"),
    "append-p1": lambda dt: write_deltalake(dt, _rows([777], p=1), mode="append"),
    "optimize": lambda dt: dt.optimize.compact(),
    "set-property": lambda dt: dt.alter.set_table_properties({"delta.appendOnly": "false"}),
    "add-column": lambda dt: dt.alter.add_columns([deltalake.Field("extra", "long", nullable=True)]),
    "add-feature": lambda dt: dt.alter.add_feature(
        deltalake.TableFeatures.ChangeDataFeed, allow_protocol_versions_increase=True
    ),
    "app-txn": lambda dt: write_deltalake(
        dt,
        _rows([555]),
        mode="append",
        commit_properties=CommitProperties(app_transactions=[Transaction("dj-app", 1)]),
    ),
}


def _race(uri: str, winner: str, loser: str) -> BaseException | None:
    """Both start from the same version; the winner commits first."""
    a, b = DeltaTable(uri), DeltaTable(uri)
    assert a.version() == b.version()
    OPS[winner](a)
    try:
        OPS[loser](b)
    except Exception as exc:  # noqa: BLE001 - the point is to capture it
        return exc
    return None


# (winner, loser, isolation, expected class, spec claim the pair exercises)
CONFLICTS = [
    ("update", "update", None, E.CONCURRENT_APPEND, "M3"),
    ("merge", "merge", "WriteSerializable", E.CONCURRENT_APPEND, "M3"),
    ("delete-all", "update", None, E.CONCURRENT_DELETE_READ, "M3"),
    ("update", "optimize", "WriteSerializable", E.CONCURRENT_DELETE_READ, "M5"),
    ("set-property", "update", None, E.METADATA_CHANGED, "C17"),
    ("add-column", "append", None, E.METADATA_CHANGED, "C17"),
    ("app-txn", "app-txn", None, E.CONCURRENT_TRANSACTION, "E5"),
    ("add-feature", "append", None, E.PROTOCOL_CHANGED, "C17/E6"),
]


@pytest.mark.integration
@pytest.mark.parametrize(
    "winner,loser,isolation,expected,claim",
    CONFLICTS,
    ids=[f"{w}-then-{loser}-{iso or 'default'}" for w, loser, iso, _, _ in CONFLICTS],
)
def test_deltars_conflict_is_classified(tmp_path, winner, loser, isolation, expected, claim):
    uri = _make_table(tmp_path / "t", isolation)
    exc = _race(uri, winner, loser)
    assert isinstance(exc, CommitFailedError), f"{winner} then {loser}: expected a conflict, got {exc!r}"
    c = classify_deltars(exc)
    assert c.cls is expected, c.raw
    assert c.cls.claim == expected.claim
    assert c.definite and c.history_type == FAIL
    assert c.raw.startswith("CommitFailedError: Failed to commit transaction: ")
    # Definite means definite: the loser left no commit behind.
    assert DeltaTable(uri).version() == 2


@pytest.mark.integration
def test_deltars_no_retries_is_unclassified(tmp_path):
    """max_commit_retries=0: the table moved, delta-rs gives up without
    running the conflict checker ("Failed to commit transaction: 0")."""
    uri = _make_table(tmp_path / "t")
    a, b = DeltaTable(uri), DeltaTable(uri)
    a.delete("k = 1")
    with pytest.raises(CommitFailedError) as ei:
        b.delete("k = 2", commit_properties=CommitProperties(max_commit_retries=0))
    assert str(ei.value) == "Failed to commit transaction: 0"
    c = classify_deltars(ei.value)
    assert c.cls is E.UNCLASSIFIED_CONFLICT and c.definite
    assert DeltaTable(uri).version() == 2


@pytest.mark.integration
@pytest.mark.parametrize(
    "winner,loser,partitioned",
    [("delete", "append", False), ("update", "append", False), ("delete-p0", "append-p1", True)],
)
def test_deltars_blind_append_after_dml(tmp_path, winner, loser, partitioned):
    """Spec C9, M2 (WriteSerializable) and P1: a blind append does not read
    the table and cannot conflict with a concurrent DELETE/UPDATE. If delta-rs
    fails it anyway, the error must still classify as a definite conflict."""
    uri = _make_table(tmp_path / "t", "WriteSerializable", partitioned)
    exc = _race(uri, winner, loser)
    # Pinned finding: delta-rs refuses the blind append. Should it commit
    # one day, this fails, and the test becomes the conforming assertion.
    assert exc is not None, (
        f"delta-rs {deltalake.__version__} committed the blind {loser} after {winner}: the "
        f"pinned C9/M2 deviation is gone (version {DeltaTable(uri).version()})"
    )
    assert DeltaTable(uri).version() == 2, "a refused append left a commit"
    c = classify_deltars(exc)
    assert c.cls.is_conflict and c.definite, c.raw
    pytest.xfail(
        f"deviation (spec C9, M2{', P1' if partitioned else ''}): {winner} then blind {loser} "
        f"under WriteSerializable fails with {c.cls.value}"
    )


@pytest.mark.integration
def test_deltars_serializable_delete_after_insert(tmp_path):
    """Spec C16: under Serializable, a DELETE that started before a committed
    INSERT must fail. Here: DELETE of every row, no predicate."""
    uri = _make_table(tmp_path / "t", "Serializable")
    exc = _race(uri, "append", "delete-all")
    # Pinned finding: the DELETE commits. Should delta-rs fail it one day,
    # this fails, and the test becomes the conforming assertion (E1).
    assert exc is None, (
        f"delta-rs {deltalake.__version__} now fails the DELETE ({classify_deltars(exc).cls.value}): "
        f"the pinned C16 deviation is gone"
    )
    dt = DeltaTable(uri)
    assert (dt.version(), _count(dt)) == (3, 1), "the observed outcome changed"
    pytest.xfail(
        f"deviation (spec C14, C16): under Serializable the DELETE commits at version {dt.version()} "
        f"after the INSERT and the inserted row survives ({_count(dt)} row left; history order gives 0)"
    )


@pytest.mark.integration
@pytest.mark.parametrize("loser,rows_if_serial", [("optimize", 12), ("delete-all", 0)])
def test_deltars_compaction_then_rewrite(tmp_path, loser, rows_if_serial):
    """An OPTIMIZE commits first; a later OPTIMIZE or DELETE removes the same
    (already compacted-away) files. Spec M5/M6 say these can conflict, E3
    names the class (ConcurrentDeleteDeleteException). If delta-rs raises, it
    must classify as E3; if it commits, the result is not serializable."""
    uri = _make_table(tmp_path / "t")
    exc = _race(uri, "optimize", loser)
    # Pinned finding: both commit and the table is wrong. Should delta-rs
    # refuse the loser one day, this fails, and the test becomes the
    # conforming assertion (E3).
    assert exc is None, (
        f"delta-rs {deltalake.__version__} now fails {loser} after optimize "
        f"({classify_deltars(exc).cls.value}): the pinned M5/M6 deviation is gone"
    )
    dt = DeltaTable(uri)
    assert dt.version() == 3 and _count(dt) != rows_if_serial, "the observed outcome changed"
    pytest.xfail(
        f"deviation (spec M5/M6, E3, C8): delta-rs {deltalake.__version__}: optimize then {loser} both commit "
        f"(version {dt.version()}); the table holds {_count(dt)} rows where any serial order gives {rows_if_serial}"
    )


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["error", "overwrite"])
def test_deltars_create_race(tmp_path, mode):
    """Two writers create the same table at once. Spec E6 expects the later
    one to fail with ProtocolChangedException.

    Deterministic: the loser's data is a RecordBatchReader whose first batch
    waits until the winner has committed, so the loser has already looked
    for the table (and not found it) when the winner creates it."""
    uri = str(tmp_path / "t")
    schema = pa.schema([("k", pa.int64())])
    started, go = threading.Event(), threading.Event()
    out: dict[str, BaseException | None] = {}

    def batches():
        started.set()
        if not go.wait(20):
            raise RuntimeError("the winner never committed")
        yield pa.record_batch([pa.array([1, 2, 3], pa.int64())], schema=schema)

    def loser() -> None:
        try:
            write_deltalake(uri, pa.RecordBatchReader.from_batches(schema, batches()), mode=mode)
            out["loser"] = None
        except Exception as exc:  # noqa: BLE001
            out["loser"] = exc

    t = threading.Thread(target=loser)
    t.start()
    try:
        assert started.wait(20), "the loser never started"
        write_deltalake(uri, pa.table({"k": pa.array([9], pa.int64())}), mode=mode)
    finally:
        go.set()
        t.join(30)
    assert not t.is_alive(), "create race did not finish"
    exc = out["loser"]
    # Pinned finding: both creators succeed. Should delta-rs fail the later
    # one day, this fails, and the test becomes the conforming assertion (E6).
    assert exc is None, (
        f"delta-rs {deltalake.__version__} now fails the later CREATE "
        f"({classify_deltars(exc).cls.value}): the pinned E6 deviation is gone"
    )
    dt = DeltaTable(uri)
    assert (dt.version(), len(dt.file_uris())) == (1, 2), "the observed outcome changed"
    pytest.xfail(
        f"deviation (spec E6): mode={mode!r}: both creators succeeded; the later commit "
        f"(version {dt.version()}) re-creates the table and leaves {len(dt.file_uris())} data files "
        f"(both writers' rows) instead of failing"
    )


@pytest.mark.integration
def test_deltars_not_a_conflict(tmp_path):
    with pytest.raises(Exception) as ei:
        DeltaTable(str(tmp_path / "missing"))
    c = classify_deltars(ei.value)
    assert type(ei.value).__name__ == "TableNotFoundError"
    assert c == Classified(E.NOT_A_CONFLICT, True, c.raw) and c.history_type == FAIL

    uri = _make_table(tmp_path / "t")
    with pytest.raises(Exception) as ei:
        DeltaTable(uri).delete("no_such_column = 1")
    c = classify_deltars(ei.value)
    assert c.cls is E.NOT_A_CONFLICT and c.definite, c.raw

    with pytest.raises(Exception) as ei:
        write_deltalake(uri, pa.table({"other": pa.array(["x"])}), mode="append")
    c = classify_deltars(ei.value)
    assert c.cls is E.NOT_A_CONFLICT and c.definite, c.raw
    assert DeltaTable(uri).version() == 1


def _s3_options(port: int) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "dj",
        "AWS_SECRET_ACCESS_KEY": "dj",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
        "max_retries": "0",
        "timeout": "2s",
        "connect_timeout": "1s",
    }


@pytest.mark.integration
def test_deltars_network_errors_are_indeterminate():
    # Connection refused: a port nobody listens on.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(OSError) as ei:
        write_deltalake("s3://dj/t", _rows([1]), storage_options=_s3_options(port))
    c = classify_deltars(ei.value)
    assert c.cls is E.NOT_A_CONFLICT and not c.definite and c.history_type == INFO
    assert "Connection refused" in c.raw and "\x1b[" not in c.raw

    # Connection reset: a listener that accepts and resets (SO_LINGER 0).
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.05)
    stop = threading.Event()

    def reset_all() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()

    t = threading.Thread(target=reset_all, daemon=True)
    t.start()
    try:
        with pytest.raises(OSError) as ei:
            write_deltalake("s3://dj/t", _rows([1]), storage_options=_s3_options(srv.getsockname()[1]))
    finally:
        stop.set()
        t.join(5)
        srv.close()
    c = classify_deltars(ei.value)
    assert c.cls is E.NOT_A_CONFLICT and not c.definite, c.raw


# ===========================================================================
# 2. Sail, a real Spark Connect server
# ===========================================================================


def _start_sail(workdir: Path, name: str) -> tuple[Any, str]:
    from harness.core.procs import ManagedProcess, venv_bin

    sail = venv_bin("sail")  # pysail is a dependency: its absence is a failure
    workdir.mkdir(parents=True, exist_ok=True)
    proc = ManagedProcess(
        name,
        [sail, "spark", "server", "--ip", "127.0.0.1", "--port", "0"],
        workdir / f"{name}.log",
        env={**os.environ, "RUST_LOG": "info"},
        cwd=str(workdir),
    ).start()
    try:
        m = proc.wait_for_log(r"Starting the Spark Connect server on 127\.0\.0\.1:(\d+)", 30)
    except Exception:
        proc.stop()
        raise
    return proc, f"sc://127.0.0.1:{m.group(1)}"


@pytest.fixture
def quiet_gc():
    """PySpark 4.0.5 bug: SparkSession.__del__ -> client.close() shuts down the
    process-wide release thread pool; when the garbage collector runs that
    finalizer inside ThreadPoolExecutor.submit (which holds the pool's lock),
    the thread deadlocks. Collect old sessions at a safe point, then keep the
    collector off while sessions are in use."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@pytest.fixture(scope="module")
def sail(tmp_path_factory):
    pytest.importorskip("pyspark.sql.connect.session")
    proc, url = _start_sail(tmp_path_factory.mktemp("sail"), "sail-errors")
    try:
        yield url, tmp_path_factory.mktemp("sail-tables")
    finally:
        proc.stop()
        assert not proc.alive()


def _session(url: str) -> Any:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    s = SparkSession.builder.remote(url).create()
    # Few, short retries: a dead server must fail fast, not after minutes.
    s.client.set_retry_policies([DefaultPolicy(max_retries=2, initial_backoff=10, max_backoff=50, jitter=0)])
    return s


def _register(s: Any, name: str, path: Path) -> None:
    # Sail keeps a catalog per session: every session registers the table.
    s.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION '{path}'").collect()


@pytest.mark.integration
def test_sail_commit_conflict_is_unclassified_and_definite(sail, quiet_gc):
    url, tables = sail
    path = tables / "conflicts"
    setup = _session(url)
    setup.sql(f"CREATE TABLE t (k BIGINT, v BIGINT) USING delta LOCATION '{path}'").collect()
    setup.sql("INSERT INTO t VALUES " + ", ".join(f"({k}, 0)" for k in range(8))).collect()

    n = 4
    sessions = [_session(url) for _ in range(n)]
    for s in sessions:
        _register(s, "t", path)
    ok = [0] * n
    failed: list[tuple[int, BaseException]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 20

    def conflicts_seen() -> int:
        return sum(1 for _, e in failed if "Failed to commit transaction" in str(e))

    def work(i: int) -> None:
        # Each session increments its own row: an op's effect is countable.
        while time.monotonic() < deadline and conflicts_seen() < 3:
            try:
                sessions[i].sql(f"UPDATE t SET v = v + 1 WHERE k = {i}").collect()
                with lock:
                    ok[i] += 1
            except Exception as exc:  # noqa: BLE001
                with lock:
                    failed.append((i, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    for s in sessions:
        s.stop()

    conflicts = [(i, e, classify_spark(e)) for i, e in failed if "Failed to commit transaction" in str(e)]
    assert conflicts, f"no commit conflict in 20 s; other errors: {[str(e)[:100] for _, e in failed][:5]}"
    for _, exc, c in conflicts:
        # Sail names no class (it does not even run the conflict checker).
        assert type(exc).__name__ == "SparkRuntimeException"
        assert c.cls is E.UNCLASSIFIED_CONFLICT and c.definite, c.raw
    for _, exc, _ in [(i, e, None) for i, e in failed]:
        assert classify_spark(exc).cls in (E.UNCLASSIFIED_CONFLICT, E.NOT_A_CONFLICT)

    # "fail" must mean not applied: each row counts exactly the ok updates,
    # plus at most the indeterminate ones.
    final = {r.k: r.v for r in setup.sql("SELECT k, v FROM t").collect()}
    for i in range(n):
        mine = [classify_spark(e) for j, e in failed if j == i]
        maybe = sum(1 for c in mine if not c.definite)
        assert ok[i] <= final[i] <= ok[i] + maybe, (i, ok[i], final[i], mine)
    setup.stop()


@pytest.mark.integration
def test_sail_metadata_change_vs_blind_inserts(sail, quiet_gc):
    """Sail retries blind appends through its conflict checker, so an INSERT
    that loses to ALTER TABLE ... SET TBLPROPERTIES reports the class (E4,
    spec C17); the ALTER that loses reports none."""
    url, tables = sail
    path = tables / "metadata"
    setup = _session(url)
    setup.sql(f"CREATE TABLE m (k BIGINT, v BIGINT) USING delta LOCATION '{path}'").collect()
    sessions = [_session(url) for _ in range(3)]
    for s in sessions:
        _register(s, "m", path)
    inserted: list[int] = []
    failed: list[tuple[int | None, BaseException]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 20

    def enough() -> bool:
        return any("Metadata changed" in str(e) for _, e in failed)

    def work(i: int) -> None:
        j = 0
        while time.monotonic() < deadline and not enough():
            j += 1
            key = None if i == 0 else i * 100_000 + j
            stmt = (
                f"ALTER TABLE m SET TBLPROPERTIES ('dj.round' = '{j}')"
                if i == 0
                else f"INSERT INTO m (k, v) VALUES ({key}, 0)"
            )
            try:
                sessions[i].sql(stmt).collect()
                if key is not None:
                    with lock:
                        inserted.append(key)
            except Exception as exc:  # noqa: BLE001
                with lock:
                    failed.append((key, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    for s in sessions:
        s.stop()

    e4 = [(k, e) for k, e in failed if "Metadata changed" in str(e)]
    assert e4, f"no metadata conflict in 20 s; errors: {[str(e)[:100] for _, e in failed][:5]}"
    for key, exc in e4:
        assert key is not None  # only the INSERTs get a class
        c = classify_spark(exc)
        assert c.cls is E.METADATA_CHANGED and c.definite, c.raw
    for key, exc in failed:
        if key is None and "Failed to commit transaction" in str(exc):
            assert classify_spark(exc).cls is E.UNCLASSIFIED_CONFLICT
    present = {r.k for r in setup.sql("SELECT k FROM m").collect()}
    assert set(inserted) <= present
    assert not {k for k, e in failed if k is not None and classify_spark(e).definite} & present
    setup.stop()


@pytest.mark.integration
def test_sail_not_a_conflict(sail, quiet_gc):
    url, _ = sail
    s = _session(url)
    try:
        with pytest.raises(Exception) as ei:
            s.sql("SELEC 1").collect()
        c = classify_spark(ei.value)
        assert c.cls is E.NOT_A_CONFLICT and c.definite, c.raw

        with pytest.raises(Exception) as ei:
            s.sql("SELECT * FROM dj_no_such_table").collect()
        assert type(ei.value).__name__ == "AnalysisException"
        c = classify_spark(ei.value)
        assert c.cls is E.NOT_A_CONFLICT and c.definite, c.raw
    finally:
        s.stop()


@pytest.mark.integration
def test_sail_server_gone_is_indeterminate(tmp_path, quiet_gc):
    pytest.importorskip("pyspark.sql.connect.session")
    proc, url = _start_sail(tmp_path, "sail-doomed")
    try:
        s = _session(url)
        assert s.sql("SELECT 1 AS one").collect()[0].one == 1
        proc.kill()
        t0 = time.monotonic()
        with pytest.raises(Exception) as ei:
            s.sql("SELECT 2").collect()
        assert time.monotonic() - t0 < 30
    finally:
        proc.stop()
    c = classify_spark(ei.value)
    assert c.cls is E.NOT_A_CONFLICT and not c.definite and c.history_type == INFO, c.raw
    assert "UNAVAILABLE" in c.raw  # the gRPC cause is kept in raw


# ===========================================================================
# 3. Recorded texts
# ===========================================================================

# --- delta-rs texts (crates/core/src/kernel/transaction/{mod,conflict_checker}.rs)

RS = "Failed to commit transaction: "
DELTARS_TEXTS = [
    (
        "CommitFailedError",
        RS + "Commit failed: a concurrent transactions added new data.\nHelp: This transaction's "
        "query must be rerun to include the new data. Also, if you don't care to require this check to pass in the "
        "future, the isolation level can be set to Snapshot Isolation.",
        E.CONCURRENT_APPEND,
        True,
    ),
    (
        "CommitFailedError",
        RS + "Commit failed: a concurrent transaction deleted data this operation read.\nHelp: "
        "This transaction's query must be rerun to exclude the removed data.",
        E.CONCURRENT_DELETE_READ,
        True,
    ),
    (
        "CommitFailedError",
        RS + "Commit failed: a concurrent transaction deleted the same data your transaction "
        "deletes.\nHelp: you should retry this write operation. If it was based on data contained in the table, you "
        "should rerun the query generating the data.",
        E.CONCURRENT_DELETE_DELETE,
        True,
    ),
    ("CommitFailedError", RS + "Metadata changed since last commit.", E.METADATA_CHANGED, True),
    ("CommitFailedError", RS + "Concurrent transaction failed.", E.CONCURRENT_TRANSACTION, True),
    (
        "CommitFailedError",
        RS + "Protocol changed since last commit: required read/write 1/7, current read/write 1/2",
        E.PROTOCOL_CHANGED,
        True,
    ),
    ("CommitFailedError", RS + "Protocol changed since last commit: protocol changed", E.PROTOCOL_CHANGED, True),
    ("CommitFailedError", RS + "15", E.UNCLASSIFIED_CONFLICT, True),
    ("CommitFailedError", RS + "Error evaluating predicate: Schema error", E.UNCLASSIFIED_CONFLICT, True),
    ("DeltaError", "Delta transaction failed, version 3 already exists.", E.UNCLASSIFIED_CONFLICT, True),
    ("CommitFailedError", RS + "Delta-rs does not support writer version 8", E.UNSUPPORTED, True),
    (
        "CommitFailedError",
        "The transaction includes Remove action with data change but Delta table is append-only",
        E.NOT_A_CONFLICT,
        True,
    ),
    # DynamoDB-backed log store failing inside the commit: may have landed.
    ("CommitFailedError", "Transaction failed: dynamodb client failed to write log entry", E.NOT_A_CONFLICT, False),
    ("SchemaMismatchError", "Cannot cast schema, number of fields does not match: 1 vs 3", E.NOT_A_CONFLICT, True),
    ("TableNotFoundError", "no log files", E.NOT_A_CONFLICT, True),
    ("DeltaError", "Generic DeltaTable error: Error during planning: No field named x", E.NOT_A_CONFLICT, True),
    ("ValueError", "Invalid isolation level", E.NOT_A_CONFLICT, True),
    (
        "DeltaError",
        "Generic DeltaTable error: Schema error: No field named timeout. Valid fields are t.k.",
        E.NOT_A_CONFLICT,
        True,
    ),
    (
        "OSError",
        "Generic S3 error\n ↳ Error performing PUT http://127.0.0.1:9000/dj/t/_delta_log/"
        "00000000000000000007.json in 30.0s - Server returned non-2xx status code: 503 Service Unavailable: "
        "SlowDown",
        E.NOT_A_CONFLICT,
        False,
    ),
    (
        "OSError",
        "Generic S3 error\n ↳ Error after 10 retries in 3.1s, max_retries:10, retry_timeout:180s, "
        "source:error sending request for url (http://127.0.0.1:9000/dj/t/_delta_log/00000000000000000007.json)",
        E.NOT_A_CONFLICT,
        False,
    ),
    (
        "OSError",
        "Generic S3 error\n ↳ Error performing PUT http://127.0.0.1:9000/dj/t/_delta_log/"
        "00000000000000000007.json in 30.0s - HTTP error: operation timed out",
        E.TIMEOUT,
        False,
    ),
    ("TimeoutError", "op exceeded 30 s", E.TIMEOUT, False),
    ("PanicException", "called `Option::unwrap()` on a `None` value", E.CRASH, False),
    # Recorded with deltalake 1.x on a local table.
    # dt.update({"k": "make_array(1)"}) on a BIGINT column: DataFusion words a
    # type error as "not implemented"; an error of the op, no missing feature.
    (
        "DeltaError",
        "Generic DeltaTable error: Optimizer rule 'simplify_expressions' failed\ncaused by\nThis "
        "feature is not implemented: Unsupported CAST from List(Int64) to Int64",
        E.NOT_A_CONFLICT,
        True,
    ),
    # Loading a table whose _last_checkpoint names a checkpoint that is gone:
    # before any commit, so definite, "checkpoint" or not.
    (
        "DeltaError",
        "Kernel error: Invalid Checkpoint: Had a _last_checkpoint hint but didn't find any checkpoints",
        E.NOT_A_CONFLICT,
        True,
    ),
    # An append whose post-commit checkpoint could not be written (a directory
    # squats on the checkpoint's name): version 1 is in the log, so the op may
    # have committed. Nothing in the text says "checkpoint".
    (
        "DeltaError",
        "Kernel error: Arrow error: External: Generic LocalFileSystem error: Unable to rename file: Is a "
        "directory (os error 21)",
        E.NOT_A_CONFLICT,
        False,
    ),
    # Recorded with deltalake 0.9.0: an append that lost its race 5 times in a row.
    ("PyDeltaTableError", "Transaction failed: Failed to commit transaction: 5", E.UNCLASSIFIED_CONFLICT, True),
    ("RuntimeError", "something nobody has seen before", E.NOT_A_CONFLICT, False),
]


@pytest.mark.parametrize("type_name,message,expected,definite", DELTARS_TEXTS)
def test_deltars_recorded_texts(type_name, message, expected, definite):
    bases = (
        ("DeltaError", "Exception")
        if type_name in ("CommitFailedError", "TableNotFoundError", "SchemaMismatchError")
        else ()
    )
    if type_name == "PanicException":
        bases = ("BaseException",)
    c = classify_deltars_text(type_name, message, bases=bases)
    assert (c.cls, c.definite) == (expected, definite), c.raw
    assert c.raw.startswith(f"{type_name}: ")


# --- Spark texts. Sail's: recorded from pysail 0.7.2. delta-spark's: built
# from the message templates of spark/src/main/resources/error/
# delta-error-classes.json (4.0.0 and newer) and sent through PySpark's own
# Spark Connect error conversion, as a delta-spark Connect server would.

DELTA_CLASSES = {
    "ConcurrentAppendException": "DELTA_CONCURRENT_APPEND",
    "ConcurrentDeleteReadException": "DELTA_CONCURRENT_DELETE_READ",
    "ConcurrentDeleteDeleteException": "DELTA_CONCURRENT_DELETE_DELETE",
    "MetadataChangedException": "DELTA_METADATA_CHANGED",
    "ConcurrentTransactionException": "DELTA_CONCURRENT_TRANSACTION",
    "ProtocolChangedException": "DELTA_PROTOCOL_CHANGED",
    "ConcurrentWriteException": "DELTA_CONCURRENT_WRITE",
}
COMMIT = (
    '\nConflicting commit: {"timestamp":1795331333750,"operation":"DELETE","operationParameters":'
    '{"predicate":"[\\"(k#12L = 1)\\"]"},"readVersion":6,"isolationLevel":"Serializable","isBlindAppend":false}'
)
DOCS = "\nRefer to https://docs.delta.io/latest/concurrency-control.html for more details."
DELTA_40_MESSAGES = {
    "DELTA_CONCURRENT_APPEND": "ConcurrentAppendException: Files were added to the root of the table by a "
    "concurrent update. Please try the operation again." + COMMIT + DOCS,
    "DELTA_CONCURRENT_DELETE_READ": "ConcurrentDeleteReadException: This transaction attempted to read one or more "
    "files that were deleted (for example part-00000-1.c000.snappy.parquet) by a concurrent update. Please try the "
    "operation again." + COMMIT + DOCS,
    "DELTA_CONCURRENT_DELETE_DELETE": "ConcurrentDeleteDeleteException: This transaction attempted to delete one or "
    "more files that were deleted (for example part-00000-1.c000.snappy.parquet) by a concurrent update. Please try "
    "the operation again." + COMMIT + DOCS,
    "DELTA_METADATA_CHANGED": "MetadataChangedException: The metadata of the Delta table has been changed by a "
    "concurrent update. Please try the operation again." + COMMIT + DOCS,
    "DELTA_CONCURRENT_TRANSACTION": "ConcurrentTransactionException: This error occurs when multiple streaming "
    "queries are using the same checkpoint to write into this table. Did you run multiple instances of the same "
    "streaming query at the same time?" + COMMIT + DOCS,
    "DELTA_PROTOCOL_CHANGED": "ProtocolChangedException: The protocol version of the Delta table has been changed "
    "by a concurrent update. This happens when multiple writers are writing to an empty directory. Creating the "
    "table ahead of time will avoid this conflict." + COMMIT + DOCS,
    "DELTA_CONCURRENT_WRITE": "ConcurrentWriteException: A concurrent transaction has written new data since the "
    "current transaction read the table. Please try the operation again." + COMMIT + DOCS,
}
EXPECTED = {
    "DELTA_CONCURRENT_APPEND": E.CONCURRENT_APPEND,
    "DELTA_CONCURRENT_DELETE_READ": E.CONCURRENT_DELETE_READ,
    "DELTA_CONCURRENT_DELETE_DELETE": E.CONCURRENT_DELETE_DELETE,
    "DELTA_METADATA_CHANGED": E.METADATA_CHANGED,
    "DELTA_CONCURRENT_TRANSACTION": E.CONCURRENT_TRANSACTION,
    "DELTA_PROTOCOL_CHANGED": E.PROTOCOL_CHANGED,
    "DELTA_CONCURRENT_WRITE": E.UNCLASSIFIED_CONFLICT,
}


def _connect_error(
    jvm_class: str,
    message: str,
    condition: str | None,
    sql_state: str | None = "2D521",
    hierarchy: list[str] | None = None,
) -> BaseException:
    """What PySpark raises for a server-side exception (client/core.py:
    _handle_rpc_error -> convert_exception)."""
    from google.rpc.error_details_pb2 import ErrorInfo
    from pyspark.errors.exceptions.connect import convert_exception

    classes = hierarchy or [
        jvm_class,
        "org.apache.spark.sql.delta." + jvm_class.rsplit(".", 1)[1],
        "io.delta.exceptions.DeltaConcurrentModificationException",
        "org.apache.spark.sql.delta.DeltaConcurrentModificationException",
        "java.util.ConcurrentModificationException",
        "java.lang.RuntimeException",
        "java.lang.Exception",
        "java.lang.Throwable",
    ]
    meta = {"classes": json.dumps(classes)}
    if condition:
        meta["errorClass"] = condition
    if sql_state:
        meta["sqlState"] = sql_state
    info = ErrorInfo(reason=jvm_class, domain="org.apache.spark", metadata=meta)
    return convert_exception(info, message, None)


@pytest.mark.parametrize("simple", list(DELTA_CLASSES))
def test_delta_spark_40_conflicts_through_connect(simple):
    pytest.importorskip("google.rpc.error_details_pb2")
    cond = DELTA_CLASSES[simple]
    exc = _connect_error(f"io.delta.exceptions.{simple}", f"[{cond}] {DELTA_40_MESSAGES[cond]}", cond)
    assert type(exc).__name__ == "UnknownException"
    assert str(exc).startswith(f"(io.delta.exceptions.{simple}) [{cond}] ")
    c = classify_spark(exc)
    assert c.cls is EXPECTED[cond] and c.definite, c.raw
    # The same text without the condition metadata (e.g. from a log line).
    assert classify_spark_text("SparkConnectGrpcException", str(exc)).cls is EXPECTED[cond]
    # Only the message text, class name and condition stripped: the wording.
    bare = DELTA_40_MESSAGES[cond].split(": ", 1)[1]
    assert classify_spark_text("Exception", bare).cls is EXPECTED[cond], bare


# Newer delta-spark (4.x master) and Databricks: sub-conditions and new wording.
NEWER = [
    (
        "io.delta.exceptions.ConcurrentAppendException",
        "DELTA_CONCURRENT_APPEND.WITH_PARTITION_HINT",
        "Transaction conflict detected. a concurrent WRITE added data to table `spark_catalog`.`default`.`t` "
        "committed at version 7. The concurrent operation modified data in the partition [p=1] that should have "
        "been read by this operation. Please retry the operation.",
        E.CONCURRENT_APPEND,
    ),
    (
        "io.delta.exceptions.ConcurrentDeleteReadException",
        "DELTA_CONCURRENT_DELETE_READ.WITHOUT_HINT",
        "Transaction conflict detected, a concurrent DELETE deleted data from table `t` (committed at version 7) that "
        "this transaction read. The concurrent operation deleted data that was read by this operation.",
        E.CONCURRENT_DELETE_READ,
    ),
    (
        "io.delta.exceptions.ConcurrentDeleteDeleteException",
        "DELTA_CONCURRENT_DELETE_DELETE.WITHOUT_HINT",
        "Transaction conflict detected, a concurrent OPTIMIZE deleted data from table `t` (committed at version 7) "
        "that this transaction attempted to delete. The concurrent operation deleted data that was read by this "
        "operation.",
        E.CONCURRENT_DELETE_DELETE,
    ),
    (
        "com.databricks.sql.transaction.tahoe.ConcurrentAppendException",
        None,
        "Files were added to partition [date=2024-01-01] by a concurrent update. Please try the operation again.",
        E.CONCURRENT_APPEND,
    ),
    (
        "com.databricks.sql.transaction.tahoe.ConcurrentDeleteDeleteException",
        None,
        "This transaction attempted to delete one or more files that were deleted (for example date=1/part-0.parquet) "
        "by a concurrent update. Please try the operation again.",
        E.CONCURRENT_DELETE_DELETE,
    ),
    (
        "org.apache.spark.sql.delta.DeltaIllegalStateException",
        "DELTA_MAX_COMMIT_RETRIES_EXCEEDED",
        "This commit has failed as it has been tried 10000000 times but did not succeed. This can be caused by the "
        "Delta table being committed continuously by many concurrent commits.",
        E.UNCLASSIFIED_CONFLICT,
    ),
]


@pytest.mark.parametrize(
    "jvm_class,condition,text,expected", NEWER, ids=[n[0].rsplit(".", 1)[1] + "-" + str(n[1]) for n in NEWER]
)
def test_newer_delta_spark_and_databricks(jvm_class, condition, text, expected):
    pytest.importorskip("google.rpc.error_details_pb2")
    msg = f"[{condition}] {text}" if condition else text
    exc = _connect_error(jvm_class, msg, condition, hierarchy=[jvm_class, "java.lang.RuntimeException"])
    c = classify_spark(exc)
    assert c.cls is expected and c.definite, c.raw


def test_classic_pyspark_delta_exception_types():
    """Classic (py4j) PySpark raises delta.exceptions.* Python classes."""
    exceptions = pytest.importorskip("delta.exceptions")
    for name, cond in DELTA_CLASSES.items():
        exc = getattr(exceptions, name)(message=f"[{cond}] {DELTA_40_MESSAGES[cond]}")
        assert classify_spark(exc).cls is EXPECTED[cond], name


SPARK_TEXTS = [
    # Sail 0.7.2, recorded from real runs (see the Sail tests above).
    ("SparkRuntimeException", None, "Failed to commit transaction: 0", E.UNCLASSIFIED_CONFLICT, True),
    (
        "SparkRuntimeException",
        None,
        "Failed to commit transaction: Metadata changed since last commit.",
        E.METADATA_CHANGED,
        True,
    ),
    (
        "SparkRuntimeException",
        None,
        "Failed to commit transaction: Protocol changed since last commit: protocol changed",
        E.PROTOCOL_CHANGED,
        True,
    ),
    ("SparkRuntimeException", None, "Metadata changed since last commit.", E.METADATA_CHANGED, True),
    (
        "AnalysisException",
        None,
        "external error: External error: Delta transaction error: Failed to commit transaction: 0",
        E.UNCLASSIFIED_CONFLICT,
        True,
    ),
    (
        "SparkRuntimeException",
        None,
        "Failed to commit transaction: Domain metadata changed since last commit for domain 'delta.clustering'.",
        E.UNCLASSIFIED_CONFLICT,
        True,
    ),
    # A log-listing failure under concurrent writers: not a conflict, and
    # not provably before the commit.
    ("SparkRuntimeException", None, "Missing commit file: expected version 0, found 8", E.NOT_A_CONFLICT, False),
    ("AnalysisException", None, "Missing commit file: expected version 0, found 38", E.NOT_A_CONFLICT, False),
    (
        "IllegalArgumentException",
        None,
        "invalid argument: found SELEC at 0:5 expected something else, ';', statement, or end of input",
        E.NOT_A_CONFLICT,
        True,
    ),
    (
        "AnalysisException",
        None,
        "Table not found: [TABLE_OR_VIEW_NOT_FOUND] Table or view not found: nosuch",
        E.NOT_A_CONFLICT,
        True,
    ),
    (
        "SparkRuntimeException",
        None,
        "Log storage error: Generic S3 error: Error performing PUT "
        "http://127.0.0.1:9000/dj/t/_delta_log/00000000000000000004.json - Server returned non-2xx status code: "
        "500 Internal Server Error",
        E.NOT_A_CONFLICT,
        False,
    ),
    ("UnsupportedOperationException", None, "not implemented: DESCRIBE HISTORY", E.UNSUPPORTED, True),
    # SELECT CAST(array(1) AS BIGINT) on Sail 0.7.2: a type error, not a
    # missing feature, whatever its words.
    (
        "SparkRuntimeException",
        None,
        "This feature is not implemented: Unsupported CAST from List(non-null Int32) to Int64",
        E.NOT_A_CONFLICT,
        False,
    ),
    (
        "AnalysisException",
        "UNRESOLVED_COLUMN.WITH_SUGGESTION",
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, "
        "variable, or function parameter with name `connection reset` cannot be resolved. Did you mean one of the "
        "following? [`timeout`, `k`]",
        E.NOT_A_CONFLICT,
        True,
    ),
    # delta-spark / Spark.
    (
        "ParseException",
        "PARSE_SYNTAX_ERROR",
        "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601",
        E.NOT_A_CONFLICT,
        True,
    ),
    (
        "AnalysisException",
        "TABLE_OR_VIEW_NOT_FOUND",
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `nosuch` cannot be found. SQLSTATE: 42P01",
        E.NOT_A_CONFLICT,
        True,
    ),
    (
        "UnknownException",
        "DELTA_POST_COMMIT_HOOK_FAILED",
        "(org.apache.spark.sql.delta.DeltaRuntimeException) "
        "[DELTA_POST_COMMIT_HOOK_FAILED] Committing to the Delta table version 7 succeeded but error while executing "
        "post-commit hook Generate Symlink Format Manifest",
        E.NOT_A_CONFLICT,
        False,
    ),
    # Transport.
    (
        "SparkConnectGrpcException",
        None,
        "<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = "
        'StatusCode.UNAVAILABLE\n\tdetails = "Socket closed"',
        E.NOT_A_CONFLICT,
        False,
    ),
    (
        "SparkConnectGrpcException",
        None,
        "<_InactiveRpcError of RPC that terminated with:\n\tstatus = "
        'StatusCode.DEADLINE_EXCEEDED\n\tdetails = "Deadline Exceeded"',
        E.TIMEOUT,
        False,
    ),
    (
        "RetriesExceeded",
        "RETRIES_EXCEEDED",
        "[RETRIES_EXCEEDED] The maximum number of retries has been exceeded.",
        E.NOT_A_CONFLICT,
        False,
    ),
    ("SparkException", None, "Job aborted due to stage failure: Connection reset by peer", E.NOT_A_CONFLICT, False),
    ("SparkRuntimeException", None, "an error nobody has seen before", E.NOT_A_CONFLICT, False),
]


@pytest.mark.parametrize("type_name,condition,message,expected,definite", SPARK_TEXTS)
def test_spark_recorded_texts(type_name, condition, message, expected, definite):
    c = classify_spark_text(type_name, message, condition=condition)
    assert (c.cls, c.definite) == (expected, definite), c.raw


def test_condition_beats_wording():
    """A DELETE_DELETE text mentions deleted data too; the condition decides."""
    text = "[DELTA_CONCURRENT_DELETE_DELETE] ConcurrentDeleteDeleteException: ... deleted data this operation read"
    assert classify_spark_text("UnknownException", text).cls is E.CONCURRENT_DELETE_DELETE
    assert classify_spark_text("UnknownException", "x", condition="DELTA_CONCURRENT_APPEND.WITHOUT_HINT").cls is (
        E.CONCURRENT_APPEND
    )


# --- raw


def test_raw_is_typed_truncated_and_clean():
    c = classify_deltars_text("OSError", "\x1b[31m↳\x1b[0m " + "x" * 10_000)
    assert c.raw.startswith("OSError: ↳ xxx") and len(c.raw) <= RAW_LIMIT
    assert "truncated" in c.raw[-40:]

    try:
        try:
            raise ConnectionResetError("Connection reset by peer (os error 104)")
        except ConnectionResetError as inner:
            raise RuntimeError("worker gave up") from inner
    except RuntimeError as exc:
        c = classify_spark(exc)
    assert c.cls is E.NOT_A_CONFLICT and not c.definite
    assert (
        c.raw
        == "RuntimeError: worker gave up\n  caused by ConnectionResetError: Connection reset by peer (os error 104)"
    )
    assert c.op_error().to_json() == {"class": "not-a-conflict", "claim": None, "raw": c.raw}


def test_classifying_never_raises():
    class Weird(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    for fn in (classify_deltars, classify_spark):
        c = fn(Weird())
        assert c.cls is E.NOT_A_CONFLICT and not c.definite and c.raw.startswith("Weird: <unprintable")


def test_errors_module_imports_no_engine():
    code = (
        "import sys, harness.engines.errors\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('deltalake', 'pyspark', 'pysail', 'delta', 'grpc')]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_a_jvm_iterator_error_is_no_delta_conflict():
    """java.util.ConcurrentModificationException is the base of Delta's
    conflict classes, and also what the JVM throws for a collection changed
    under its iterator: alone, it says nothing about a commit."""
    pytest.importorskip("google.rpc.error_details_pb2")
    exc = _connect_error(
        "java.util.ConcurrentModificationException",
        "(java.util.ConcurrentModificationException) null",
        None,
        sql_state=None,
        hierarchy=[
            "java.util.ConcurrentModificationException",
            "java.lang.RuntimeException",
            "java.lang.Exception",
            "java.lang.Throwable",
        ],
    )
    c = classify_spark(exc)
    assert not c.cls.is_conflict and not c.definite, (c.cls, c.raw)
    # Delta's own base class still is one (an unclassified conflict).
    exc = _connect_error(
        "io.delta.exceptions.DeltaConcurrentModificationException",
        "(io.delta.exceptions.DeltaConcurrentModificationException) a concurrent commit",
        None,
    )
    assert classify_spark(exc).cls is E.UNCLASSIFIED_CONFLICT


def test_a_spark_unsupported_condition_is_unsupported():
    c = classify_spark_text(
        "AnalysisException",
        "[UNSUPPORTED_FEATURE.TABLE_OPERATION] The feature is not supported",
        condition="UNSUPPORTED_FEATURE.TABLE_OPERATION",
    )
    assert (c.cls, c.definite) == (E.UNSUPPORTED, True)
