"""`delta-jepsen conformance`: run the matrix on one engine and write
conformance.md, conformance.json and conformance.html (and, with
--junit-xml, one JUnit testcase per cell).

Cells run in a worker process (harness.matrices.conformance.cell_worker), one at a time,
each bounded by a timeout: a hung cell is recorded as an error and the
worker replaced. After each cell the controller checks the committed table
against the model's allowed serial orders and runs the serializability
checker on the two-transaction history, so a committed cell that breaks
serializability is a safety deviation even where the matrix allows a commit.
"""

from __future__ import annotations

import json
import queue
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from checkers import serializability
from checkers.base import Verdict
from harness.check import junit
from harness.core.errors import HarnessError
from harness.core.history import FAIL, INFO, INVOKE, OK, ErrorClass, Event, History, OpError
from harness.core.isolation import LEVELS as ISOLATION_LEVELS
from harness.core.lineworker import LineWorker, WorkerLost, WorkerNotReady
from harness.core.procs import foreign_python, python_argv
from harness.deltalog import read_log
from harness.engines import make_engine
from harness.engines.envs import ensure
from harness.engines.jars import print_progress
from harness.engines.releases import env_request, parse_engine_release
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.html import render_html
from harness.matrices.conformance.rows import COLUMNS, SETUP, plans, serial_outcomes
from harness.matrices.conformance.verdict import (
    AVAILABILITY,
    COMMIT_READ_VERSION,
    COMMITTED,
    ERROR,
    EXCEPTION_CLASS,
    NOOP,
    PASSES,
    RETRIED,
    SAFETY,
    UNCONTROLLED,
    UNJUDGED,
    V_ERROR,
    V_UNSUPPORTED,
    VERDICTS,
    Observation,
    TxnResult,
    allowed_classes,
    judge,
)
from harness.matrices.progress import CellProgress

CELL_TIMEOUT_S = 90.0
# Starting a backend (moto, the proxy, two JVMs and their warm-up) is not
# part of any cell's time.
WORKER_START_TIMEOUT_S = 600.0
# A worker's backend stops its nodes at the end (delta-spark JVMs get 10 s
# each, one after the other).
FINISH_TIMEOUT_S = 60.0
ENGINES = ("delta-spark", "delta-rs", "sail")  # engines with a conformance backend


@dataclass
class CellResult:
    cell: C.Cell
    expectation: C.Expectation
    obs: Observation
    verdict: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            **self.cell.to_json(),
            "operations": _ops(self.cell),
            "order": f"{self.cell.winner} first",
            "claim": self.expectation.claim,
            "rule": self.expectation.rule,
            "expected": self.expectation.outcome.value,
            "spec_ambiguous": self.expectation.ambiguous or None,
            "allowed_classes": sorted(allowed_classes(judged_cell(self.cell, self.obs), self.expectation, self.obs)),
            "judged_level": judged_cell(self.cell, self.obs).level,
            "observed": self.obs.observed(),
            "verdict": self.verdict,
            "why": self.why,
            "observation": self.obs.to_json(),
        }


# -- post-cell checks ------------------------------------------------------------


def _rows_text(rows: Counter) -> str:
    items = sorted(rows.elements(), key=repr)
    return ", ".join(f"(id {r[0]}, p {r[2]}, v {r[3]}, writer {r[4]})" for r in items[:4]) + (
        f" and {len(items) - 4} more" if len(items) > 4 else ""
    )


def check_data(cell: C.Cell, obs: Observation, log: Any) -> str | None:
    """None if the table holds what an allowed serial order of the committed
    ops gives, else why not (spec C14 / C15 when both committed; C8 when
    the loser failed: a conflict never corrupts the table)."""
    rows = log.rows_at(log.latest_version, columns=list(COLUMNS))
    got = Counter(zip(*(rows.column(c).to_pylist() for c in COLUMNS), strict=True))
    wp, lp = plans(cell)
    both = obs.loser.status == COMMITTED
    outcomes = serial_outcomes(wp, lp, both, cell.level)
    if obs.loser_retried:
        # The retry read the winner's commit: it comes after it in any order.
        outcomes = {"history order": outcomes["history order"]}
    if got in outcomes.values():
        return None
    name, want = next(iter(outcomes.items()))
    claim = ("C14" if cell.level == C.SERIALIZABLE else "C15") if both else "C8"
    extra, missing = got - want, want - got
    return (
        f"{claim}: the table ({sum(got.values())} rows) is not what {' or '.join(outcomes)} gives; vs the "
        f"{name}: extra {_rows_text(extra) or 'none'}; missing {_rows_text(missing) or 'none'}"
    )


