"""A realistic stored run folder from a simulated history, for benchmarking
and testing `delta-jepsen check` end to end without an engine.

:func:`write_run` runs the simulator (:mod:`harness.bench.simulate`), optionally
splices in one anomaly (:func:`harness.bench.inject.inject_anomaly`), and writes
what a real run of a transactional workload would leave behind::

    spec.json       workload "simulated", engine "simulator", the checkers
                    log-sanity and serializability, a repro line, versions
    run.json        counts and the generator's statistics
    history.jsonl   setup ops, then invoke + ok / fail for every transaction,
                    interleaved as the simulator scheduled them
    table/          _delta_log/ (real Delta JSON commits, classic parquet
                    checkpoints every `checkpoint_interval` commits,
                    _last_checkpoint) and real parquet data files

The table has the serializability checker's schema: ``k BIGINT, writer
STRING, prev_writer STRING``. Version 0 creates it (protocol, metaData with
``delta.isolationLevel``). Version 1 is the setup op ``setup.load``, which
inserts the rows the simulator calls initial (writer INITIAL): in a stored
run every row version has a real writer, so INITIAL becomes ``setup.load``
in the data and in the history. Each committed transaction is then one
commit, tagged with its op id (``commitInfo["dj.op"]``) and its
``readVersion``. When the isolation level changes from one transaction to
the next, a ``SET TBLPROPERTIES`` commit (op ``setup.alter.<n>``) changes
``delta.isolationLevel`` in between, so that the level the table carries at
each commit is the level the simulator committed it at.

Data files are copy-on-write, as Delta writes them: at most
`rows_per_file` rows per file. An UPDATE / DELETE / MERGE removes every file
holding a row version it replaces or deletes, and adds files holding the
untouched rows of those files (unchanged: same writer and prev_writer) plus
its new row versions (writer = its op id, prev_writer = the writer of the
version it replaced). A version the transaction replaces that is no longer
live (only injected anomalies do that, e.g. a lost update) removes nothing.

Usage: ``python -m harness.bench.synth_run OUT_DIR --txns 10000 [--seed 1]
[--inject G2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from checkers.txn_model import INITIAL, Txn, TxnHistory
from harness.bench.inject import Injection, inject_anomaly
from harness.bench.simulate import E2, OPERATION, SimStats, iter_simulation
from harness.bench.synth_files import PROTOCOL, _checkpoint_table, _err, _jsonl, _parquet_bytes, metadata
from harness.bench.synth_schedule import _assign_processes, _op_params, _place, _RecordingSim, _sim_config
from harness.core.isolation import LEVELS, WRITE_SERIALIZABLE
from harness.run.plan import package_versions

LOADER = "setup.load"  # the op that writes the simulator's initial rows
CREATE = "setup.create"
TABLE_ID = "5d1c3b0e-0000-4000-8000-00000000d317"
WALL0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z: fixed, so a seed gives the same folder
TICK_NS = 1_000_000  # one scheduler step of the simulator = 1 ms of history time


@dataclass
class SynthInfo:
    """What was written, for callers and tests."""

    run_dir: Path
    committed: int  # simulated transactions committed (injected ones included)
    failed: int  # simulated transactions failed (injected aborted ones included)
    versions: int  # table versions, 0..versions-1
    data_files: int  # data files written
    rows_written: int
    checkpoints: int
    injection: Injection | None
    # sim transaction id -> its table version, and the sim version -> table version map
    version_of: dict[str, int] = field(default_factory=dict)
    table_version: dict[int, int] = field(default_factory=dict)
    history: TxnHistory | None = None  # the simulated history the run encodes (INITIAL not yet renamed)
    stats: SimStats | None = None


# ---------------------------------------------------------------------------
# The run


def write_run(
    run_dir: str | os.PathLike,
    n_txns: int = 1000,
    *,
    concurrency: int = 8,
    n_keys: int | None = None,
    isolation: str = WRITE_SERIALIZABLE,
    seed: int = 1,
    inject: str | None = None,
    rows_per_file: int = 4,
    checkpoint_interval: int = 100,
    commits: int | None = None,
    keep_history: bool = False,
) -> SynthInfo:
    """Simulate `n_txns` transactions (committed + failed) and write the run
    folder `run_dir` (created; must not exist or be empty). `inject` splices
    one anomaly of that kind (see harness.bench.inject.INJECTABLE) into the
    history. `checkpoint_interval` 0 writes no checkpoints. With `commits`,
    the run stops once the log holds that many commits (versions 0 ..
    commits-1, the two setup commits included; an isolation change adds one
    more each): transactions still in flight then are left out of the
    history, and `n_txns` only sets the key space."""
    if isolation not in LEVELS:
        raise ValueError(f"unknown isolation level {isolation!r}; one of {LEVELS}")
    if rows_per_file < 1:
        raise ValueError("rows_per_file must be >= 1")
    run_dir = Path(run_dir)
    table_dir = run_dir / "table"
    log_dir = table_dir / "_delta_log"
    log_dir.mkdir(parents=True, exist_ok=True)
    if any(log_dir.iterdir()):
        raise ValueError(f"{log_dir} is not empty")

    # -- simulate ----------------------------------------------------------------
    cfg = _sim_config(n_txns, concurrency, n_keys, isolation, seed)
    if commits is not None:
        if commits < 2:
            raise ValueError("commits must be >= 2 (the table's creation and the initial rows)")
        cfg = replace(cfg, n_txns=10 * commits + 1000)  # never reached: stops at the commit count
    sim = _RecordingSim(
        cfg.n_keys,
        isolation=cfg.isolation,
        ws_append_caveat=cfg.ws_append_caveat,
        rng=random.Random(cfg.seed),
        id_prefix=cfg.id_prefix,
        initial_fill=cfg.initial_fill,
    )
    import gc

    gc_was = gc.isenabled()
    gc.disable()  # see harness.bench.simulate.run
    try:
        if commits is None:
            txns = list(iter_simulation(cfg, sim))
        else:
            txns = []
            if commits > 2:
                for t in iter_simulation(cfg, sim):
                    txns.append(t)
                    if len(txns) == commits - 2:
                        break
    finally:
        if gc_was:
            gc.enable()
    h = TxnHistory(txns, failed=set(sim.failed))
    injection: Injection | None = None
    if inject:
        h, injection = inject_anomaly(h, inject, random.Random(seed * 7919 + 17))
    rng = random.Random(seed ^ 0x5EED)

    def wname(w: str | None) -> str | None:
        return LOADER if w == INITIAL else w

    # -- timing: scheduler ticks, fractional ones for injected transactions -------
    injected = set(injection.ids) if injection else set()
    end_tick: dict[str, float] = {}
    start_tick: dict[str, float] = {}
    last = float(sim.tick)
    nxt = last + 1.0
    pending_inj: list[Txn] = []
    for t in reversed(h.txns):  # an injected txn commits just before the next simulated one
        if t.id in injected:
            pending_inj.append(t)
            continue
        nxt_here = sim.ended[t.id]
        if pending_inj:
            _place(pending_inj, nxt, start_tick, end_tick)
            pending_inj = []
        nxt = float(nxt_here)
        start_tick[t.id] = float(sim.began[t.id][1])
        end_tick[t.id] = nxt
    if pending_inj:
        _place(pending_inj, nxt, start_tick, end_tick)
    aborted = [a for a in (injection.failed if injection else [])]

    # -- the table ---------------------------------------------------------------
    level0 = h.txns[0].isolation if h.txns else isolation
    meta = metadata(TABLE_ID, level0, int(WALL0 * 1000))
    n_versions = 0
    file_seq = 0
    n_files = 0
    live: dict[str, dict] = {}  # path -> add action (for checkpoints and removes)
    files: dict[str, list[tuple[int, str, str | None]]] = {}  # path -> rows
    where: dict[tuple[int, str], str] = {}  # live row version (k, writer) -> path
    last_ckpt: tuple[int, int] | None = None  # (version, actions)
    n_ckpts = 0
    rows_written = 0
    events: list[tuple[float, int, dict]] = []  # (time tick, order, event)
    version_of: dict[str, int] = {}

    def ts(tick: float) -> int:
        return int(WALL0 * 1000 + tick)

    def new_path() -> str:
        nonlocal file_seq
        file_seq += 1
        u = f"{rng.getrandbits(128):032x}"
        return f"part-{file_seq % 100000:05d}-{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}-c000.snappy.parquet"

    def add_files(rows: list[tuple[int, str, str | None]], tick: float, out: list[dict]) -> None:
        nonlocal rows_written, n_files
        for i in range(0, len(rows), rows_per_file):
            chunk = rows[i : i + rows_per_file]
            path = new_path()
            ks = [r[0] for r in chunk]
            stats = json.dumps(
                {
                    "numRecords": len(chunk),
                    "minValues": {"k": min(ks)},
                    "maxValues": {"k": max(ks)},
                    "nullCount": {"k": 0, "writer": 0, "prev_writer": sum(1 for r in chunk if r[2] is None)},
                },
                separators=(",", ":"),
            )
            data = _parquet_bytes(chunk)
            (table_dir / path).write_bytes(data)
            n_files += 1
            add = {
                "path": path,
                "partitionValues": {},
                "size": len(data),
                "modificationTime": ts(tick),
                "dataChange": True,
                "stats": stats,
            }
            out.append({"add": add})
            live[path] = add
            files[path] = chunk
            for k, w, _ in chunk:
                where[(k, w)] = path
            rows_written += len(chunk)

    def remove_file(path: str, tick: float, out: list[dict]) -> list[tuple[int, str, str | None]]:
        add = live.pop(path)
        rows = files.pop(path)
        for k, w, _ in rows:
            del where[(k, w)]
        out.append(
            {
                "remove": {
                    "path": path,
                    "deletionTimestamp": ts(tick),
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": {},
                    "size": add["size"],
                }
            }
        )
        return rows

    def commit(actions: list[dict]) -> int:
        nonlocal n_versions, last_ckpt, n_ckpts
        v = n_versions
        n_versions += 1
        (log_dir / f"{v:020d}.json").write_bytes(_jsonl(actions))
        if checkpoint_interval and v > 0 and v % checkpoint_interval == 0:
            pq.write_table(_checkpoint_table(live, meta, PROTOCOL), log_dir / f"{v:020d}.checkpoint.parquet")
            last_ckpt = (v, len(live) + 2)
            n_ckpts += 1
        return v

    def event(tick: float, order: int, **e: Any) -> None:
        events.append((tick, order, e))

    # version 0: create
    event(
        -3.0,
        0,
        process="setup",
        type="invoke",
        f="create-table",
        id=CREATE,
        value={
            "default_isolation": isolation,
            "isolation": level0,
            "schema": "k BIGINT, writer STRING, prev_writer STRING",
        },
    )
    commit(
        [
            {
                "commitInfo": {
                    "timestamp": ts(-3),
                    "operation": "CREATE TABLE",
                    "operationParameters": {
                        "mode": "ErrorIfExists",
                        "location": "table",
                        "protocol": json.dumps(PROTOCOL),
                        "metadata": json.dumps(meta),
                    },
                    "clientVersion": "delta-jepsen-synth",
                    "dj.op": CREATE,
                }
            },
            {"protocol": dict(PROTOCOL)},
            {"metaData": json.loads(json.dumps(meta))},
        ]
    )
    event(-2.9, 0, process="setup", type="ok", f="create-table", id=CREATE, value=None, version=0)

    # version 1: the initial rows (the simulator's INITIAL), as one setup insert
    initial = set(sim.initial_keys)
    for t in h.txns:
        initial.update(r.key for r in t.reads if r.writer == INITIAL)
        initial.update(w.key for w in t.writes if w.prev == INITIAL)
        initial.update(r.key for r in t.deletes if r.writer == INITIAL)
    event(-2.0, 0, process="setup", type="invoke", f="write", id=LOADER, value={"rows": len(initial)})
    acts: list[dict] = [
        {
            "commitInfo": {
                "timestamp": ts(-2),
                "operation": "WRITE",
                "operationParameters": {"mode": "Append"},
                "readVersion": 0,
                "isolationLevel": level0,
                "isBlindAppend": True,
                "clientVersion": "delta-jepsen-synth",
                "dj.op": LOADER,
            }
        }
    ]
    add_files([(k, LOADER, None) for k in sorted(initial)], -2.0, acts)
    load_version = commit(acts)
    event(-1.9, 0, process="setup", type="ok", f="write", id=LOADER, value=None, version=load_version)

    table_version: dict[int, int] = {0: load_version}  # sim version -> table version
    level = level0
    alters = 0
    for t in h.txns:
        tick = end_tick[t.id]
        if t.isolation != level:
            alters += 1
            aid = f"setup.alter.{alters}"
            level = t.isolation
            meta["configuration"] = dict(meta["configuration"], **{"delta.isolationLevel": level})
            prev_v = n_versions - 1
            event(
                tick - 0.02,
                0,
                process="setup",
                type="invoke",
                f="set-tblproperties",
                id=aid,
                value={"properties": {"delta.isolationLevel": level}},
            )
            v = commit(
                [
                    {
                        "commitInfo": {
                            "timestamp": ts(tick - 0.02),
                            "operation": "SET TBLPROPERTIES",
                            "operationParameters": {"properties": json.dumps({"delta.isolationLevel": level})},
                            "readVersion": prev_v,
                            "clientVersion": "delta-jepsen-synth",
                            "dj.op": aid,
                        }
                    },
                    {"metaData": json.loads(json.dumps(meta))},
                ]
            )
            event(tick - 0.015, 0, process="setup", type="ok", f="set-tblproperties", id=aid, value=None, version=v)
        touched = {(w.key, wname(w.prev)) for w in t.writes if w.prev is not None}
        touched.update((r.key, wname(r.writer)) for r in t.deletes)
        victims = sorted({where[r] for r in touched if r in where})
        blind = not t.reads and not t.predicates and not touched
        info = {"timestamp": ts(tick), "operation": t.operation or "WRITE", "operationParameters": _op_params(t)}
        if t.read_version is not None:
            info["readVersion"] = table_version[t.read_version]
        info.update(
            {
                "isolationLevel": t.isolation,
                "isBlindAppend": blind,
                "clientVersion": "delta-jepsen-synth",
                "dj.op": t.id,
            }
        )
        acts = [{"commitInfo": info}]
        carried: list[tuple[int, str, str | None]] = []
        for path in victims:
            carried += [r for r in remove_file(path, tick, acts) if (r[0], r[1]) not in touched]
        new = [(w.key, t.id, wname(w.prev)) for w in t.writes]
        if carried or new:
            add_files(carried + new, tick, acts)
        v = commit(acts)
        table_version[t.version] = v
        version_of[t.id] = v

    if last_ckpt is not None:
        (log_dir / "_last_checkpoint").write_text(json.dumps({"version": last_ckpt[0], "size": last_ckpt[1]}) + "\n")

    # -- the history ----------------------------------------------------------------
    procs = _assign_processes(h, sim, start_tick, end_tick, aborted, injection)
    for t in h.txns:
        f = (t.operation or "write").lower()
        inv: dict[str, Any] = {}
        if t.predicates:
            p = t.predicates[0]
            inv["predicate"] = [p.lo, p.hi]
        event(start_tick[t.id], 1, process=procs[t.id], type="invoke", f=f, id=t.id, value=inv)
        ok: dict[str, Any] = {"reads": [[r.key, wname(r.writer)] for r in t.reads]}
        if t.read_version is not None:
            ok["read_version"] = table_version[t.read_version]
        event(end_tick[t.id], 0, process=procs[t.id], type="ok", f=f, id=t.id, value=ok, version=version_of[t.id])
    for tid in sim.failed:
        op, tick, preds = sim.began[tid]
        f = OPERATION[op].lower()
        inv = {"predicate": [preds[0].lo, preds[0].hi]} if preds else {}
        event(float(tick), 1, process=procs[tid], type="invoke", f=f, id=tid, value=inv)
        event(
            float(sim.ended[tid]),
            0,
            process=procs[tid],
            type="fail",
            f=f,
            id=tid,
            value=None,
            error=_err(sim.reasons.get(tid)),
        )
    for tid in aborted:
        s = start_tick[tid]
        event(s, 1, process=procs[tid], type="invoke", f="merge", id=tid, value={})
        event(end_tick[tid], 0, process=procs[tid], type="fail", f="merge", id=tid, value=None, error=_err(E2))
    events.sort(key=lambda e: (e[0], e[1]))
    with open(run_dir / "history.jsonl", "w", encoding="utf-8") as fh:
        for i, (tick, _, e) in enumerate(events):
            t_ns = int((tick + 4) * TICK_NS)
            doc = {
                "index": i,
                "time": t_ns,
                "process": e["process"],
                "type": e["type"],
                "f": e["f"],
                "id": e["id"],
                "value": e.get("value"),
                "version": e.get("version"),
                "error": e.get("error"),
                "node": "sim",
                "wall": round(WALL0 + t_ns / 1e9, 6),
            }
            fh.write(json.dumps(doc, separators=(",", ":")) + "\n")

    # -- spec.json, run.json ---------------------------------------------------------

    repro = shlex.join(
        [
            "python",
            "-m",
            "harness.bench.synth_run",
            str(run_dir),
            "--txns",
            str(n_txns),
            *(["--commits", str(commits)] if commits is not None else []),
            "--concurrency",
            str(concurrency),
            *(["--keys", str(n_keys)] if n_keys else []),
            "--isolation",
            isolation,
            "--seed",
            str(seed),
            *(["--inject", inject] if inject else []),
            "--rows-per-file",
            str(rows_per_file),
            "--checkpoint-interval",
            str(checkpoint_interval),
        ]
    )
    spec = {
        "spec": {
            "workload": "simulated",
            "engine": "simulator",
            "storage": "local",
            "nodes": 1,
            "concurrency": concurrency,
            "seed": seed,
            "isolation": isolation,
            "n_txns": n_txns,
            "commits": commits,
            "n_keys": cfg.n_keys,
            "inject": inject,
            "rows_per_file": rows_per_file,
            "checkpoint_interval": checkpoint_interval,
        },
        "repro": repro,
        "storage": {"kind": "local"},
        "table_uri": str(table_dir),
        "table": {
            "schema": "k BIGINT, writer STRING, prev_writer STRING",
            "properties": {"delta.isolationLevel": level0},
        },
        "checkers": ["log-sanity", "serializability"],
        "engine": {"name": "simulator"},
        "versions": package_versions({"simulator": "harness.bench.simulate"}),
    }
    (run_dir / "spec.json").write_text(json.dumps(spec, indent=2) + "\n")
    n_failed = len(sim.failed) + len(aborted)
    st = sim.stats
    run = {
        "elapsed": round((sim.tick + 4) * TICK_NS / 1e9, 3),
        "interrupted": False,
        "counts": {"ok": len(h.txns) + 2 + alters, "fail": n_failed, "info": 0},
        "fatal": None,
        "synthetic": {
            "attempted": len(h.txns) + n_failed,
            "committed": len(h.txns),
            "failed": n_failed,
            "versions": n_versions,
            "alter_commits": alters,
            "data_files": n_files,
            "rows_written": rows_written,
            "checkpoints": n_ckpts,
            "conflicts": dict(st.conflicts),
            "fallbacks": st.fallbacks,
            "injected": {
                "kind": injection.kind,
                "ids": injection.ids,
                "failed": injection.failed,
                "expected": list(injection.expected) if injection.expected else None,
            }
            if injection
            else None,
        },
    }
    (run_dir / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return SynthInfo(
        run_dir,
        len(h.txns),
        n_failed,
        n_versions,
        n_files,
        rows_written,
        n_ckpts,
        injection,
        version_of,
        table_version,
        h if keep_history else None,
        st,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.bench.synth_run", description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir")
    p.add_argument("--txns", type=int, default=1000, help="transactions attempted (default 1000)")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument(
        "--commits",
        type=int,
        default=None,
        help="stop once the log holds this many commits (--txns then only sets the key space)",
    )
    p.add_argument("--keys", type=int, default=None, help="key space (default max(64, txns // 10))")
    p.add_argument("--isolation", default=WRITE_SERIALIZABLE, choices=LEVELS)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--inject", default=None, help="splice one anomaly of this kind into the history")
    p.add_argument("--rows-per-file", type=int, default=4)
    p.add_argument("--checkpoint-interval", type=int, default=100, help="0: no checkpoints")
    a = p.parse_args(argv)
    t0 = time.perf_counter()
    info = write_run(
        a.run_dir,
        a.txns,
        concurrency=a.concurrency,
        n_keys=a.keys,
        isolation=a.isolation,
        seed=a.seed,
        inject=a.inject,
        rows_per_file=a.rows_per_file,
        checkpoint_interval=a.checkpoint_interval,
        commits=a.commits,
    )
    print(
        f"{info.run_dir}: {info.committed} committed, {info.failed} failed, {info.versions} versions, "
        f"{info.data_files} data files, {info.checkpoints} checkpoints in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
