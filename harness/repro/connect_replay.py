"""Replay a schedule on a Spark Connect engine (Sail, delta-spark), which
can pin no snapshot of its own: the order is made at the storage, through
the fault proxy, as the conformance matrix's backends make it.

A transaction that some other commit lands across (between its snapshot and
its commit) runs on a server of its own, held at the proxy where its commit
begins; the other commits run; then it is released and the engine's
conflict check decides, as it did in the run. A transaction nothing commits
across runs whole, at its commit, on n1.

- Sail: the proxy pins that server's view of the log at the snapshot's
  version and holds its next commit PUT; released, the PUT finds its version
  taken (412).
- delta-spark: its S3 commit checks that the version's file is absent, then
  writes it (no put-if-absent), so the hold is that existence check (HEAD)
  of the next version, and nothing is pinned: the statement has read its
  snapshot by then. Released, the check finds the version taken (200), and
  delta-spark takes its path for every lost race: its conflict check
  against the commits since, then the next free version or a conflict.

The servers, moto and the proxy are started once per `reproduce` and shared
by its replays, each on a table of its own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from harness.core.history import INVOKE, HistoryWriter
from harness.core.table import TableDeclaration, TableSpec
from harness.engines.deltaspark import DeltaSparkEngine
from harness.engines.sail import SailEngine
from harness.engines.spark import DeltaSparkClient, SparkConnectClient
from harness.repro.recording import record_reply
from harness.repro.schedule import COMMIT, PIN, NotReplayable, Schedule, Txn
from harness.run.storage import open_storage
from harness.run.worker_main import run_op
from harness.s3proxy.s3 import log_version
from workloads import make_workload

NODE_TIMEOUT_S = 60.0
HOLD_TIMEOUT_S = 30.0
OP_TIMEOUT_S = 60.0
# Servers one replay may use: n1 plus one per transaction held at a time.
MAX_NODES = 5
DIRECT = "n1"


class _RecordingSpark(SparkConnectClient):
    """A client that records each SQL statement it sends (the table as
    `{table}`): what Sail's standalone script re-issues, text for text."""

    calls: list[dict[str, Any]]

    def _sql(self, stmt: str) -> list[Any]:
        if not stmt.startswith("CREATE TABLE IF NOT EXISTS"):  # the session's catalog name, not the op
            self.calls.append({"sql": stmt.replace(self.table_ref, "{table}")})
        return super()._sql(stmt)


class _RecordingDeltaSpark(_RecordingSpark, DeltaSparkClient):
    pass


class ConnectControls:
    """moto, the fault proxy and the servers of one `reproduce` (of
    `release`, or the pinned one). What differs between the engines is
    the held request and what it must find when released."""

    client_class: type[_RecordingSpark] = _RecordingSpark
    node_timeout = NODE_TIMEOUT_S
    held_request = "commit PUT"
    pin_held = True
    release_status = 412

    def __init__(self, root: Path, release: str | None = None) -> None:
        self.root = root
        self.engine: Any = self.make_engine(release)
        self.storage: Any = None
        self.nodes: dict[str, Any] = {}
        self.tables = 0

    def __enter__(self) -> ConnectControls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure(self, n: int) -> None:
        if n > MAX_NODES:
            raise NotReplayable(
                f"the schedule holds {n - 1} transactions at once; a {self.engine.name} replay holds at most "
                f"{MAX_NODES - 1}"
            )
        if self.storage is None:
            (self.root / "logs").mkdir(parents=True, exist_ok=True)
            self.storage = open_storage("s3", self.root, proxy=True, prefix="replays/")
        have = len(self.nodes)
        if n > have:
            started = self.engine.start_nodes(
                n - have, self.storage, self.root / "logs", self.node_timeout, first=have + 1
            )
            self.nodes.update((node.name, node) for node in started)

    def new_table(self) -> str:
        self.tables += 1
        return self.storage.table_uri(f"replay-{self.tables}")

    def client(self, node: str, process: int | str, uri: str) -> _RecordingSpark:
        cfg = self.engine.client_config(self.nodes[node], process, self.storage, uri, OP_TIMEOUT_S)
        c = self.client_class(cfg, self.engine.name, self.engine.capabilities)
        c.calls = []
        c.open()
        return c

    def replay(self, schedule: Schedule, run_dir: Path) -> tuple[str, list[str], dict[str, str], dict[str, Any]]:
        """`schedule`'s events on a table of its own; what
        run_connect_events returns."""
        table = TableSpec.from_json(schedule.table)
        workload = make_workload(schedule.workload, schedule.seed or 0, schedule.isolation)
        return run_connect_events(schedule, self, table, workload, run_dir)

    def reader_options(self) -> dict[str, str] | None:
        return self.storage.reader_options() if self.storage is not None else None

    def make_engine(self, release: str | None) -> Any:
        raise NotImplementedError

    def hold(self, node: str, latest: int, store_race: bool) -> int:
        """Hold `node`'s next commit (of version latest + 1); the rule's id.
        `store_race`: a commit that lands across it was acknowledged and
        then replaced in the run's log (two writers' PUTs of one version)."""
        return self.storage.proxy.hold_next_commit(node)  # type: ignore[no-any-return]

    def close(self) -> None:
        self.engine.stop_nodes()
        if self.storage is not None:
            self.storage.stop()
            self.storage = None
        self.nodes.clear()