def two_txn_history(cell: C.Cell, obs: Observation, default_isolation: str) -> History:
    """The cell as a history: setup ops, then both ops invoked before either
    completes (they read the same version), winner completing first."""
    wp, lp = plans(cell)
    events: list[Event] = []

    def add(
        process: int | str,
        type_: str,
        f: str,
        op_id: str,
        value: Any = None,
        version: int | None = None,
        error: OpError | None = None,
    ) -> None:
        events.append(Event(len(events), len(events) * 1000, process, type_, f, op_id, value, version, error, "n1"))

    facts = {"row_key": "id", "predicate_column": "p", "default_isolation": default_isolation}
    add("setup", INVOKE, "create-table", "setup.0", facts)
    add("setup", OK, "create-table", "setup.0", facts, 0)
    for n, (op_id, _) in enumerate(SETUP, start=1):
        add("setup", INVOKE, "append", op_id)
        add("setup", OK, "append", op_id, None, n)
    add(1, INVOKE, wp.kind, wp.op_id, wp.history_value())
    if not obs.loser_retried:
        add(2, INVOKE, lp.kind, lp.op_id, lp.history_value())
    for process, plan, res in ((1, wp, obs.winner), (2, lp, obs.loser)):
        if process == 2 and obs.loser_retried:
            # The transaction that committed began after the winner's commit.
            add(2, INVOKE, lp.kind, lp.op_id, lp.history_value())
        if res.status in (COMMITTED, NOOP):
            add(process, OK, plan.kind, plan.op_id, None, res.version)
        else:
            cls = ErrorClass(res.cls) if res.cls in {e.value for e in ErrorClass} else ErrorClass.NOT_A_CONFLICT
            add(
                process, FAIL if res.status != ERROR else INFO, plan.kind, plan.op_id, None, None, OpError(cls, res.raw)
            )
    return History(events)


def carried_level(log: Any, default_isolation: str) -> tuple[str, str]:
    """The level a cell's table carried at v0 and where that is written
    (spec C13): its delta.isolationLevel, else what the cell's commits
    recorded in commitInfo.isolationLevel, else the engine's default."""
    v0 = len(SETUP)
    level = log.configuration_at(v0).get("delta.isolationLevel") if v0 in log.commits else None
    if level:
        return level, f"delta.isolationLevel at version {v0}"
    for v in (v0 + 2, v0 + 1):
        info = log.commits[v].commit_info if v in log.commits else None
        if info and info.get("isolationLevel"):
            return str(info["isolationLevel"]), f"commitInfo.isolationLevel of version {v}"
    return default_isolation, "the engine's default (the table carries no level)"


def resolve_loser(obs: Observation, log: Any) -> None:
    """A loser that ended in an error that is no conflict (a timeout, a
    dropped connection) may still have committed: the log decides. Only the
    loser can have written v0+2 (the winner is v0+1), so its presence means
    the loser committed, and the cell is judged as such."""
    lo, v = obs.loser, len(SETUP) + 2
    if lo.status != ERROR or log.latest_version is None or log.latest_version < v:
        return
    obs.loser = replace(
        lo, status=COMMITTED, raw=f"reported {lo.cls}, but its commit is in the log at version {v}: {lo.raw}", version=v
    )


