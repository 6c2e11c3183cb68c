"""`delta-jepsen matrix`: one timed run per (workload, engine, isolation level),
summarised as the README's workload matrix.

Each cell is an ordinary `delta-jepsen run` in its own process (its own
storage server, engine nodes and run folder, so a cell that hangs or crashes
cannot take the others with it); the matrix reads back each cell's
results.json. Output: matrix.md (the table), matrix.json and matrix.html
next to the cell runs, the table on stdout, and with --junit-xml one JUnit
testcase per cell.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.check import junit
from harness.core.errors import HarnessError
from harness.core.history import ErrorClass
from harness.core.procs import ManagedProcess, install_signal_handlers, python_argv
from harness.matrices.progress import CellProgress
from harness.matrices.workload_html import render_html
from harness.run.plan import RunSpec, TestPlan

# A cell's run has its own op timeouts; this bounds setup, teardown and the
# check on top of the time limit.
CELL_SLACK_S = 420.0


@dataclass
class Cell:
    workload: str
    engine: str
    isolation: str
    supported: str = "?"  # yes / partial (...) / no
    verdict: str = "?"
    ops_per_s: float | None = None
    conflict_rate: float | None = None
    error_classes: dict[str, int] = field(default_factory=dict)
    anomalies: list[str] = field(default_factory=list)
    run_dir: str | None = None
    repro: str | None = None
    note: str = ""
    ops: int | None = None
    ok: int | None = None
    fail: int | None = None
    info: int | None = None
    seconds: float | None = None  # the cell's wall clock: setup, run, check and teardown
    nemesis: str = ""  # faults during the cell's run (comma-separated), none when empty

    @property
    def column(self) -> str:
        """The engine, and the faults it ran under."""
        return f"{self.engine} under {self.nemesis}" if self.nemesis else self.engine

    @property
    def name(self) -> str:
        return f"{self.workload} {self.column} {self.isolation}"


def _supported(h: dict[str, Any]) -> str:
    by_f = h.get("by_f", {})
    unsupported = {f: c.get("unsupported", 0) for f, c in h.get("error_classes_by_f", {}).items()}
    none = sorted(f for f, n in unsupported.items() if n and n == by_f.get(f))
    some = sorted(f for f, n in unsupported.items() if n and n != by_f.get(f))
    tested = [f for f in by_f if f not in none]
    if none and not [f for f in tested if f != "read"]:
        return "no (" + ", ".join(none) + " unsupported)"
    if none or some:
        return "partial (" + ", ".join(none + some) + " unsupported)"
    return "yes"


def _cell_from_results(cell: Cell, run_dir: Path) -> None:
    doc = json.loads((run_dir / "results.json").read_text())
    h = doc["history"]
    cell.run_dir = str(run_dir)
    cell.repro = doc.get("repro")
    cell.verdict = doc["verdict"].upper()
    cell.ops_per_s = h.get("ops_per_s")
    cell.ops, cell.ok, cell.fail, cell.info = h.get("ops"), h.get("ok"), h.get("fail"), h.get("info")
    cell.conflict_rate = h.get("conflict_rate")
    cell.error_classes = h.get("error_classes", {})
    cell.supported = _supported(h)
    cell.anomalies = sorted(
        {
            f"{a['kind']}" + (f" ({a['claim']})" if a.get("claim") else "")
            for c in doc["checkers"]
            for a in c.get("anomalies", [])
        }
    )
    unknown = [c["checker"] for c in doc["checkers"] if c["verdict"] == "unknown"]
    refused = (doc.get("run") or {}).get("refused")
    if refused:
        cell.supported = "no (table refused)"
        cell.note = "refused: " + refused.splitlines()[0][:200]
    elif unknown:
        cell.note = "unknown: " + ", ".join(unknown)


class _Cells:
    """The cell runs in flight: on Ctrl-C or SIGTERM each gets SIGINT (a run
    then stops its workers, nodes and storage itself), then SIGKILL."""

    def __init__(self) -> None:
        self.live: set[ManagedProcess] = set()
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    def interrupt(self, grace: float = 60.0) -> None:
        self.stopping.set()
        with self.lock:
            procs = list(self.live)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError, TypeError):
                pass
        for p in procs:
            try:
                if p.proc is not None:
                    p.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
            p.kill()


def run_cell(
    cell: Cell, root: Path, time_limit: float, concurrency: int, storage: str, seed: int, cells: _Cells | None = None
) -> Cell:
    """One cell as its own `delta-jepsen run`; a cell with faults has a
    fault cycle (quiet half, fault half) every third of its time limit."""
    cells = cells or _Cells()
    if cells.stopping.is_set():
        cell.verdict, cell.note = "SKIPPED", "interrupted"
        return cell
    spec = RunSpec(
        workload=cell.workload,
        engine=cell.engine,
        isolation=cell.isolation,
        storage=storage,
        concurrency=concurrency,
        time_limit=time_limit,
        seed=seed,
        nemesis=[n for n in cell.nemesis.split(",") if n],
        nemesis_interval=max(2.0, time_limit / 3),
    )
    # The cell's plan is built and checked here, then run as its own
    # `delta-jepsen run` (a crash or hang stays in its cell).
    TestPlan.build(spec)
    argv = python_argv("harness.cli", "run", *spec.cli_args(), "--results-dir", str(root / "cells"), "--no-progress")
    faults = f"-{cell.nemesis.replace(',', '+')}" if cell.nemesis else ""
    log = root / "logs" / f"{cell.workload}-{cell.engine}{faults}-{cell.isolation}.log"
    t0 = time.monotonic()
    proc = ManagedProcess(f"cell {cell.name}", argv, log).start()
    with cells.lock:
        cells.live.add(proc)
    if cells.stopping.is_set():  # interrupted while this cell was starting
        os.killpg(proc.pid, signal.SIGINT)
    try:
        assert proc.proc is not None
        proc.proc.wait(time_limit + CELL_SLACK_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        cell.verdict, cell.note = "HUNG", f"no result within {time_limit + CELL_SLACK_S:.0f} s"
        return cell
    finally:
        cell.seconds = round(time.monotonic() - t0, 3)
        with cells.lock:
            cells.live.discard(proc)
    code = proc.proc.returncode
    proc.kill()  # reaps, closes the log
    text = log.read_text(errors="replace")
    m = re.search(r"^run: (\S+)", text, re.M)
    if m and (Path(m.group(1)) / "results.json").is_file():
        _cell_from_results(cell, Path(m.group(1)))
    else:
        last = (text.strip().splitlines() or ["no output"])[-1]
        cell.verdict, cell.note = "ERROR", f"exit {code}: {last[:200]}"
    return cell


def _classes(c: Cell) -> str:
    if not c.error_classes:
        return "none"
    parts = []
    for k, v in sorted(c.error_classes.items(), key=lambda kv: -kv[1]):
        try:
            claim = ErrorClass(k).claim
        except ValueError:
            claim = None
        parts.append(f"{k}{' (' + claim + ')' if claim else ''} x{v}")
    return ", ".join(parts)


def render(cells: list[Cell], time_limit: float, concurrency: int, storage: str) -> str:
    lines = [
        f"Each cell: `delta-jepsen run` for {time_limit:g} s at concurrency {concurrency}, storage {storage}.",
        "",
        "| workload | engine | isolation | supported | verdict | ops/s | conflict rate | error classes seen "
        "| anomalies |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        rate = f"{100 * c.conflict_rate:.1f}%" if c.conflict_rate is not None else "n/a"
        ops = f"{c.ops_per_s:.1f}" if c.ops_per_s is not None else "n/a"
        verdict = c.verdict + (f" ({c.note})" if c.note else "")
        lines.append(
            f"| {c.workload} | {c.column} | {c.isolation} | {c.supported} | {verdict} | {ops} | {rate} | "
            f"{_classes(c)} | {', '.join(c.anomalies) or '-'} |"
        )
    return "\n".join(lines) + "\n"


def junit_suite(cells: list[Cell], seconds: float) -> junit.Suite:
    """One testcase per cell: INVALID a failure carrying its anomaly kinds,
    UNKNOWN (or a cell never run) skipped with the reason, a cell with no
    result (ERROR, HUNG) an error."""
    suite = junit.Suite("delta-jepsen.matrix", time=seconds)
    for c in cells:
        faults = f".{c.nemesis}" if c.nemesis else ""
        case = junit.Case(c.isolation, f"delta-jepsen.matrix.{c.workload}.{c.engine}{faults}", time=c.seconds or 0.0)
        evidence = "\n".join(
            filter(
                None,
                [
                    f"verdict: {c.verdict}" + (f" ({c.note})" if c.note else ""),
                    f"supported: {c.supported}",
                    f"ops: {c.ops} ({c.ok} ok, {c.fail} fail, {c.info} info), {c.ops_per_s} ops/s"
                    if c.ops is not None
                    else "",
                    f"anomalies: {', '.join(c.anomalies)}" if c.anomalies else "",
                    f"run folder: {c.run_dir}" if c.run_dir else "",
                    f"re-run: {c.repro}" if c.repro else "",
                ],
            )
        )
        if c.verdict == "INVALID":
            kinds = sorted({a.split(" (")[0] for a in c.anomalies})
            case.outcome, case.type = junit.FAILURE, ",".join(kinds) or "invalid"
            case.message = f"anomalies: {', '.join(c.anomalies)}" if c.anomalies else c.note or "invalid"
            case.text = evidence
        elif c.verdict in ("ERROR", "HUNG"):
            case.outcome, case.type, case.message, case.text = junit.ERROR, c.verdict.lower(), c.note, evidence
        elif c.verdict != "VALID":
            case.outcome, case.message, case.text = junit.SKIPPED, f"{c.verdict}: {c.note}".strip(": "), evidence
        else:
            case.system_out = evidence
        suite.cases.append(case)
    return suite


def write_pages(
    cells: list[Cell], root: Path, time_limit: float, concurrency: int, storage: str, seconds: float
) -> str:
    """matrix.md, matrix.json and matrix.html; returns the markdown table."""
    table = render(cells, time_limit, concurrency, storage)
    setup = f"each cell: delta-jepsen run for {time_limit:g} s at concurrency {concurrency}, storage {storage}"
    (root / "matrix.md").write_text(table)
    (root / "matrix.json").write_text(json.dumps([asdict(c) for c in cells], indent=2) + "\n")
    (root / "matrix.html").write_text(render_html([asdict(c) for c in cells], root, setup, seconds))
    return table


def run_matrix(
    workloads: list[str],
    engines: list[str],
    levels: list[str],
    time_limit: float,
    concurrency: int,
    storage: str,
    jobs: int,
    root: Path,
    seed: int,
    show_progress: bool = True,
    rec: junit.Recorder | None = None,
    nemeses: tuple[str, ...] = ("",),
) -> int:
    """`nemeses`: each cell once per entry (comma-separated faults, "" for none)."""
    cells = [Cell(w, e, lvl, nemesis=n) for w in workloads for e in engines for n in nemeses for lvl in levels]
    root.mkdir(parents=True, exist_ok=True)
    print(f"matrix: {len(cells)} cells, {jobs} at a time, into {root}", file=sys.stderr)
    t0 = time.monotonic()
    running = _Cells()
    bar = CellProgress(len(cells), enabled=show_progress)
    install_signal_handlers()

    def one(cell: Cell) -> Cell:
        bar.started(cell.name)
        run_cell(cell, root, time_limit, concurrency, storage, seed, running)
        bar.finished(cell.name, f"{cell.verdict} {cell.supported}")
        return cell

    pool = ThreadPoolExecutor(jobs)
    try:
        list(pool.map(one, cells))
    except KeyboardInterrupt:
        running.interrupt()
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
        # What did finish is kept, as a run keeps its partial history.
        for c in cells:
            if c.verdict == "?":
                c.verdict, c.note = "SKIPPED", "interrupted"
        write_pages(cells, root, time_limit, concurrency, storage, time.monotonic() - t0)
        if rec is not None:
            rec.suites.append(junit_suite(cells, time.monotonic() - t0))
        raise
    pool.shutdown()
    bar.close()
    table = write_pages(cells, root, time_limit, concurrency, storage, time.monotonic() - t0)
    if rec is not None:
        rec.suites.append(junit_suite(cells, time.monotonic() - t0))
    print(table, end="")
    bad = [c for c in cells if c.verdict in ("ERROR", "HUNG")]
    if bad:
        raise HarnessError(
            f"{len(bad)} cell(s) did not produce a result, e.g. {bad[0].workload} {bad[0].engine}: {bad[0].note}"
        )
    return 1 if any(c.verdict == "INVALID" for c in cells) else 0