class SailControls(ConnectControls):
    def make_engine(self, release: str | None) -> Any:
        return SailEngine(release)


class DeltaSparkControls(ConnectControls):
    client_class = _RecordingDeltaSpark
    node_timeout = NODE_TIMEOUT_S * 3  # a JVM, and its warm-up
    held_request = "existence check"
    pin_held = False
    release_status = 200

    def make_engine(self, release: str | None) -> Any:
        return DeltaSparkEngine(release=release)

    def hold(self, node: str, latest: int, store_race: bool) -> int:
        # A store race (two drivers on the single-driver LogStore, outside
        # its contract) is replayed as it happened: the existence check finds
        # the version free, and the PUT is held until the other has written
        # it, then overwrites it.
        target = {} if store_race else {"method": "HEAD"}
        return self.storage.proxy.hold_next_commit(node, version=latest + 1, **target)  # type: ignore[no-any-return]


CONTROLS: dict[str, type[ConnectControls]] = {"sail": SailControls, "delta-spark": DeltaSparkControls}


def lanes(schedule: Schedule) -> dict[str, str]:
    """op id -> the server each held transaction runs on (n2, n3, ...): a
    transaction is held when another commit comes between its snapshot and
    its commit; two held at once never share a server. The rest run on n1."""
    events = schedule.events()
    pin_at = {t.op_id: i for i, (kind, t) in enumerate(events) if kind == PIN}
    commit_at = {t.op_id: i for i, (kind, t) in enumerate(events) if kind == COMMIT}
    held = {
        op
        for op, c in commit_at.items()
        if any(kind == COMMIT and pin_at[op] < i < c for i, (kind, _) in enumerate(events))
    }
    out: dict[str, str] = {}
    free: list[str] = []
    used = 1
    for kind, t in events:
        if t.op_id not in held:
            continue
        if kind == PIN:
            if not free:
                used += 1
                free.append(f"n{used}")
            out[t.op_id] = free.pop()
        else:
            free.append(out[t.op_id])
    return out


def store_races(schedule: Schedule) -> set[str]:
    """Transactions across whose snapshot and commit an acknowledged commit
    lands that the run's log does not hold (replaced at the store)."""
    events = schedule.events()
    out = set()
    for i, (kind, t) in enumerate(events):
        if kind != PIN:
            continue
        end = next((j for j, (k, u) in enumerate(events) if k == COMMIT and u is t), i)
        if any(k == COMMIT and u.lost_version is not None for k, u in events[i + 1 : end]):
            out.add(t.op_id)
    return out


