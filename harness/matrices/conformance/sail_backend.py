"""Run conformance cells on Sail, an engine reachable only through SQL /
Spark Connect, so the interleaving is controlled at the storage: the S3
fault proxy between the Sail servers and an embedded moto S3.

Two Sail servers: the winner's statements run on n1, the loser's on n2
(the proxy tells them apart by the node in their access key). Schedule:
pin n2 at v0 and hold n2's next commit PUT; run the loser's statement in a
thread; wait until its commit PUT of v0+1 is held (it read v0 and is
committing); run the winner to completion (it commits v0+1); unpin n2 and
release the held PUT: it fails put-if-absent (412), and Sail must run its
conflict check against v0+1 (commit v0+2 or fail). Verified: the held PUT
was version v0+1, the winner's commit is v0+1, and the release got 412;
otherwise the cell is uncontrolled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkers.facts import table_facts
from harness.core.history import ErrorClass
from harness.core.table import TableSpec
from harness.deltalog import read_log
from harness.engines.sail import SAIL_CAPABILITIES, SailEngine
from harness.engines.spark import SparkConnectClient
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.rows import COLUMNS, SETUP, OpPlan, plans, table_spec
from harness.matrices.conformance.verdict import COMMITTED, ERROR, FAILED, NOT_RUN, UNSUPPORTED, Observation, TxnResult
from harness.run.storage import open_storage
from harness.s3proxy.s3 import log_version

HOLD_TIMEOUT_S = 30.0
NODE_TIMEOUT_S = 60.0
LOSER = "n2"


class SailBackend:
    default_isolation = SAIL_CAPABILITIES.default_isolation

    def __init__(self, release: str | None = None) -> None:
        self.storage: Any = None
        self.engine = SailEngine(release)

    def _start(self, run_dir: Path) -> None:
        """moto, the proxy and two Sail servers; their logs under run_dir/logs/."""
        self.storage = open_storage("s3", run_dir, proxy=True, prefix="conformance/")
        try:
            self.nodes = {n.name: n for n in self.engine.start_nodes(2, self.storage, run_dir / "logs", NODE_TIMEOUT_S)}
        except BaseException:
            self.storage.stop()
            raise
        self.proxy = self.storage.proxy

    def start(self, root: Path) -> None:
        """Storage and nodes for cells whose tables go under `root`."""
        if self.storage is None:
            self._start(root.parent)

    def close(self) -> None:
        self.engine.stop_nodes()
        if self.storage is not None:
            self.storage.stop()

    def reader_options(self) -> dict[str, str] | None:
        return self.storage.reader_options() if self.storage is not None else None

    def _client(self, node: str, uri: str) -> SparkConnectClient:
        cfg = self.engine.client_config(self.nodes[node], node, self.storage, uri, 30.0)
        c = SparkConnectClient(cfg, "sail", self.engine.capabilities)
        c.open()
        return c

    def run_cell(self, cell: C.Cell, root: Path) -> Observation:
        t0 = time.monotonic()
        ops = self.engine.capabilities.ops
        missing = [k for k in (cell.winner, cell.loser) if C.PRIMITIVES[k] not in ops]
        if missing:
            release = f"=={self.engine.release}" if self.engine.release else ""
            r = TxnResult(
                UNSUPPORTED,
                ErrorClass.UNSUPPORTED.value,
                f"sail{release} has no {', '.join(sorted({C.PRIMITIVES[k] for k in missing}))} (capabilities)",
            )
            other = TxnResult(NOT_RUN)
            return Observation(r if cell.winner in missing else other, r if cell.loser in missing else other, True)
        if self.storage is None:
            self._start(root.parent)
        uri = self.storage.table_uri(cell.id.replace("/", "__").replace(">", "-then-").replace("+", "-"))
        obs = self._run_create(cell, uri) if cell.winner == C.CREATE else self._run_pair(cell, uri)
        obs.table, obs.seconds = uri, round(time.monotonic() - t0, 3)
        return obs

    # -- one op ------------------------------------------------------------------

    @staticmethod
    def execute(client: SparkConnectClient, plan: OpPlan, table: TableSpec) -> None:
        k, op_id = plan.kind, plan.op_id
        if k == C.INSERT:
            client.append(plan.new_rows(), table, "sql", op_id)
        elif k == C.INSERT_SELECT:
            client.insert_select(list(COLUMNS), plan.insert_select_sql("{table}"), ["id"], op_id)
        elif k == C.UPDATE:
            client.update(plan.where, plan.assignments(), op_id)
        elif k == C.DELETE:
            client.delete(plan.where, op_id)
        elif k == C.DELETE_ALL:
            client._register()
            client._tag(op_id)
            client._sql(f"DELETE FROM {client.table_ref}")
        elif k in (C.MERGE, C.MERGE_NOLIT):
            # VALUES gives an all-NULL column no type: the insert casts it.
            client.merge(
                plan.merge_source(),
                list(COLUMNS),
                plan.merge_on(),
                plan.merge_set(),
                {**plan.merge_insert(), "prev_writer": "CAST(s.prev_writer AS STRING)"},
                op_id,
            )
        elif k == C.SET_PROPERTIES:
            client.set_properties(plan.properties(), op_id)
        else:
            raise ValueError(f"{client.name} backend has no op {k!r}")

    @staticmethod
    def _attempt(client: SparkConnectClient, fn: Callable[[], Any]) -> TxnResult:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - every failure is an observation
            c = client.classify(exc)
            status = FAILED if c.cls.is_conflict else UNSUPPORTED if c.cls is ErrorClass.UNSUPPORTED else ERROR
            return TxnResult(status, c.cls.value, c.raw)
        return TxnResult(COMMITTED)

    # -- schedules ---------------------------------------------------------------

    # Where the loser is held, and what its release must answer. Sail: its
    # commit PUT of v0+1, released to fail put-if-absent (412). A backend
    # whose engine checks before it writes holds that check instead.
    held_request = "commit PUT"
    hold_target: dict[str, Any] = {}
    hold_version_filter = False  # hold only a request for version v0+1
    release_status = 412
    pin_loser = True  # may the loser's reads be pinned at v0
    # Whether every commit names its op (delta-spark's userMetadata): then a
    # committed op the log does not name is missing evidence.
    commits_name_op = False

    def _held_race(
        self, v0: int, start_loser: Callable[[], threading.Thread], run_winner: Callable[[], TxnResult], pin: bool
    ) -> tuple[TxnResult, list[str], threading.Thread | None, int | None]:
        """Hold (and pin) the loser, start it, wait for its held request of
        version v0+1, run the winner, then let the loser go. Returns the
        winner's result, control notes, the loser's thread, and the release
        status."""
        notes: list[str] = []
        pin_id = self.proxy.pin(v0, node=LOSER) if pin and self.pin_loser else None
        self.proxy.hold_next_commit(LOSER, version=v0 + 1 if self.hold_version_filter else None, **self.hold_target)
        thread = start_loser()
        status, held = None, []
        try:
            held = self.proxy.holds(LOSER, wait=HOLD_TIMEOUT_S)
            if not held:
                notes.append(f"the loser's {self.held_request} was never held within {HOLD_TIMEOUT_S:.0f} s")
            elif log_version(held[0]["path"]) != v0 + 1:
                notes.append(
                    f"the loser's held {self.held_request} was {held[0]['method']} {held[0]['path']}, "
                    f"not of version {v0 + 1}"
                )
            winner = run_winner()
        finally:
            if pin_id is not None:
                self.proxy.unpin(pin_id)
            if held := self.proxy.holds(LOSER):
                status = self.proxy.release(held[0]["id"])
            self.proxy.heal()  # whatever is left of this cell's rules
        if held and status != self.release_status:
            notes.append(
                f"the released {self.held_request} got {status}, not {self.release_status} "
                "(the winner's commit was not there)"
            )
        thread.join(HOLD_TIMEOUT_S)
        if thread.is_alive():
            notes.append("the loser did not finish")
        return winner, notes, thread, status

    @staticmethod
    def _setup_table(client: SparkConnectClient, table: TableSpec, uri: str) -> None:
        """The cell's table at version len(SETUP): created, then the setup rows."""
        client.create_table(table)
        for op_id, rows in SETUP:
            client.append(rows, table, "dataframe", op_id)

    def _run_pair(self, cell: C.Cell, uri: str) -> Observation:
        table = table_spec(cell)
        a = self._client("n1", uri)
        b: SparkConnectClient | None = None
        try:
            self._setup_table(a, table, uri)
            v0 = len(SETUP)
            b = self._client(LOSER, uri)
            b._register()  # before the pin: registering reads the table
            wp, lp = plans(cell)
            out: dict[str, TxnResult] = {}

            def start_loser() -> threading.Thread:
                t = threading.Thread(
                    target=lambda: out.setdefault("loser", self._attempt(b, lambda: self.execute(b, lp, table))),
                    daemon=True,
                )
                t.start()
                return t

            def run_winner() -> TxnResult:
                return self._attempt(a, lambda: self.execute(a, wp, table))

            winner, notes, _, _ = self._held_race(v0, start_loser, run_winner, pin=True)
            hold_ok = not notes  # the loser was held at its commit of v0+1, and finished
            loser = out.get("loser") or TxnResult(ERROR, ErrorClass.TIMEOUT.value, "the loser did not finish")
        finally:
            a.close()
            if b is not None:
                b.close()
        log = read_log(uri, self.storage.reader_options())
        self._observe_versions(log, v0, wp.op_id, lp.op_id, winner, loser, notes, hold_ok)
        obs = Observation(winner, loser, controlled=not notes, control_note="; ".join(notes))
        if v0 + 1 in log.commits:
            commit = log.commits[v0 + 1]
            obs.winner_added_files = len(commit.adds)
            obs.winner_removed_files = len(commit.removes)
            obs.winner_changed_metadata = commit.metadata is not None or commit.protocol is not None
        return obs

    @classmethod
    def _observe_versions(
        cls,
        log: Any,
        v0: int,
        winner_op: str,
        loser_op: str,
        winner: TxnResult,
        loser: TxnResult,
        notes: list[str],
        hold_ok: bool,
    ) -> None:
        """Versions from the log, not assumed: the engine reports none. The
        loser was held at its commit of v0+1 until the winner finished, so a
        commit at v0+1 is the winner's, and the schedule put the loser on v0
        (it was committing v0+1; what its commit says it read is
        matrix.observe_read_versions' to tell); rows tagged with an op's id,
        where it wrote any, must sit at that op's version. Without that
        evidence the cell is uncontrolled."""

        facts = table_facts(log)
        if hold_ok:
            loser.scheduled_read_version = v0
            loser.read_version_source = (
                f"its {cls.held_request} of version {v0 + 1} was held until the winner had committed it"
            )
        if winner.status == COMMITTED:
            if v0 + 1 not in log.commits:
                notes.append(f"the winner reported success, but the log has no version {v0 + 1}")
            else:
                winner.version, winner.scheduled_read_version = v0 + 1, v0
                winner.read_version_source = f"it ran while the loser was held, on the table at version {v0}"
            tagged = facts.commit_version(winner_op)
            if tagged is not None and tagged != v0 + 1:
                notes.append(f"the winner's rows first appear at version {tagged}, not {v0 + 1}")
            elif tagged is None and cls.commits_name_op:
                notes.append(f"no commit in the log names the winner's op {winner_op}")
        if loser.status == COMMITTED:
            loser.version = log.latest_version
            tagged = facts.commit_version(loser_op)
            if loser.version != v0 + 2 or (tagged is not None and tagged != v0 + 2):
                notes.append(
                    f"the loser's commit is version {tagged if tagged is not None else loser.version}, not {v0 + 2}"
                )

    def _run_create(self, cell: C.Cell, uri: str) -> Observation:
        """Two CREATEs at one empty path: the loser's commit PUT of version 0
        is held until the winner has created the table."""
        table = table_spec(cell)
        a, b = self._client("n1", uri), self._client(LOSER, uri)
        wp, lp = plans(cell)
        out: dict[str, TxnResult] = {}
        try:

            def start_loser() -> threading.Thread:
                t = threading.Thread(
                    target=lambda: out.setdefault(
                        "loser", self._attempt(b, lambda: b.create_table_at(uri, table, lp.op_id))
                    ),
                    daemon=True,
                )
                t.start()
                return t

            winner, notes, _, _ = self._held_race(
                -1, start_loser, lambda: self._attempt(a, lambda: a.create_table_at(uri, table, wp.op_id)), pin=False
            )
        finally:
            a.close()
            b.close()
        loser = out.get("loser") or TxnResult(ERROR, ErrorClass.TIMEOUT.value, "the loser did not finish")
        if winner.status == COMMITTED:
            winner.version = 0
        if loser.status == COMMITTED:
            loser.version = read_log(uri, self.storage.reader_options()).latest_version
        obs = Observation(winner, loser, controlled=not notes, control_note="; ".join(notes))
        obs.winner_changed_metadata = True
        return obs
