"""A delta-rs schedule's events on a fresh table: the snapshots pinned and
the commits made in the schedule's order, each recorded in the replay's
history. Imports the engine and no checker, so that it runs in an engine
release's own environment too (harness.repro.release_replay)."""

from __future__ import annotations

import inspect
import threading
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.history import INVOKE, HistoryWriter
from harness.core.table import Column, TableDeclaration, TableSpec
from harness.engines.base import ClientConfig
from harness.engines.deltars import DeltaRsClient
from harness.repro.recording import record_reply
from harness.repro.schedule import PIN, Schedule, Txn
from harness.run.worker_main import run_op

# The engine primitives a workload's op calls: what the standalone script
# re-issues, argument for argument.
PRIMITIVES = (
    "append",
    "update",
    "delete",
    "merge",
    "insert_select",
    "optimize",
    "set_properties",
    "add_columns",
    "append_idempotent",
    "read",
)


class PinnedDeltaRs(DeltaRsClient):
    """A delta-rs client whose table object stays at the snapshot `pin` took,
    recording each primitive call (name, arguments) it makes."""

    calls: list[dict[str, Any]]

    def pin(self) -> int:
        from deltalake import DeltaTable

        self.dt = DeltaTable(self.config.table_uri, storage_options=self.options or None)
        return self.dt.version()

    def _table(self) -> Any:
        if self.dt is None:
            self.pin()
        self.last_read_version = self.dt.version()
        return self.dt


def _plain(x: Any) -> Any:
    if isinstance(x, TableSpec):
        return None
    if isinstance(x, Column):
        return [x.name, x.type]
    if isinstance(x, (list, tuple)):
        return [_plain(y) for y in x]
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    return x


def _recorded(name: str) -> Any:
    base = getattr(DeltaRsClient, name)
    sig = inspect.signature(base)

    def call(self: PinnedDeltaRs, *args: Any, **kwargs: Any) -> Any:
        bound = sig.bind(self, *args, **kwargs)
        bound.apply_defaults()
        arguments = {k: _plain(v) for k, v in bound.arguments.items() if k not in ("self", "table", "op_id")}
        self.calls.append({"primitive": name, "args": arguments})
        return base(self, *args, **kwargs)

    return call


for _name in PRIMITIVES:
    setattr(PinnedDeltaRs, _name, _recorded(_name))