def run_connect_events(
    schedule: Schedule, controls: ConnectControls, table: TableSpec, workload: Any, run_dir: Path
) -> tuple[str, list[str], dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Create the table and its setup commits on n1, then the snapshots and
    commits in the schedule's order. Returns the table's URI, what did not
    go as scheduled, each op's outcome and its SQL."""
    lane = lanes(schedule)
    raced = store_races(schedule)
    controls.ensure(1 + len(set(lane.values())))
    uri = controls.new_table()
    proxy = controls.storage.proxy
    process = {t.op_id: i for i, t in enumerate(schedule.txns)}
    notes: list[str] = []
    outcomes: dict[str, str] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    clients: list[_RecordingSpark] = []

    def client(node: str, proc: int | str) -> _RecordingSpark:
        c = controls.client(node, proc, uri)
        clients.append(c)
        return c

    with HistoryWriter(run_dir / "history.jsonl") as h:

        def execute(txn: Txn, c: _RecordingSpark, node: str) -> None:
            op = {"f": txn.f, "id": txn.op_id, "value": txn.value}
            h.record(process=process[txn.op_id], type=INVOKE, f=txn.f, id=txn.op_id, value=txn.value, node=node)
            reply = run_op(c, workload, table, op)
            record_reply(h, process[txn.op_id], op, reply, node)
            outcomes[txn.op_id] = reply["type"]
            calls[txn.op_id] = list(c.calls)

        try:
            setup = client(DIRECT, "setup")
            decl = TableDeclaration.from_json(schedule.declaration)
            value = {**schedule.declaration, **table.to_json()} if decl.table is not None else schedule.declaration
            op = {"f": "create-table", "id": "setup.1", "value": value}
            record_reply(h, "setup", op, run_op(setup, workload, table, op), DIRECT)
            for i, rows in enumerate(schedule.setup, start=2):
                op_id = f"setup.{i}"
                setup.append([tuple(r) for r in rows], table, "dataframe", op_id)
                h.record(process="setup", type=INVOKE, f="setup-append", id=op_id, value={"rows": len(rows)})
                h.record(process="setup", type="ok", f="setup-append", id=op_id, version=i - 1)
            latest = len(schedule.setup)
            running: dict[str, tuple[int | None, dict[str, Any] | None, threading.Thread, int]] = {}
            for kind, txn in schedule.events():
                node = lane.get(txn.op_id)
                if kind == PIN and txn.f == "read":
                    execute(txn, client(DIRECT, process[txn.op_id]), DIRECT)
                elif kind == PIN and node is not None:
                    c = client(node, process[txn.op_id])
                    c._register()  # registering reads the table: before the pin, as the run's sessions did
                    pin_id = proxy.pin(latest, node=node) if controls.pin_held else None
                    hold_rule = controls.hold(node, latest, txn.op_id in raced)
                    thread = threading.Thread(target=execute, args=(txn, c, node), daemon=True)
                    thread.start()
                    held = proxy.holds(node, wait=HOLD_TIMEOUT_S)
                    what = controls.held_request
                    if not held:
                        proxy.remove_fault(hold_rule)  # else it would hold the next statement on this server
                        notes.append(f"{txn.op_id}'s {what} was never held within {HOLD_TIMEOUT_S:.0f} s")
                    elif log_version(held[0]["path"]) != latest + 1:
                        notes.append(f"{txn.op_id}'s held {what} was {held[0]['path']}, not version {latest + 1}")
                    running[txn.op_id] = (pin_id, held[0] if held else None, thread, latest)
                elif kind == COMMIT and txn.op_id in running:
                    pin_id, hold, thread, read = running.pop(txn.op_id)
                    if pin_id is not None:
                        proxy.unpin(pin_id)
                    status = proxy.release(hold["id"]) if hold is not None else None
                    thread.join(OP_TIMEOUT_S)
                    if thread.is_alive():
                        notes.append(f"{txn.op_id} did not finish")
                    elif hold is not None and latest > read and status != controls.release_status:
                        notes.append(
                            f"{txn.op_id}'s released {controls.held_request} got {status}, "
                            f"not {controls.release_status}"
                        )
                    if outcomes.get(txn.op_id) == "ok":
                        latest += 1
                elif kind == COMMIT:
                    execute(txn, client(DIRECT, process[txn.op_id]), DIRECT)
                    if outcomes.get(txn.op_id) == "ok":
                        latest += 1
        finally:
            proxy.heal()
            for c in clients:
                c.close()
    return uri, notes, outcomes, calls
