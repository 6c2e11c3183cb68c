"""bench-overhead: what the harness itself costs per op.

Runs the same op sequence (the append workload's mix, fixed seed) on two
fresh tables, interleaved op by op: a bare loop calling the engine client
in-process, and the harness (worker process, pipe, history recording). The harness's
per-op overhead is the controller-observed latency minus the time the worker
spent inside the engine.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness.core.history import INVOKE, HistoryWriter, OpError
from harness.engines import make_client, make_engine
from harness.engines.cds import ENV as CDS_ENV
from harness.run.plan import RunSpec, TestPlan
from harness.run.storage import open_storage
from harness.run.workers import Worker
from workloads.base import SlotGenerator

SEED = 1
TARGET_OVERHEAD_P50_MS = 1.0
TARGET_THROUGHPUT_RATIO = 0.90


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def bench_overhead(engine_name: str, storage_kind: str, n_ops: int) -> int:
    plan = TestPlan.build(RunSpec(workload="append", engine=engine_name, storage=storage_kind, seed=SEED))
    engine, workload, table = plan.engine, plan.workload, plan.table
    gen = SlotGenerator(SEED, 0)
    ops = [workload.next_op(gen).to_json() for _ in range(n_ops)]
    with tempfile.TemporaryDirectory(prefix="dj-bench-") as tmp:
        run_dir = Path(tmp)
        storage = open_storage(storage_kind, run_dir, prefix="bench/")
        try:
            nodes = engine.start_nodes(1, storage, run_dir / "logs", 180)  # a JVM on a loaded machine
            try:
                # Bare loop: the engine client called directly, no harness.
                bare_cfg = engine.client_config(nodes[0], 0, storage, storage.table_uri("bare"), 30)
                client = make_client(bare_cfg)
                client.open()
                client.create_table(table)
                # Through the harness: worker process + history recording.
                cfg = engine.client_config(nodes[0], 0, storage, storage.table_uri("harness"), 30)
                worker = Worker(cfg, "append", SEED, None, table, run_dir / "logs" / "worker.log").start(90)
                history = HistoryWriter(run_dir / "history.jsonl")
                bare_lat, lat, overhead = [], [], []
                try:
                    worker.call({"f": "create-table", "id": "setup.1", "value": None}, 60)
                    # Interleaved op by op, so both loops see the same table
                    # growth and the same load on the machine.
                    for op in ops:
                        t = time.perf_counter_ns()
                        workload.invoke(client, table, op)
                        bare_lat.append((time.perf_counter_ns() - t) / 1e6)

                        t = time.perf_counter_ns()
                        history.record(process=0, type=INVOKE, f=op["f"], id=op["id"], value=op["value"], node="n1")
                        reply = worker.call(op, 30)
                        err = OpError.from_json(reply["error"]) if reply.get("error") else None
                        history.record(
                            process=0,
                            type=reply["type"],
                            f=op["f"],
                            id=op["id"],
                            value=reply.get("value"),
                            version=reply.get("version"),
                            node="n1",
                            error=err,
                        )
                        total = time.perf_counter_ns() - t
                        lat.append(total / 1e6)
                        overhead.append((total - reply["engine_ns"]) / 1e6)
                finally:
                    history.close()
                    worker.stop()
                    client.close()
            finally:
                engine.stop_nodes()
        finally:
            storage.stop()
    bare_rate, harness_rate = n_ops / (sum(bare_lat) / 1e3), n_ops / (sum(lat) / 1e3)
    ratio = harness_rate / bare_rate
    p50, p99 = statistics.median(overhead), _pct(overhead, 0.99)
    print(
        f"bench-overhead: engine {engine_name}, storage {storage_kind}, {n_ops} ops (append workload mix, seed {SEED})"
    )
    print(
        f"  bare loop : {bare_rate:8.1f} ops/s   latency p50 {statistics.median(bare_lat):7.2f} ms  "
        f"p99 {_pct(bare_lat, 0.99):7.2f} ms"
    )
    print(
        f"  harness   : {harness_rate:8.1f} ops/s   latency p50 {statistics.median(lat):7.2f} ms  "
        f"p99 {_pct(lat, 0.99):7.2f} ms"
    )
    print(f"  harness overhead per op (recording + scheduling + IPC): p50 {p50:.3f} ms  p99 {p99:.3f} ms")
    print(f"  throughput: harness = {ratio * 100:.1f}% of bare loop")
    ok1 = p50 <= TARGET_OVERHEAD_P50_MS
    ok2 = ratio >= TARGET_THROUGHPUT_RATIO
    print(
        f"  target overhead p50 <= {TARGET_OVERHEAD_P50_MS} ms: {'met' if ok1 else 'MISSED'}; "
        f"target throughput >= {TARGET_THROUGHPUT_RATIO:.0%} of bare: {'met' if ok2 else 'MISSED'}"
    )
    return 0


def bench_startup(engine_names: list[str], nodes: int, repeat: int) -> int:
    """Seconds from `start_nodes` to every node answering, per engine, on
    local storage (the store plays no part in a node's start). delta-spark
    is timed without and with its class-data sharing archive, side by side."""
    print(f"bench-startup: {nodes} node(s) per start, {repeat} start(s) per engine, local storage")
    for name in engine_names:
        variants = [("", None)] if name != "delta-spark" else [(" (no class archive)", "0"), (" (class archive)", "1")]
        medians = []
        for label, cds in variants:
            with _env(CDS_ENV, cds):
                times, phases = _time_starts(name, nodes, repeat, record_first=cds == "1")
            medians.append(statistics.median(times))
            print(
                f"  {name + label:<32} median {statistics.median(times):6.1f} s   min {min(times):6.1f} s   "
                f"max {max(times):6.1f} s"
                + "".join(f"   {k.removesuffix('_s')} {statistics.median(v):.1f} s" for k, v in phases.items())
            )
        if len(medians) == 2:
            print(f"  {name}: the class archive starts nodes in {medians[1] / medians[0]:.2f}x the time")
    return 0


@contextlib.contextmanager
def _env(name: str, value: str | None):
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _time_starts(name: str, nodes: int, repeat: int, record_first: bool) -> tuple[list[float], dict[str, list[float]]]:
    engine = make_engine(name)
    times: list[float] = []
    phases: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="dj-bench-") as tmp:
        storage = open_storage("local", Path(tmp))
        engine.prepare()
        if hasattr(engine, "jarset"):
            engine.jarset(storage)  # the one-time jar fetch is not start-up
        archive = getattr(engine, "cds", None)
        if record_first and (archive is None or not archive.path.is_file()):
            try:  # the once-per-machine recording of the archive is not start-up either
                engine.start_nodes(1, storage, Path(tmp) / "logs-record", 300)
            finally:
                engine.stop_nodes()
        for i in range(repeat):
            t = time.perf_counter()
            try:
                engine.start_nodes(nodes, storage, Path(tmp) / f"logs-{i}", 180)
                times.append(time.perf_counter() - t)
                for k, v in getattr(engine, "last_start", {}).items():
                    phases.setdefault(k, []).append(v)
            finally:
                engine.stop_nodes()
    return times, phases
