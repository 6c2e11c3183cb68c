"""Run a conformance cell on delta-rs (the `deltalake` package), on a local
table. Imported only in the conformance worker process.

Interleaving control is snapshot pinning: both transactions get a
DeltaTable object loaded at v0 before either commits, and each op runs on
its own object without refreshing it, so the loser's commit is checked by
delta-rs against the winner's v0+1. The control is verified afterwards: both
objects were at v0 and the winner's commit is v0+1 (the log's `dj.op`);
what each commit says it read is matrix.observe_read_versions' to check.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.history import ErrorClass
from harness.core.table import TableSpec
from harness.deltalog import read_log
from harness.engines.base import ClientConfig, OpResult
from harness.engines.deltars import DELTARS_CAPABILITIES, OP_ID_KEY, DeltaRsClient, arrow_schema, query
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.rows import APP_ID, COLUMNS, SETUP, OpPlan, plans, table_spec
from harness.matrices.conformance.verdict import COMMITTED, ERROR, FAILED, NOOP, UNSUPPORTED, Observation, TxnResult

GATE_TIMEOUT_S = 20.0


class PinnedClient(DeltaRsClient):
    """A DeltaRsClient whose table object stays at the snapshot it was
    loaded at: the primitives run on it without update_incremental()."""

    def pin(self) -> int:
        from deltalake import DeltaTable

        self.dt = DeltaTable(self.config.table_uri)
        return self.dt.version()

    def _table(self) -> Any:
        self.last_read_version = self.dt.version()
        return self.dt


def _client(uri: str, process: str, kind: type[DeltaRsClient] = PinnedClient) -> Any:
    c = kind(ClientConfig(engine="delta-rs", node="n1", process=process, table_uri=uri))
    c.open()
    return c


def execute(client: PinnedClient, plan: OpPlan, table: TableSpec) -> OpResult:
    """Run one op of a cell on the client's pinned table object."""
    k, op_id = plan.kind, plan.op_id
    if C.PRIMITIVES[k] not in client.api.ops or (k == C.ZORDER and not client.api.has("optimize")):
        # This release has no such op (harness.engines.deltars_api): reported
        # unsupported, never run through an API it lacks.
        what = "z-order" if k == C.ZORDER else C.PRIMITIVES[k]
        raise NotImplementedError(f"delta-rs {'.'.join(map(str, client.api.release))} has no {what}")
    if k == C.INSERT:
        return client.append(plan.new_rows(), table, "dataframe", op_id)
    if k == C.APP_TXN:
        return client.append_idempotent(plan.new_rows(), table, APP_ID, 1, op_id)
    if k == C.UPDATE:
        return client.update(plan.where, plan.assignments(), op_id)
    if k in (C.DELETE, C.DELETE_ALL):
        return client.delete(plan.where, op_id)
    if k in (C.MERGE, C.MERGE_NOLIT):
        return client.merge(
            plan.merge_source(), list(COLUMNS), plan.merge_on(), plan.merge_set(), plan.merge_insert(), op_id
        )
    if k == C.INSERT_SELECT:
        # No INSERT ... SELECT in the Python API: the SELECT runs on the pinned
        # snapshot and a MERGE commits from that same snapshot, its target
        # condition the SELECT's partition literal (what the SELECT read).
        dt = client._table()
        t = query(dt, "dj_table", plan.select_sql("dj_table"))
        row = plan.select_row(t.column("c")[0].as_py())
        return client.merge(
            [row], list(COLUMNS), f"t.id = s.id AND t.p = '{plan.part}'", None, plan.merge_insert(), op_id
        )
    if k in (C.OPTIMIZE, C.ZORDER):
        # The client's optimize() has no partition filter; OPTIMIZE ... WHERE
        # p = '<part>' is what makes the partitions' file sets disjoint (P1).
        dt = client._table()
        meta = client.api.metadata_kwargs(op_id, OP_ID_KEY)
        if not client.api.has("optimize"):  # 0.9: a method (no z-order), no metadata
            dt.optimize(partition_filters=plan.partition_filters())
        elif k == C.ZORDER:
            dt.optimize.z_order(["k"], partition_filters=plan.partition_filters(), **meta)
        else:
            dt.optimize.compact(partition_filters=plan.partition_filters(), **meta)
        return OpResult(version=client._committed(dt))
    if k == C.SET_PROPERTIES:
        return client.set_properties(plan.properties(), op_id)
    if k == C.ADD_COLUMNS:
        return client.add_columns([plan.column()], op_id)
    raise ValueError(f"delta-rs backend has no op {k!r}")


def _attempt(client: PinnedClient, fn: Callable[[], Any]) -> TxnResult:
    pinned = client.dt.version() if client.dt is not None else None
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - every failure is an observation
        c = client.classify(exc)
        status = FAILED if c.cls.is_conflict else UNSUPPORTED if c.cls is ErrorClass.UNSUPPORTED else ERROR
        result = TxnResult(status, c.cls.value, c.raw)
    else:
        result = TxnResult(COMMITTED)
    if pinned is not None:
        result.scheduled_read_version = pinned
        result.read_version_source = f"its table object, loaded at version {pinned} and never refreshed"
    return result