def run_events(
    schedule: Schedule, storage: Any, uri: str, table: TableSpec, workload: Any, run_dir: Path
) -> tuple[list[str], dict[str, str], dict[str, list[dict[str, Any]]], dict[str, tuple[Any, int]]]:
    """Create the table, the setup commits, then the snapshots and commits in
    the schedule's order, each recorded in the replay's history."""

    def client(process: int | str) -> PinnedDeltaRs:
        options = storage.deltars_options(str(process), "n1") if schedule.fault else {}
        cfg = ClientConfig(engine="delta-rs", node="n1", process=process, table_uri=uri, storage_options=options)
        c = PinnedDeltaRs(cfg)
        c.calls = []
        c.open()
        return c

    notes: list[str] = []
    outcomes: dict[str, str] = {}
    calls: dict[str, list[dict[str, Any]]] = {}
    pinned: dict[str, tuple[PinnedDeltaRs, int]] = {}
    with HistoryWriter(run_dir / "history.jsonl") as h:
        setup = client("setup")
        decl = TableDeclaration.from_json(schedule.declaration)
        value = {**schedule.declaration, **table.to_json()} if decl.table is not None else schedule.declaration
        op = {"f": "create-table", "id": "setup.1", "value": value}
        record_reply(h, "setup", op, run_op(setup, workload, table, op), "n1")
        for i, rows in enumerate(schedule.setup, start=2):
            op_id = f"setup.{i}"
            res = setup.append([tuple(r) for r in rows], table, "dataframe", op_id)
            h.record(process="setup", type=INVOKE, f="setup-append", id=op_id, value={"rows": len(rows)})
            h.record(process="setup", type="ok", f="setup-append", id=op_id, version=res.version)
        if schedule.fault:
            f = schedule.fault
            # Every replay client runs on n1: a fault aimed at one node or
            # client in the run is aimed at all of them here.
            target = {k: v for k, v in (f.get("target") or {}).items() if k not in ("node", "client")}
            storage.proxy.add_fault(f["kind"], target, **(f.get("params") or {}))
            h.record(process="nemesis", type=INVOKE, f=f"start-{f.get('nemesis')}", id="nemesis.1")
            h.record(process="nemesis", type="ok", f=f"start-{f.get('nemesis')}", id="nemesis.1", value=f)
        expected = len(schedule.setup)  # the replay's latest version
        process = {t.op_id: i for i, t in enumerate(schedule.txns)}
        straddles = _straddles(schedule)
        done: set[str] = set()

        def execute(txn: Txn) -> dict[str, Any]:
            c, _ = pinned[txn.op_id]
            op = {"f": txn.f, "id": txn.op_id, "value": txn.value}
            h.record(process=process[txn.op_id], type=INVOKE, f=txn.f, id=txn.op_id, value=txn.value, node="n1")
            reply = run_op(c, workload, table, op)
            record_reply(h, process[txn.op_id], op, reply, "n1")
            outcomes[txn.op_id] = reply["type"]
            calls[txn.op_id] = list(c.calls)
            return reply

        for kind, txn in schedule.events():
            if kind == PIN:
                c = client(process[txn.op_id])
                v = c.pin()
                if v != expected:
                    notes.append(f"{txn.op_id}'s snapshot is at version {v}, not {expected}")
                pinned[txn.op_id] = (c, v)
                if txn.f == "read":
                    execute(txn)
                continue
            if txn.op_id in done:
                continue
            owner = straddles.get(txn.op_id)
            if owner is not None and owner.op_id in pinned:
                # The acknowledged commit the log lost: its owner's commit PUT
                # was in flight across it (held here), then replaced it.
                notes += _straddle(
                    storage.proxy, str(process[owner.op_id]), lambda t=owner: execute(t), lambda t=txn: execute(t)
                )
                done.add(owner.op_id)
            else:
                execute(txn)
            if outcomes.get(txn.op_id) == "ok" and txn.f != "read":
                # Under a fault a commit may replace another: the log, not
                # the count of acknowledgements, says where the table is.
                expected = pinned[txn.op_id][0].dt.version() if schedule.fault else expected + 1
        if schedule.fault:
            storage.proxy.heal()
            h.record(process="nemesis", type=INVOKE, f=f"stop-{schedule.fault.get('nemesis')}", id="nemesis.2")
            h.record(process="nemesis", type="ok", f=f"stop-{schedule.fault.get('nemesis')}", id="nemesis.2")
    return notes, outcomes, calls, pinned


HOLD_TIMEOUT_S = 30.0


def _straddles(schedule: Schedule) -> dict[str, Txn]:
    """lost txn -> the txn whose commit replaced it, where a fault lets one
    commit replace another (the store applied a PUT it should have refused)."""
    if not schedule.fault:
        return {}
    owners = {t.commit_version: t for t in schedule.txns if t.commit_version is not None}
    return {t.op_id: owners[t.lost_version] for t in schedule.txns if t.lost_version in owners}


def _straddle(proxy: Any, owner_client: str, owner: Any, lost: Any) -> list[str]:
    """Run `owner` until its commit PUT is held, `lost` to completion, then
    release the owner's PUT; returns what did not go as scheduled."""
    hold = proxy.hold_next_commit(owner_client)
    thread = threading.Thread(target=owner, daemon=True)
    thread.start()
    notes = []
    try:
        held = proxy.wait_hold(owner_client, HOLD_TIMEOUT_S)
    except HarnessError as e:
        notes.append(f"the replacing commit was never held: {e}")
        held = None
    finally:
        if held is None:
            proxy.remove_fault(hold)
    lost()
    if held is not None:
        proxy.release(held["id"])
    thread.join(HOLD_TIMEOUT_S + 30)
    if thread.is_alive():
        notes.append("the replacing commit did not finish")
    return notes
