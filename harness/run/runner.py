"""The runner: composes storage, engine nodes, client workers, the workload's
generator and the history into one run, then stops everything.

Jepsen's process semantics: each of `concurrency` slots runs one logical
process at a time. An op whose outcome is unknown (timeout, crash,
indeterminate error) is recorded `info`, and the slot continues under a new
process id (old id + concurrency) with a fresh worker process, because the
old process may still have that op in flight.
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.capacity import WORKER_START_TIMEOUT
from harness.core.contract import breaches as contract_breaches
from harness.core.errors import HarnessError
from harness.core.history import INFO, INVOKE, OK, ErrorClass, HistoryWriter, OpError
from harness.core.procs import SpawnRefused
from harness.core.storage import Storage
from harness.core.table import TableDeclaration, TableSpec
from harness.deltalog import DataFileKeeper, copy_table
from harness.deltalog.coordinated import COORDINATOR_FILE, dump_coordinator
from harness.deltalog.copy import KEPT_DIR
from harness.engines.base import Engine, Node
from harness.engines.deltaspark import COORDINATOR_TABLE
from harness.engines.spark import spark_uri
from harness.run import forkserver
from harness.run.cluster import RunCluster
from harness.run.forkserver import ForkServer
from harness.run.plan import TestPlan, package_versions
from harness.run.progress import Progress
from harness.run.storage import LocalStorage, open_storage
from harness.run.store_probe import StoreTarget, check_store
from harness.run.workers import OpTimeout, Worker, WorkerDied
from nemeses.base import NemesisContext
from nemeses.schedule import NemesisSchedule
from workloads.base import OpSpec, SlotGenerator, Workload

NODE_START_TIMEOUT = 60.0
SETUP_TIMEOUT = 60.0
TABLE_DIR = "table"
# The self-check before every S3 run: about a second on moto (with the
# commit coordinator's DynamoDB property, 1.1 s).
SELF_CHECK_ROUNDS = 10
SELF_CHECK_RACERS = 8
# Seconds of racing rounds at most, for each racing property (one round at
# least): SeaweedFS answers a losing racer only after its lock retries, up
# to 4 s at 8 racers.
SELF_CHECK_BUDGET = 2.0


@dataclass
class RunOutcome:
    run_dir: Path
    interrupted: bool
    counts: dict[str, int]
    elapsed: float  # seconds of the workload phase
    fatal: str | None = None
    # The engine would not create the table the run asked for (e.g. an
    # isolation level it does not accept): nothing could be tested.
    refused: str | None = None
    # harness.run.store_probe's StoreCheck as JSON: None for a local directory.
    store_self_check: dict[str, Any] | None = None
    # The commit files the store itself logged replacing (SeaweedFS): None
    # where the store keeps no such log.
    store_replaced_commits: dict[str, Any] | None = None


class TableRefused(Exception):
    """create-table failed as unsupported: the run ends, its verdict unknown."""


# How often the run looks for new data files to keep
# (harness.deltalog.DataFileKeeper).
KEEP_INTERVAL = 0.05


@dataclass
class _Slot:
    index: int
    process: int
    node: Node
    worker: Worker | None = None
    starting: Worker | None = None  # the worker being started, until it answers
    gen: SlotGenerator | None = None
    spawned: int = 0
    # (f, id, monotonic start) of the op in flight: what kill-mid-op aims at.
    running: tuple[str, str, float] | None = None


@dataclass
class _Shared:
    go: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    ready: int = 0
    fatal: str | None = None
    aborted: bool = False  # what fails after an abort is its consequence, not the run's cause
    lock: threading.Lock = field(default_factory=threading.Lock)


class Runner:
    def __init__(self, plan: TestPlan, run_dir: Path, progress: Progress | None = None):
        self.plan = plan
        self.spec = plan.spec
        self.run_dir = run_dir
        self.logs_dir = run_dir / "logs"
        self.progress = progress or Progress(plan.spec.time_limit, enabled=False)
        self.workload: Workload = plan.workload
        self.engines: list[Engine] = plan.engines
        self.engine: Engine = plan.engine
        self.node_engine: dict[str, Engine] = {}
        self.table: TableSpec = plan.table
        self.history = HistoryWriter(run_dir / "history.jsonl")
        self.shared = _Shared()
        self.storage: Storage | None = None
        self.table_uri = ""
        self.nodes: list[Node] = []
        self.slots: list[_Slot] = []
        self.threads: list[threading.Thread] = []
        self.barrier: threading.Barrier | None = None
        self.nemeses = plan.nemeses
        # Extra environment for workers spawned for a node (the clock nemesis).
        self.node_env: dict[str, dict[str, str]] = {}
        self.cluster: RunCluster | None = None
        self.schedule: NemesisSchedule | None = None
        self.store_self_check: dict[str, Any] | None = None
        self.store_replaced_commits: dict[str, Any] | None = None
        self.forks: ForkServer | None = None
        self.keeper: DataFileKeeper | None = None
        self._keeper_thread: threading.Thread | None = None
        self._keeper_stop = threading.Event()

    # -- workers -----------------------------------------------------------

    def _spawn(self, process: int | str, node: Node, slot: _Slot | None = None) -> Worker:
        assert self.storage is not None
        engine = self.node_engine.get(node.name, self.engine)
        cfg = engine.client_config(node, process, self.storage, self.table_uri, self.spec.op_timeout)
        worker = Worker(
            cfg,
            self.spec.workload,
            self.spec.seed,
            self.spec.isolation,
            self.table,
            self.logs_dir / f"worker-{process}.log",
            extra_env=self.node_env.get(node.name),
            forks=self.forks if self.forks is not None and self.forks.wait_ready() else None,
        )
        if slot is None:
            return worker.start(WORKER_START_TIMEOUT)
        # Seen by _abort, so that a failed run does not wait out the others' starts.
        slot.starting = worker
        try:
            return worker.start(WORKER_START_TIMEOUT)
        finally:
            slot.starting = None

    def _execute(self, slot: _Slot, op: OpSpec) -> None:
        """Invoke one op on the slot's worker and record its completion."""
        assert slot.worker is not None
        if self.keeper is not None and op.f in self.workload.deletes_data_files:
            # Every file the op could delete is kept before it is invoked.
            try:
                self.keeper.sweep()
            except Exception as e:  # noqa: BLE001 - the run goes on; the checkers see what was kept
                self.progress.message(f"keeping data files: {e}")
        rec = self.history.record
        rec(process=slot.process, type=INVOKE, f=op.f, id=op.id, value=op.value, node=slot.node.name)
        slot.running = (op.f, op.id, time.monotonic())
        try:
            reply = slot.worker.call(op.to_json(), self.spec.op_timeout)
        except OpTimeout as e:
            slot.worker.kill()
            rec(
                process=slot.process,
                type=INFO,
                f=op.f,
                id=op.id,
                value=op.value,
                node=slot.node.name,
                error=OpError(ErrorClass.TIMEOUT, str(e)),
            )
            self._retire(slot, killed=True)
            return
        except (WorkerDied, OSError, ValueError) as e:  # pipe gone mid-call: a crash
            rec(
                process=slot.process,
                type=INFO,
                f=op.f,
                id=op.id,
                value=op.value,
                node=slot.node.name,
                error=OpError(ErrorClass.CRASH, str(e)),
            )
            self._retire(slot, killed=True)
            return
        finally:
            slot.running = None
        kind = reply.get("type", INFO)
        err = OpError.from_json(reply["error"]) if reply.get("error") else None
        value = reply.get("value") if kind == OK and reply.get("value") is not None else op.value
        rec(
            process=slot.process,
            type=kind,
            f=op.f,
            id=op.id,
            value=value,
            version=reply.get("version"),
            node=slot.node.name,
            error=err,
        )
        if kind == INFO:
            self._retire(slot, killed=False)

    def _retire(self, slot: _Slot, killed: bool) -> None:
        if slot.worker is not None and not killed:
            slot.worker.stop()
        elif slot.worker is not None:
            slot.worker.kill()
        slot.worker = None
        slot.process += self.spec.concurrency

    # -- slots -------------------------------------------------------------

    def _slot_main(self, slot: _Slot, barrier: threading.Barrier, final: bool) -> None:
        sh = self.shared
        slot.gen = SlotGenerator(self.spec.seed, slot.index)
        try:
            slot.worker = self._spawn(slot.process, slot.node, slot)
            with sh.lock:
                sh.ready += 1
            sh.go.wait()
            while not sh.stop.is_set():
                if slot.worker is None and not self._respawn(slot):
                    continue
                self._execute(slot, self.workload.next_op(slot.gen))
            # Quiesce: every slot has finished its in-flight op before any
            # final read starts.
            barrier.wait(self.spec.op_timeout + WORKER_START_TIMEOUT)
            if final and not sh.fatal:
                for op in self.workload.final_ops(slot.gen):
                    if slot.worker is None and not self._respawn(slot, retries=3):
                        break
                    self._execute(slot, op)
        except threading.BrokenBarrierError:
            pass
        except HarnessError as e:
            self._fail(str(e))
        except Exception as e:  # noqa: BLE001 - one line for the run, not a thread's traceback on stderr
            where = self.logs_dir / f"slot-{slot.index}-traceback.txt"
            try:
                where.write_text(traceback.format_exc())
                kept = f"; traceback: {where}"
            except OSError:
                kept = ""
            self._fail(f"client slot {slot.index} failed: {type(e).__name__}: {e} (a harness bug{kept})")
        finally:
            # Workers die with the thread that spawned them (PDEATHSIG), so
            # each slot stops its own worker before its thread ends.
            if slot.worker is not None:
                slot.worker.stop()
                slot.worker = None

    def _respawn(self, slot: _Slot, retries: int | None = None) -> bool:
        tries = 0
        while retries is None or tries < retries:
            tries += 1
            try:
                slot.worker = self._spawn(slot.process, slot.node, slot)
                return True
            except SpawnRefused:
                raise  # the machine's limit: a retry would only run on with fewer clients
            except HarnessError as e:
                self.progress.message(f"slot {slot.index}: {e}; retrying")
                if self.shared.stop.wait(1.0) and retries is None:
                    return False
        return False

    def _fail(self, why: str) -> None:
        """End the run for `why`: the first failure is its cause, and no
        final phase follows."""
        sh = self.shared
        with sh.lock:
            if sh.fatal is None and not sh.aborted:
                sh.fatal = why
        sh.stop.set()
        if self.barrier is not None:
            self.barrier.abort()

    # -- the run -----------------------------------------------------------

    def _setup_table(self) -> None:
        """Create the table through the engine under test, then run the
        workload's setup ops (e.g. an initial load), recorded as process 'setup'."""
        node = self.nodes[0]
        worker = self._spawn("setup", node)
        try:
            # The engine and its default isolation level ride in the history:
            # checkers judge commits by the level the table carried, and need
            # the default when it carried none (spec C13).
            mixed = len(self.engines) > 1
            declaration = TableDeclaration(
                table=self.table,
                engine=self.engine.name,
                default_isolation=self.engine.capabilities.default_isolation,
                row_key=self.workload.row_key,
                predicate_column=self.workload.predicate_column,
                strict_exceptions=self.spec.strict_exceptions,
                # Which engine each node runs, and each engine's default level:
                # a commit carrying no level is judged by its committer's default.
                node_engines={n.name: self.node_engine[n.name].name for n in self.nodes} if mixed else {},
                default_isolation_by_engine=(
                    {e.name: e.capabilities.default_isolation for e in self.engines} if mixed else {}
                ),
            )
            value = declaration.to_json()
            gen = SlotGenerator(self.spec.seed, "setup")
            ops = [OpSpec("create-table", gen.next_id(), value), *self.workload.setup_ops(gen)]
            for op in ops:
                self._setup_op(worker, node, op)
        finally:
            worker.stop()

    def _setup_op(self, worker: Worker, node: Node, op: OpSpec) -> None:
        rec = self.history.record
        rec(process="setup", type=INVOKE, f=op.f, id=op.id, value=op.value, node=node.name)
        try:
            # Setup is not under test: it gets a generous timeout even when
            # ops get a tiny one.
            reply = worker.call(op.to_json(), max(self.spec.op_timeout, SETUP_TIMEOUT))
        except (OpTimeout, WorkerDied) as e:
            raise HarnessError(f"setup op {op.f} failed: {e}") from None
        err = OpError.from_json(reply["error"]) if reply.get("error") else None
        rec(
            process="setup",
            type=reply["type"],
            f=op.f,
            id=op.id,
            value=reply.get("value"),
            version=reply.get("version"),
            node=node.name,
            error=err,
        )
        if reply["type"] != OK and op.f == "create-table" and err is not None and err.cls is ErrorClass.UNSUPPORTED:
            raise TableRefused(err.raw)
        if reply["type"] != OK:
            what = "creating the table" if op.f == "create-table" else f"setup op {op.f}"
            raise HarnessError(f"{what} failed: {err.raw if err else reply}")

    def _write_spec(self) -> None:
        assert self.storage is not None
        doc = {
            **self.plan.to_json(),
            "storage": self.storage.describe(),
            "table_uri": self.table_uri if self.storage.kind != "s3" else "embedded:" + self.table_uri,
            "commit_protocols": {e.name: e.commit_protocol(self.storage) for e in self.engines},
            # Where the run leaves its engines' or store's documented contract
            # (harness.core.contract): what the checkers find then is no engine defect.
            "contract": [b.to_json() for b in contract_breaches(self.spec.to_json())],
            "nodes": [
                {"name": n.name, "engine": n.engine, "url": n.url, "pid": n.pid, "log": n.log} for n in self.nodes
            ],
            "versions": package_versions({k: v for e in self.engines for k, v in e.versions().items()}),
        }
        (self.run_dir / "spec.json").write_text(json.dumps(doc, indent=2) + "\n")

    def run(self) -> RunOutcome:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        interrupted = False
        refused: str | None = None
        elapsed = 0.0
        try:
            try:
                self.storage = open_storage(
                    self.spec.storage,
                    self.run_dir,
                    local_root=self.spec.local_root,
                    s3_endpoint=self.spec.s3_endpoint,
                    s3_bucket=self.spec.s3_bucket,
                    prefix=f"{self.run_dir.parent.name}/{self.run_dir.name}/",
                    proxy=self.spec.s3_proxy,
                    proxy_seed=self.spec.seed,
                    coordinator=self.plan.needs_coordinator,
                )
                self.table_uri = self.storage.table_uri(TABLE_DIR)
                self.progress.message(f"storage: {self.storage.kind}  table: {self.table_uri}")
                self.store_self_check = self._store_self_check()
                self._start_fork_server()
                self.nodes = self._start_nodes()
                self._write_spec()
                self._setup_table()
                elapsed = self._run_workload()
            except TableRefused as e:
                refused = str(e)
                self.progress.message(f"the engine refused the table: {refused.splitlines()[0]}")
            except KeyboardInterrupt:
                interrupted = True
                self.progress.message("interrupted: stopping workers, nodes and storage")
                self._abort()
        finally:
            self._teardown()
        return RunOutcome(
            self.run_dir,
            interrupted,
            dict(self.history.counts),
            elapsed,
            self.shared.fatal,
            refused,
            self.store_self_check,
            self.store_replaced_commits,
        )

    def _store_self_check(self) -> dict[str, Any] | None:
        """Racing conditional PUTs and read/list consistency on the store
        itself, before any engine touches it: an engine must not be blamed
        for a commit the store let another writer overwrite. Where an engine
        commits through a commit coordinator, its racing conditional
        DynamoDB update too. Straight to the store, never through the fault
        proxy, whose injected faults are the run's own and would fail the
        check for the wrong reason."""
        storage = self.storage
        if storage is None or storage.reader_options() is None or not hasattr(storage, "bucket"):
            return None
        through = "direct" + (" (the run's fault proxy bypassed)" if storage.proxy is not None else "")
        try:
            doc = check_store(
                StoreTarget.from_storage(storage),
                rounds=SELF_CHECK_ROUNDS,
                concurrency=(SELF_CHECK_RACERS,),
                through=through,
                budget=SELF_CHECK_BUDGET,
                dynamodb=any(e.uses_commit_coordinator(storage) for e in self.engines),
            ).to_json()
        except Exception as e:  # noqa: BLE001 - an unreachable store fails the run soon enough on its own
            why = str(e) if isinstance(e, HarnessError) else f"{type(e).__name__}: {e}"
            doc = {"passed": None, "summary": f"not decided: {why[:300]}", "failures": {}, "through": through}
        if doc["passed"] is False:
            # Said up front, whatever the progress setting: every loss the
            # run finds may be the store's.
            print(
                f"delta-jepsen: WARNING: store self-check {doc['summary']}; anomalies this explains "
                "will be reported unknown, as the store's",
                file=sys.stderr,
                flush=True,
            )
        else:
            self.progress.message(f"store self-check: {doc['summary']}")
        return doc

    def _start_fork_server(self) -> None:
        """The worker fork server (harness.run.forkserver), started before
        the nodes so that its imports overlap their start; none where every
        engine's clients run in an environment of their own."""
        if not forkserver.enabled():
            return
        mine = [e for e in self.engines if getattr(e, "release", None) is None]
        if not mine:
            return
        modules = sorted({m for e in mine for m in e.client_modules})
        try:
            self.forks = ForkServer(modules, self.logs_dir / "fork-server.log")
        except (OSError, HarnessError) as e:
            self.progress.message(f"worker fork server not started ({e}): workers start on their own")

    def _start_nodes(self) -> list[Node]:
        """Nodes split evenly over the engines, in engine order (slots take
        nodes round-robin, so each engine serves its share of the slots)."""
        assert self.storage is not None
        count = max(self.spec.nodes, len(self.engines))
        per = [count // len(self.engines) + (i < count % len(self.engines)) for i in range(len(self.engines))]
        nodes: list[Node] = []
        for engine, n in zip(self.engines, per, strict=True):
            engine.expect_ops(frozenset(self.workload.primitives.values()))
            for node in engine.start_nodes(n, self.storage, self.logs_dir, NODE_START_TIMEOUT, first=len(nodes) + 1):
                node.engine = engine.name
                self.node_engine[node.name] = engine
                nodes.append(node)
        # Interleave engines so that slots 0, 1, ... alternate between them;
        # the groups differ in length, and what the shortest leaves follows.
        by_engine = [[n for n in nodes if n.engine == e.name] for e in self.engines]
        return [n for group in zip(*by_engine, strict=False) for n in group] + [
            n for group in by_engine for n in group[min(map(len, by_engine)) :]
        ]

    def _run_workload(self) -> float:
        sh = self.shared
        n = self.spec.concurrency
        barrier = self.barrier = threading.Barrier(n)
        self.slots = [_Slot(i, i, self.nodes[i % len(self.nodes)]) for i in range(n)]
        # One final read per node, by its first slot: each node's view of the
        # final state (found in one pass: nodes may far outnumber slots).
        first: dict[str, int] = {}
        for s in self.slots:
            first.setdefault(s.node.name, s.index)
        finals = set(first.values())
        self.threads = []
        for s in self.slots:
            t = threading.Thread(
                target=self._slot_main, args=(s, barrier, s.index in finals), name=f"slot-{s.index}", daemon=True
            )
            try:
                t.start()
            except RuntimeError as e:
                self._fail(str(SpawnRefused.of(f"the thread of client slot {s.index}", e)))
                break
            self.threads.append(t)
        deadline = time.monotonic() + WORKER_START_TIMEOUT + 10
        while sh.ready < n and not sh.stop.is_set():
            if time.monotonic() > deadline:
                self._fail("client workers did not start in time")
            self.progress.update("starting", 0.0, self.history.counts)
            time.sleep(0.05)
        if sh.fatal:
            self._abort()
            raise HarnessError(sh.fatal)
        t0 = time.monotonic()
        self._start_keeper()
        sh.go.set()
        self._start_nemeses()
        while (elapsed := time.monotonic() - t0) < self.spec.time_limit and not sh.stop.is_set():
            self.progress.update("running", elapsed, self.history.counts)
            time.sleep(0.2)
        elapsed = time.monotonic() - t0
        # Every fault is healed before the slots quiesce for the final phase.
        self.progress.update("healing", elapsed, self.history.counts)
        self._heal_nemeses()
        sh.stop.set()
        if sh.fatal:
            self._abort()  # a slot failed: the run ends now, its ops in flight info
        while any(t.is_alive() for t in self.threads):
            self.progress.update("final", time.monotonic() - t0, self.history.counts)
            time.sleep(0.2)
        self.progress.update("done", elapsed, self.history.counts)
        return elapsed

    def _start_nemeses(self) -> None:
        if not self.nemeses:
            return

        assert self.storage is not None
        self.cluster = RunCluster(
            self.nodes, self.slots, self.node_engine, self.node_env, self.storage, self.logs_dir, NODE_START_TIMEOUT
        )
        ctx = NemesisContext(
            random.Random(f"{self.spec.seed}/nemesis"),
            self.cluster,
            self.storage.proxy,
            self.storage.kind,
            target_ops=frozenset(self.workload.kill_during),
            kill_after=self.workload.kill_after,
        )
        self.schedule = NemesisSchedule(self.nemeses, ctx, self.history.record, self.spec.nemesis_interval).start()

    def _heal_nemeses(self) -> None:
        """Idempotent: proxy rules removed, paused processes continued, dead
        server nodes restarted (also on Ctrl-C, from teardown)."""
        if self.schedule is not None:
            self.schedule.stop_and_heal()

    def _abort(self) -> None:
        with self.shared.lock:
            self.shared.aborted = True
        self._heal_nemeses()
        self.shared.stop.set()
        self.shared.go.set()
        if self.barrier is not None:
            self.barrier.abort()  # no final phase after an abort
        for s in self.slots:
            for w in (s.worker, s.starting):
                if w is not None:
                    w.crash()  # unblocks the slot thread: its op is recorded info, its start fails
        self._join()

    def _join(self) -> None:
        for t in self.threads:
            t.join(self.spec.op_timeout + 15)

    def _start_keeper(self) -> None:
        """Keep every data file as it appears (kept/), for workloads whose
        ops delete data files the checkers still read (VACUUM)."""
        if not self.workload.deletes_data_files or self.storage is None:
            return
        self.keeper = DataFileKeeper(self.table_uri, self.run_dir / KEPT_DIR, self.storage.reader_options())
        self.keeper.sweep()

        def loop() -> None:
            assert self.keeper is not None
            while not self._keeper_stop.wait(KEEP_INTERVAL):
                try:
                    self.keeper.sweep()
                except Exception as e:  # noqa: BLE001 - the run goes on; the checkers see what was kept
                    self.progress.message(f"keeping data files: {e}")

        self._keeper_thread = threading.Thread(target=loop, name="keeper", daemon=True)
        self._keeper_thread.start()

    def _stop_keeper(self) -> None:
        self._keeper_stop.set()
        if self._keeper_thread is not None:
            self._keeper_thread.join(timeout=10)
            self._keeper_thread = None
            if self.keeper is not None:
                try:
                    self.keeper.sweep()
                except Exception as e:  # noqa: BLE001
                    self.progress.message(f"keeping data files: {e}")

    def _teardown(self) -> None:
        try:
            self._abort()
            self._stop_keeper()
            if self.storage is not None and self.table_uri:
                self._snapshot_table()
        finally:
            for engine in self.engines:
                engine.stop_nodes()
            if self.cluster is not None:
                self.cluster.close()
            if self.forks is not None:
                self.forks.close()
            if self.storage is not None:
                self.storage.stop()
            self.history.close()

    def _snapshot_table(self) -> None:
        """Copy the table (log and data) into the run folder: the evidence the
        checkers use, re-checkable after the storage is gone."""
        assert self.storage is not None
        dest = self.run_dir / TABLE_DIR
        if isinstance(self.storage, LocalStorage) and Path(self.table_uri).resolve() == dest.resolve():
            return
        try:
            copy_table(self.table_uri, dest, self.storage.reader_options())
        except Exception as e:  # the run's history is still worth keeping
            self.progress.message(f"could not snapshot the table: {e}")
        self._snapshot_coordinator()
        self.store_replaced_commits = self.storage.replaced_commits(self.table_uri)
        if self.store_replaced_commits is not None and self.store_replaced_commits.get("versions"):
            self.progress.message(
                "the store's own log shows commit file(s) replaced by a second write: version(s) "
                + ", ".join(map(str, self.store_replaced_commits["versions"][:10]))
            )

    def _snapshot_coordinator(self) -> None:
        """The commit coordinator's state, which names the newest versions
        where they are not backfilled yet: kept beside the table's copy."""
        assert self.storage is not None
        options = self.storage.coordinator_reader_options()
        if not options or not any(e.uses_commit_coordinator(self.storage) for e in self.engines):
            return
        try:
            doc = dump_coordinator(options, COORDINATOR_TABLE)
        except Exception as e:  # noqa: BLE001 - check says what the missing state leaves undecided
            self.progress.message(f"could not snapshot the commit coordinator: {type(e).__name__}: {e}")
            return
        # The run's tables only: the nodes' warm-up tables (local scratch
        # paths of this machine) registered with the coordinator too.
        root = spark_uri(self.table_uri)
        doc["items"] = [i for i in doc["items"] if str(i.get("path", {}).get("S", "")).startswith(root)]
        (self.run_dir / COORDINATOR_FILE).write_text(json.dumps(doc, indent=2) + "\n")