def observe_read_versions(obs: Observation, log: Any) -> None:
    """Each op's read version is what its commit says (commitInfo.readVersion),
    for every engine alike; the snapshot the schedule put it on stands only
    where the op has no commit or its commit records none (Sail). A commit
    that read an older snapshot than the schedule gave it means the control
    did not take effect. A loser whose commit read the winner's commit was
    retried by its engine as a new transaction: the evidence is kept."""
    scheduled_by = {}
    for side, t in (("winner", obs.winner), ("loser", obs.loser)):
        scheduled, scheduled_by[side] = t.scheduled_read_version, t.read_version_source
        t.read_version = scheduled
        commit = log.commits[t.version] if t.status == COMMITTED and t.version in log.commits else None
        if commit is None or commit.read_version is None:
            if commit is not None and scheduled is not None:
                t.read_version_source = f"{scheduled_by[side]}; its commit records no readVersion"
            continue
        t.read_version = commit.read_version
        t.read_version_source = f"{COMMIT_READ_VERSION} of version {t.version}"
        if scheduled is not None and (t.read_version < scheduled or (side == "winner" and t.read_version != scheduled)):
            obs.controlled = False
            obs.control_note = "; ".join(
                filter(
                    None,
                    [
                        obs.control_note,
                        f"the {side}'s commit, version {t.version}, records readVersion {t.read_version}, "
                        f"not the version {scheduled} the schedule put it on",
                    ],
                )
            )
    if obs.loser_retried:
        later = [v for v in log.versions if obs.loser.version is not None and v > obs.loser.version]
        obs.retry = retry_evidence(obs, log, scheduled_by["loser"], later)
        if later:
            obs.controlled = False
            obs.control_note = "; ".join(
                filter(None, [obs.control_note, f"versions {later} follow the loser's commit: not two transactions"])
            )


def retry_evidence(obs: Observation, log: Any, scheduled_by: str, later: list[int]) -> list[str]:
    """Why the loser's commit is a retry: the snapshot the schedule put it
    on, what its commit says it read, and the engine's own lines, the
    committing transaction's told apart by the commit's txnId."""
    lo, w = obs.loser, obs.winner
    info = log.commits[lo.version].commit_info or {}
    txn_id = str(info.get("txnId") or "")
    out = [
        f"the schedule put the loser on version {lo.scheduled_read_version} ({scheduled_by}); "
        + (
            f"versions {later} follow its commit"
            if later
            else "its attempt from there left no commit: its commit, right after the winner's, is the log's last"
        ),
        f"its commit, version {lo.version}, records readVersion {lo.read_version}"
        + (f" and txnId {txn_id}" if txn_id else "")
        + f": a new transaction, on a snapshot holding the winner's commit (version {w.version})",
    ]
    short = txn_id.split("-")[0]
    for line in obs.loser_engine_log:
        whose = "engine log (the committing transaction)" if short and short in line else "engine log"
        out.append(f"{whose}: {line}")
    return out


def judged_cell(cell: C.Cell, obs: Observation) -> C.Cell:
    """The cell at the level its table carried, which is what the spec's
    expectation depends on, whatever level the cell asked for."""
    if obs.level in ISOLATION_LEVELS and obs.level != cell.level:
        return replace(cell, level=obs.level)
    return cell


def post_check(
    cell: C.Cell, obs: Observation, default_isolation: str, reader_options: dict[str, str] | None = None
) -> None:
    """Runs in the controller, after the worker reported the cell and while
    it (and the storage it owns) still runs."""
    if cell.winner == C.CREATE or not obs.table or obs.observed() == "unsupported":
        return

    log = read_log(obs.table, reader_options)
    if log.latest_version is not None:
        obs.level, obs.level_source = carried_level(log, default_isolation)
    resolve_loser(obs, log)
    observe_read_versions(obs, log)
    if not obs.controlled or obs.winner.status != COMMITTED:
        return
    cell = judged_cell(cell, obs)
    obs.data_violation = check_data(cell, obs, log)
    res = serializability.check(two_txn_history(cell, obs, default_isolation), log)
    obs.checker_verdict = res.verdict.value
    if res.verdict is Verdict.UNKNOWN:
        obs.checker_note = res.explanation
    if res.verdict is Verdict.INVALID:
        obs.checker_anomalies = [f"{a.kind} ({a.claim}): {a.explanation[:400]}" for a in res.anomalies]


# -- the worker ------------------------------------------------------------------