def _commits_by_op(uri: str, after: int | None = None, order: tuple[str, ...] = ()) -> tuple[Any, dict[str, int]]:
    """Each op's commit version, from the op id in its commitInfo. Releases
    before 0.15 write none: then the commits after version `after` belong,
    in turn, to those of `order` that committed (a cell runs its two
    transactions one after the other)."""
    log = read_log(uri)
    by_op = {}
    for v in log.versions:
        info = log.commits[v].commit_info or {} if v in log.commits else {}
        if info.get(OP_ID_KEY) is not None:
            by_op[str(info[OP_ID_KEY])] = v
    if not by_op and after is not None:
        by_op = dict(zip(order, (v for v in log.versions if v > after), strict=False))
    return log, by_op


def run_cell(cell: C.Cell, root: Path) -> Observation:
    t0 = time.monotonic()
    uri = str(root / cell.id.replace("/", "__").replace(">", "-then-"))
    obs = _run_create(cell, uri) if cell.winner == C.CREATE else _run_pair(cell, uri)
    obs.table = uri
    obs.seconds = round(time.monotonic() - t0, 3)
    return obs


def _run_pair(cell: C.Cell, uri: str) -> Observation:
    table = table_spec(cell)
    setup = _client(uri, "setup", DeltaRsClient)
    setup.create_table(table)
    for op_id, rows in SETUP:
        setup.append(rows, table, "dataframe", op_id)
    wp, lp = plans(cell)
    w, l_client = _client(uri, "1"), _client(uri, "2")
    v0w, v0l = w.pin(), l_client.pin()
    winner = _attempt(w, lambda: execute(w, wp, table))
    loser = _attempt(l_client, lambda: execute(l_client, lp, table))
    v0 = 2  # create + two setup appends
    committed = tuple(p.op_id for p, r in ((wp, winner), (lp, loser)) if r.status == COMMITTED)
    log, by_op = _commits_by_op(uri, v0, committed)
    winner.version, loser.version = by_op.get(wp.op_id), by_op.get(lp.op_id)
    notes = []
    if (v0w, v0l) != (v0, v0):
        notes.append(f"table objects loaded at {v0w}/{v0l}, not {v0}")
    if winner.status == COMMITTED and winner.version != v0 + 1:
        notes.append(f"the winner committed version {winner.version}, not {v0 + 1}")
    if (
        loser.status == COMMITTED
        and loser.version is None
        and lp.kind in C.COMPACTION
        and log.latest_version == v0 + 1
        and v0l == v0
    ):
        loser.status = NOOP  # it read v0 and left the log as the winner did
    elif loser.status == COMMITTED and loser.version is None:
        notes.append("the loser reported a commit, but no commit in the log names its op")
    obs = Observation(winner, loser, controlled=not notes, control_note="; ".join(notes))
    if winner.version in log.commits:
        commit = log.commits[winner.version]
        obs.winner_added_files = len(commit.adds)
        obs.winner_removed_files = len(commit.removes)
        obs.winner_changed_metadata = commit.metadata is not None or commit.protocol is not None
    return obs


def _run_create(cell: C.Cell, uri: str) -> Observation:
    """Two CREATEs at one empty path. The loser's data is a stream whose
    first batch waits until the winner has created the table, so the loser
    has already found the path empty when the winner commits version 0."""
    import pyarrow as pa
    from deltalake import write_deltalake

    table = table_spec(cell)
    schema = arrow_schema(table)
    started, go = threading.Event(), threading.Event()
    wp, lp = plans(cell)
    out: dict[str, TxnResult] = {}

    def batches():
        started.set()
        if not go.wait(GATE_TIMEOUT_S):
            raise RuntimeError("the winner never committed")
        yield pa.RecordBatch.from_pylist(
            [dict(zip(COLUMNS, (200, 200, "a", 0, lp.op_id, None), strict=True))], schema=schema
        )

    l_client = _client(uri, "2")

    def lose() -> None:
        out["loser"] = _attempt(
            l_client,
            lambda: write_deltalake(
                uri,
                pa.RecordBatchReader.from_batches(schema, batches()),
                mode="error",
                configuration=dict(table.properties),
                partition_by=list(table.partition_by) or None,
                **l_client.api.metadata_kwargs(lp.op_id, OP_ID_KEY),
            ),
        )

    thread = threading.Thread(target=lose, daemon=True)
    thread.start()
    notes = []
    w = _client(uri, "1")
    try:
        if not started.wait(GATE_TIMEOUT_S):
            notes.append("the loser never reached its data stream")
        winner = _attempt(w, lambda: w.create_table_at(uri, table, wp.op_id))
    finally:
        go.set()
        thread.join(GATE_TIMEOUT_S + 10)
    if thread.is_alive():
        notes.append("the loser did not finish")
    loser = out.get("loser") or TxnResult(ERROR, ErrorClass.TIMEOUT.value, "the loser did not finish")
    log, by_op = _commits_by_op(
        uri, -1, tuple(p.op_id for p, r in ((wp, winner), (lp, loser)) if r.status == COMMITTED)
    )
    winner.version, loser.version = by_op.get(wp.op_id), by_op.get(lp.op_id)
    if winner.status == COMMITTED and winner.version != 0:
        notes.append(f"the winner committed version {winner.version}, not 0")
    obs = Observation(winner, loser, controlled=not notes, control_note="; ".join(notes))
    obs.winner_changed_metadata = True
    return obs


class DeltaRsBackend:
    """The worker's delta-rs backend: local tables, nothing to start."""

    default_isolation = DELTARS_CAPABILITIES.default_isolation  # the same on every release

    def run_cell(self, cell: C.Cell, root: Path) -> Observation:
        return run_cell(cell, root)

    def reader_options(self) -> dict[str, str] | None:
        return None

    def close(self) -> None:
        pass
