"""Replay a schedule on Sail, which can pin no snapshot of its own: the
order is made at the storage, through the fault proxy, as the conformance
matrix's Sail backend makes it.

A transaction that some other commit lands across (between its snapshot and
its commit) runs on a Sail server of its own: the proxy pins that server's
view of the log at the snapshot's version and holds its next commit PUT; the
statement starts, reads, writes its files and stops at that PUT. The other
commits run; then the pin goes and the PUT is released: it finds its version
taken (412) and Sail's conflict check decides, as it did in the run. A
transaction nothing commits across runs whole, at its commit, on n1.

The servers, moto and the proxy are started once per `reproduce` and shared
by its replays, each on a table of its own.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from harness.core.history import INVOKE, HistoryWriter
from harness.core.table import TableDeclaration, TableSpec
from harness.engines.sail import SAIL_CAPABILITIES, SailEngine
from harness.engines.spark import SparkConnectClient
from harness.repro.recording import record_reply
from harness.repro.schedule import COMMIT, PIN, NotReplayable, Schedule, Txn
from harness.run.storage import open_storage
from harness.run.worker_main import run_op
from harness.s3proxy.s3 import log_version

NODE_TIMEOUT_S = 60.0
HOLD_TIMEOUT_S = 30.0
OP_TIMEOUT_S = 60.0
# Servers one replay may use: n1 plus one per transaction held at a time.
MAX_NODES = 5
DIRECT = "n1"


class _RecordingSpark(SparkConnectClient):
    """A Sail client that records each SQL statement it sends (the table as
    `{table}`): what the standalone script re-issues, text for text."""

    calls: list[dict[str, Any]]

    def _sql(self, stmt: str) -> list[Any]:
        if not stmt.startswith("CREATE TABLE IF NOT EXISTS"):  # the session's catalog name, not the op
            self.calls.append({"sql": stmt.replace(self.table_ref, "{table}")})
        return super()._sql(stmt)


class SailControls:
    """moto, the fault proxy and the Sail servers of one `reproduce`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.engine = SailEngine()
        self.storage: Any = None
        self.nodes: dict[str, Any] = {}
        self.tables = 0

    def __enter__(self) -> SailControls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ensure(self, n: int) -> None:
        if n > MAX_NODES:
            raise NotReplayable(
                f"the schedule holds {n - 1} transactions at once; a Sail replay holds at most {MAX_NODES - 1}"
            )
        if self.storage is None:
            (self.root / "logs").mkdir(parents=True, exist_ok=True)
            self.storage = open_storage("s3", self.root, proxy=True, prefix="replays/")
        have = len(self.nodes)
        if n > have:
            started = self.engine.start_nodes(
                n - have, self.storage, self.root / "logs", NODE_TIMEOUT_S, first=have + 1
            )
            self.nodes.update((node.name, node) for node in started)

    def new_table(self) -> str:
        self.tables += 1
        return self.storage.table_uri(f"replay-{self.tables}")

    def client(self, node: str, process: int | str, uri: str) -> _RecordingSpark:
        cfg = self.engine.client_config(self.nodes[node], process, self.storage, uri, OP_TIMEOUT_S)
        c = _RecordingSpark(cfg, "sail", SAIL_CAPABILITIES)
        c.calls = []
        c.open()
        return c

    def close(self) -> None:
        self.engine.stop_nodes()
        if self.storage is not None:
            self.storage.stop()
            self.storage = None
        self.nodes.clear()


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


def run_sail_events(
    schedule: Schedule, controls: SailControls, table: TableSpec, workload: Any, run_dir: Path
) -> tuple[str, list[str], dict[str, str], dict[str, list[dict[str, Any]]]]:
    """Create the table and its setup commits on n1, then the snapshots and
    commits in the schedule's order. Returns the table's URI, what did not
    go as scheduled, each op's outcome and its SQL."""
    lane = lanes(schedule)
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
            running: dict[str, tuple[int, dict[str, Any] | None, threading.Thread, int]] = {}
            for kind, txn in schedule.events():
                node = lane.get(txn.op_id)
                if kind == PIN and txn.f == "read":
                    execute(txn, client(DIRECT, process[txn.op_id]), DIRECT)
                elif kind == PIN and node is not None:
                    c = client(node, process[txn.op_id])
                    c._register()  # registering reads the table: before the pin, as the run's sessions did
                    pin_id = proxy.pin(latest, node=node)
                    hold_rule = proxy.hold_next_commit(node)
                    thread = threading.Thread(target=execute, args=(txn, c, node), daemon=True)
                    thread.start()
                    held = proxy.holds(node, wait=HOLD_TIMEOUT_S)
                    if not held:
                        proxy.remove_fault(hold_rule)  # else it would hold the next statement on this server
                        notes.append(f"{txn.op_id}'s commit PUT was never held within {HOLD_TIMEOUT_S:.0f} s")
                    elif log_version(held[0]["path"]) != latest + 1:
                        notes.append(f"{txn.op_id}'s held request was {held[0]['path']}, not version {latest + 1}")
                    running[txn.op_id] = (pin_id, held[0] if held else None, thread, latest)
                elif kind == COMMIT and txn.op_id in running:
                    pin_id, hold, thread, read = running.pop(txn.op_id)
                    proxy.unpin(pin_id)
                    status = proxy.release(hold["id"]) if hold is not None else None
                    thread.join(OP_TIMEOUT_S)
                    if thread.is_alive():
                        notes.append(f"{txn.op_id} did not finish")
                    elif hold is not None and latest > read and status != 412:
                        notes.append(f"{txn.op_id}'s released commit PUT got {status}, not 412")
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