class CellWorker:
    """A worker process running cells on one engine, with a per-cell timeout."""

    def __init__(self, engine: str, logs: Path, root: Path | None = None, python: str | None = None):
        """`python`: the interpreter of an engine release's own environment."""
        self.engine, self.logs, self.root, self.python = engine, logs, root, python
        self.default_isolation = "Serializable"
        self.reader_options: dict[str, str] | None = None
        self.worker: LineWorker | None = None
        self.starts = 0

    def _start(self) -> None:
        self.starts += 1
        argv = python_argv(
            "harness.matrices.conformance.cell_worker",
            "--engine",
            self.engine,
            *(("--root", str(self.root)) if self.root else ()),
        )
        env = None
        if self.python is not None:
            argv, env = foreign_python(self.python, argv)
        self.worker = LineWorker("conformance worker", argv, self.logs / f"worker-{self.starts}.log", env=env)
        hello = self.worker.start(WORKER_START_TIMEOUT_S, "start its nodes")
        self.default_isolation = hello.get("default_isolation", self.default_isolation)
        self.reader_options = hello.get("reader_options")

    def run(self, cell: C.Cell, root: Path, timeout: float) -> dict[str, Any]:
        if self.worker is None or not self.worker.alive():
            try:
                self._start()
            except WorkerNotReady as e:
                return {"error": str(e)}
        assert self.worker is not None
        try:
            return self.worker.ask({"cell": cell.to_json(), "root": str(root)}, timeout)
        except WorkerLost as e:
            return {"error": str(e), **({"timeout": True} if e.timeout else {})}

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()

    def finish(self, timeout: float = FINISH_TIMEOUT_S) -> None:
        """End of input: the worker closes its backend and exits."""
        if self.worker is not None:
            self.worker.finish(timeout)


def _error_obs(text: str, timeout: bool = False) -> Observation:
    cls = ErrorClass.TIMEOUT.value if timeout else ErrorClass.CRASH.value
    r = TxnResult(ERROR, cls, text)
    return Observation(r, r, controlled=False, control_note=text)


def run_cells(
    engine: str,
    cells: list[C.Cell],
    root: Path,
    timeout: float = CELL_TIMEOUT_S,
    progress: Callable[[CellResult], None] | None = None,
    jobs: int = 1,
    started: Callable[[C.Cell], None] | None = None,
) -> list[CellResult]:
    """Run `cells` in `jobs` workers at once, each with its own storage and
    nodes (under root/job<i>/ when jobs > 1); results in the cells' order."""
    er = parse_engine_release(engine, ENGINES)
    # An engine release's own environment (built on first use; the caller
    # builds it beforehand where a progress line should show).
    python = ensure(env_request(er)).python if er.release is not None else None
    jobs = max(1, min(jobs, len(cells)))
    todo: queue.Queue[tuple[int, C.Cell]] = queue.Queue()
    for item in enumerate(cells):
        todo.put(item)
    results: dict[int, CellResult] = {}
    lock = threading.Lock()

    def job(home: Path) -> None:
        tables, logs = home / "tables", home / "logs"
        tables.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        worker = CellWorker(str(er), logs, tables, python)
        try:
            while True:
                try:
                    i, cell = todo.get_nowait()
                except queue.Empty:
                    return
                if started:
                    with lock:
                        started(cell)
                reply = worker.run(cell, tables, timeout)
                if "obs" in reply:
                    obs = Observation.from_json(reply["obs"])
                    try:
                        post_check(cell, obs, worker.default_isolation, worker.reader_options)
                    except Exception as exc:  # noqa: BLE001 - recorded, never a pass
                        obs.controlled = False
                        obs.control_note = f"post-cell check failed: {type(exc).__name__}: {exc}"
                else:
                    obs = _error_obs(reply["error"], reply.get("timeout", False))
                judged = judged_cell(cell, obs)
                exp = C.expectation(judged)
                verdict, why = judge(judged, exp, obs)
                if judged.level != cell.level:
                    why = "; ".join(
                        filter(
                            None,
                            [
                                f"judged at {judged.level}, the level the table carried "
                                f"({obs.level_source}), not the {cell.level} the cell asked "
                                "for (spec C13)",
                                why,
                            ],
                        )
                    )
                with lock:
                    results[i] = CellResult(cell, exp, obs, verdict, why)
                    if progress:
                        progress(results[i])
        finally:
            worker.finish()

    if jobs == 1:
        job(root)
    else:
        threads = [threading.Thread(target=job, args=(root / f"job{j + 1}",), daemon=True) for j in range(jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return [results[i] for i in sorted(results)]


# -- report ----------------------------------------------------------------------


def _ops(cell: C.Cell) -> str:
    return " + ".join(sorted((cell.winner, cell.loser)))


def render_markdown(engine: str, results: list[CellResult], seconds: float, versions: dict[str, str]) -> str:
    counts = Counter(r.verdict for r in results)
    lines = [
        f"# Conformance matrix: {engine} ({', '.join(f'{k} {v}' for k, v in versions.items())})",
        "",
        f"{len(results)} cells in {seconds:.0f} s: " + ", ".join(f"{v} {counts[v]}" for v in VERDICTS if counts[v]),
        "",
        "| claim | cells | " + " | ".join(VERDICTS) + " |",
        "|---|---|" + "---|" * len(VERDICTS),
    ]
    per_claim: dict[str, Counter] = {}
    for r in results:
        per_claim.setdefault(r.expectation.claim, Counter())[r.verdict] += 1
    for claim in sorted(per_claim, key=lambda c: (c[0], int(c[1:]) if c[1:].isdigit() else 0)):
        n = per_claim[claim]
        lines.append(f"| {claim} | {sum(n.values())} | " + " | ".join(str(n[v] or "") for v in VERDICTS) + " |")
    lines += ["", "## Deviations, by claim", ""]
    devs = [r for r in results if r.verdict not in PASSES]
    by_claim: dict[str, list[CellResult]] = {}
    for r in devs:
        by_claim.setdefault(r.expectation.claim, []).append(r)
    for claim in sorted(by_claim):
        lines.append(f"- **{claim}** ({len(by_claim[claim])}):")
        for r in by_claim[claim]:
            why = r.why if len(r.why) <= 300 else r.why[:300] + " ..."
            lines.append(f"  - `{r.cell.id}`: {r.verdict}: {why}")
    if not devs:
        lines.append("none")
    retried = [r for r in results if r.verdict == RETRIED]
    if retried:
        lines += [
            "",
            "## Cells that conform through the engine's retry",
            "",
            "The loser's attempt on the snapshot the schedule gave it left no commit; the engine committed it as a "
            "new transaction on a snapshot holding the winner's commit. The evidence, per cell:",
            "",
        ]
        for r in retried:
            lines.append(f"- `{r.cell.id}` ({r.expectation.claim}):")
            lines += [f"  - {e if len(e) <= 300 else e[:300] + ' ...'}" for e in r.obs.retry]
    ambiguous: dict[str, list[CellResult]] = {}
    for r in results:
        if r.expectation.ambiguous:
            ambiguous.setdefault(r.expectation.ambiguous, []).append(r)
    if ambiguous:
        lines += [
            "",
            "## Cells the spec leaves ambiguous",
            "",
            'Judged as "can conflict": either outcome conforms, the data and the class are still checked.',
            "",
        ]
        for why, rs in ambiguous.items():
            lines.append(
                f"- {why} ({len(rs)}): "
                + ", ".join(f"`{r.cell.id}`" for r in rs[:12])
                + (f", and {len(rs) - 12} more" if len(rs) > 12 else "")
            )
    lines += [
        "",
        "## All cells",
        "",
        "| claim | operations | order | level | layout | expected | observed | checker | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.cell
        layout = c.layout + (" + DV" if c.dv else "")
        level = judged_cell(c, r.obs).level
        level = level if level == c.level else f"{level} (asked {c.level})"
        lines.append(
            f"| {r.expectation.claim} | {_ops(c)} | {c.winner} first | {level} | {layout} | "
            f"{r.expectation.outcome.value} | {r.obs.observed()} | {r.obs.checker_verdict or '-'} | "
            f"{r.verdict} |"
        )
    return "\n".join(lines) + "\n"


def write_report(root: Path, engine: str, results: list[CellResult], seconds: float) -> dict[str, Any]:
    er = parse_engine_release(engine, ENGINES)
    built = make_engine(er.name, er.release)
    built.prepare()
    versions = built.versions()
    doc = {
        "engine": engine,
        "versions": versions,
        "seconds": round(seconds, 1),
        "counts": dict(Counter(r.verdict for r in results)),
        "cells": [r.to_json() for r in results],
    }
    (root / "conformance.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (root / "conformance.md").write_text(render_markdown(engine, results, seconds, versions))
    (root / "conformance.html").write_text(render_html(doc))
    return doc


_DEVIATIONS = (SAFETY, AVAILABILITY, EXCEPTION_CLASS)
_NOT_JUDGED = (V_UNSUPPORTED, UNCONTROLLED, UNJUDGED)


def junit_suite(doc: dict[str, Any]) -> junit.Suite:
    """One testcase per cell of a conformance.json document: a deviation is
    a failure (its type the verdict), a cell the harness could not judge is
    skipped with the reason, an error cell an error."""
    engine = str(doc.get("engine"))
    suite = junit.Suite(f"delta-jepsen.conformance.{engine}", time=float(doc.get("seconds") or 0.0))
    for c in doc.get("cells") or []:
        obs = c.get("observation") or {}
        case = junit.Case(
            str(c["id"]), f"delta-jepsen.conformance.{engine}.{c.get('claim')}", time=float(obs.get("seconds") or 0)
        )
        verdict, why = str(c.get("verdict")), str(c.get("why") or "")
        raw = [f"{side}: {(obs.get(side) or {}).get('raw')}" for side in ("winner", "loser")]
        evidence = "\n".join(
            [
                f"claim: {c.get('claim')} (rule {c.get('rule')})",
                f"operations: {c.get('operations')}, {c.get('order')}",
                f"level: {c.get('judged_level')} (asked {c.get('level')}), layout: {c.get('layout')}"
                + (" + deletion vectors" if c.get("dv") else ""),
                f"expected: {c.get('expected')}",
                f"observed: {c.get('observed')}",
                f"checker: {obs.get('checker_verdict') or 'not run'}",
                *([f"why: {why}"] if why else []),
                *(f"retry: {e}" for e in obs.get("retry") or []),
                *(line for line in raw if not line.endswith(": None") and not line.endswith(": ")),
            ]
        )
        headline = f"{c.get('claim')}: expected {c.get('expected')}, observed {c.get('observed')}"
        if verdict in _DEVIATIONS:
            case.outcome, case.type, case.message, case.text = junit.FAILURE, verdict, headline, evidence
        elif verdict in _NOT_JUDGED:
            case.outcome, case.message, case.text = junit.SKIPPED, f"{verdict}: {why}"[:1000], evidence
        elif verdict == V_ERROR:
            case.outcome, case.type, case.message, case.text = junit.ERROR, verdict, why[:1000], evidence
        else:
            case.system_out = evidence
        suite.cases.append(case)
    return suite


def select(cells: list[C.Cell], pattern: str | None) -> list[C.Cell]:
    if not pattern:
        return cells
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise HarnessError(f"--cells: bad regular expression {pattern!r}: {e}") from None
    chosen = [c for c in cells if rx.search(c.id)]
    if not chosen:
        raise HarnessError(f"--cells {pattern!r} matches no cell (ids look like {cells[0].id})")
    return chosen


def run_conformance(
    engine: str,
    root: Path,
    pattern: str | None = None,
    timeout: float = CELL_TIMEOUT_S,
    verbose: bool = True,
    jobs: int = 1,
    show_progress: bool = True,
    rec: junit.Recorder | None = None,
) -> int:
    """The whole matrix (or the cells matching `pattern`); exit 1 on any
    safety deviation, 3 if any cell could not be judged."""
    # Only engines with a conformance backend (not spark-connect: the cells
    # start their own nodes).
    er = parse_engine_release(engine, ENGINES)
    if er.release is not None:
        ensure(env_request(er), print_progress if verbose else None)
    cells = select(C.all_cells(), pattern)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    bar = CellProgress(len(cells), enabled=verbose and show_progress)

    def progress(r: CellResult) -> None:
        bar.finished(r.cell.id, r.verdict)
        if verbose and r.verdict not in PASSES:
            print(
                f"{r.cell.id}: {r.verdict} ({r.expectation.claim}: expected {r.expectation.outcome.value}, "
                f"observed {r.obs.observed()})",
                file=sys.stderr,
            )

    try:
        results = run_cells(engine, cells, root, timeout, progress, jobs, started=lambda c: bar.started(c.id))
    finally:
        bar.close()
    seconds = time.monotonic() - t0
    doc = write_report(root, engine, results, seconds)
    if rec is not None:
        rec.suites.append(junit_suite(doc))
    counts = Counter(r.verdict for r in results)
    print(
        f"conformance {engine}: {len(results)} cells in {seconds:.0f} s: "
        + ", ".join(f"{v} {counts[v]}" for v in VERDICTS if counts[v])
    )
    print(f"report: {root / 'conformance.md'} (and conformance.html)")
    return exit_code(counts)


def exit_code(counts: Counter[str]) -> int:
    """As `check`: 1 only for a safety deviation; a matrix with cells the
    harness could not judge (uncontrolled, error, unjudged) is no clean
    pass (3)."""
    if counts[SAFETY]:
        return 1
    if counts[UNCONTROLLED] or counts[V_ERROR] or counts[UNJUDGED]:
        return 3
    return 0
