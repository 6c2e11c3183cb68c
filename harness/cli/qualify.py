"""`delta-jepsen qualify` (two releases of an engine through the conformance
matrix and a workload matrix, side by side) and `delta-jepsen compare` (the
same from two stored folders, running nothing)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from harness.cli.options import Handler, positive
from harness.core.errors import HarnessError

DEFAULT_WORKLOADS = "append,bank-overwrite,bank,register,delete-insert,upsert,compaction"
# A delta-spark run starts two JVMs and warms them up before its first op,
# and its conformance cells take a third of a half-hour qualification: fewer
# workloads, chosen to cover blind appends, read-modify-writes by UPDATE and
# by MERGE, and compaction.
ENGINE_WORKLOADS = {"delta-spark": "append,bank,upsert,compaction"}
# What a run costs besides its time limit: its start, its check, its stop.
RUN_OVERHEAD_S = 8.0
ENGINE_RUN_OVERHEAD_S = {"delta-spark": 30.0}
MIN_RUN_S = 3.0
# delta-spark's whole matrix takes 10-25 minutes per release here (two JVMs,
# a commit a second): by default its qualification runs the cells of the
# unpartitioned layouts, with and without deletion vectors, at the level it
# accepts (every op pair, 128 cells); `--cells .` runs them all.
ENGINE_CELLS = {"delta-spark": r"^unpartitioned(\+dv)?/Serializable/"}


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    q = sub.add_parser(
        "qualify",
        help="two releases of an engine through the conformance matrix and a workload matrix (with and without "
        "faults), side by side as qualify.md / .json / .html; exit 1 on a regression in safety, 3 if a row "
        "could not be judged",
    )
    q.add_argument("--engine", default="delta-rs", help="the engine whose releases are compared (default delta-rs)")
    q.add_argument("--baseline", required=True, metavar="RELEASE", help="the release qualified against, e.g. 1.5.1")
    q.add_argument("--candidate", required=True, metavar="RELEASE", help="the release to qualify, e.g. 1.6.6")
    q.add_argument(
        "--time-budget",
        type=positive(float),
        default=600.0,
        help="seconds for the workload part, shared by its runs on both sides (default 600)",
    )
    q.add_argument(
        "--workloads",
        default=None,
        help=f"comma-separated (default {DEFAULT_WORKLOADS}; for delta-spark {ENGINE_WORKLOADS['delta-spark']})",
    )
    q.add_argument(
        "--nemesis", default="kill", help="the faults of the workload runs with faults, or none (default kill)"
    )
    q.add_argument("--storage", default="local", help="storage of the workload runs (default local)")
    q.add_argument("--isolation", default="Serializable", help="levels of the workload runs, comma-separated")
    q.add_argument("--concurrency", type=positive(int), default=4, help="client workers per run (default 4)")
    q.add_argument(
        "--cells",
        default=None,
        help="only the conformance cells whose id matches this regular expression (default all; for delta-spark "
        f"{ENGINE_CELLS['delta-spark']!r}, '.' for all)",
    )
    q.add_argument("--no-conformance", action="store_true", help="the workload part only")
    q.add_argument("--jobs", type=positive(int), default=1, help="conformance workers and runs at once (default 1)")
    q.add_argument("--seed", type=int, default=1, help="seed of every workload run, the same on both sides")
    q.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    q.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    q.add_argument("--junit-xml", metavar="PATH", default=None, help="also write one JUnit testcase per row, for CI")

    c = sub.add_parser(
        "compare",
        help="two stored conformance or matrix folders (or qualify sides) side by side, running nothing; "
        "exit codes as qualify",
    )
    c.add_argument("baseline_dir", help="the baseline's folder: a conformance or matrix folder")
    c.add_argument("candidate_dir", help="the candidate's folder, of the same kind")
    c.add_argument("--out", default=None, help="where qualify.md / .json / .html go (default results/compare/<time>)")
    c.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    c.add_argument("--junit-xml", metavar="PATH", default=None, help="also write one JUnit testcase per row, for CI")
    return {"qualify": cmd_qualify, "compare": cmd_compare}


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime())


def cmd_compare(args: argparse.Namespace) -> int:
    from harness.check import junit
    from harness.matrices.qualify import compare_dirs
    from harness.run.results import results_root

    target = junit.check_target(args.junit_xml)
    out = Path(args.out) if args.out else results_root(args.results_dir) / "compare" / _stamp()
    with junit.recording(target, "delta-jepsen.qualify", "delta-jepsen.qualify") as rec:
        return compare_dirs(Path(args.baseline_dir), Path(args.candidate_dir), out, rec=rec)


def cmd_qualify(args: argparse.Namespace) -> int:
    from harness.check import junit
    from harness.core.isolation import LEVELS
    from harness.engines.envs import ensure
    from harness.engines.jars import print_progress
    from harness.engines.releases import env_request, parse_engine_release
    from harness.matrices.conformance.matrix import ENGINES, run_conformance
    from harness.matrices.qualify import compare_dirs
    from harness.matrices.workload import run_matrix
    from harness.run.results import results_root
    from harness.run.storage import STORAGE_KINDS
    from nemeses import parse_nemeses
    from workloads import WORKLOAD_NAMES

    sides = [
        ("baseline", parse_engine_release(f"{args.engine}=={args.baseline}", ENGINES)),
        ("candidate", parse_engine_release(f"{args.engine}=={args.candidate}", ENGINES)),
    ]
    if args.baseline == args.candidate:
        raise HarnessError(f"--baseline and --candidate are both {args.baseline}")
    chosen = args.workloads or ENGINE_WORKLOADS.get(args.engine, DEFAULT_WORKLOADS)
    workloads = [w.strip() for w in chosen.split(",") if w.strip()] if chosen != "none" else []
    bad = [w for w in workloads if w not in WORKLOAD_NAMES]
    if bad:
        raise HarnessError(f"unknown workload {bad[0]!r}; valid: {', '.join(WORKLOAD_NAMES)}")
    levels = [lvl.strip() for lvl in args.isolation.split(",") if lvl.strip()]
    if not levels or any(lvl not in LEVELS for lvl in levels):
        raise HarnessError(f"unknown isolation level in {args.isolation!r}; valid: {', '.join(LEVELS)}")
    if args.storage not in STORAGE_KINDS:
        raise HarnessError(f"unknown storage {args.storage!r}; valid: {', '.join(STORAGE_KINDS)}")
    faults = [] if args.nemesis == "none" else parse_nemeses(args.nemesis)
    variants = ("", ",".join(faults)) if faults else ("",)
    runs = 2 * len(workloads) * len(variants) * len(levels)
    overhead = ENGINE_RUN_OVERHEAD_S.get(args.engine, RUN_OVERHEAD_S)
    time_limit = args.time_budget / runs - overhead if runs else 0.0
    if runs and time_limit < MIN_RUN_S:
        need = runs * (MIN_RUN_S + overhead)
        raise HarnessError(
            f"--time-budget {args.time_budget:g} s is too short for {runs} runs: give {need:.0f} s or more"
        )
    cells = args.cells if args.cells is not None else ENGINE_CELLS.get(args.engine)
    scope = _scope(cells, args.no_conformance, workloads, variants, time_limit, args.storage)
    target = junit.check_target(args.junit_xml)
    root = results_root(args.results_dir) / f"qualify-{args.engine}-{args.baseline}-vs-{args.candidate}" / _stamp()
    progress = None if args.no_progress else print_progress
    t0 = time.monotonic()
    with junit.recording(target, "delta-jepsen.qualify", "delta-jepsen.qualify") as rec:
        for _label, er in sides:
            ensure(env_request(er), progress)
        for label, er in sides:
            if not args.no_conformance:
                print(f"{label} {er}: conformance", flush=True)
                run_conformance(
                    str(er),
                    root / label / "conformance",
                    cells,
                    jobs=args.jobs,
                    verbose=False,
                    show_progress=progress is not None,
                )
            if workloads:
                print(f"{label} {er}: {runs // 2} workload runs of {time_limit:.0f} s", flush=True)
                try:
                    run_matrix(
                        workloads,
                        [str(er)],
                        levels,
                        time_limit,
                        args.concurrency,
                        args.storage,
                        args.jobs,
                        root / label / "matrix",
                        args.seed,
                        show_progress=progress is not None,
                        nemeses=variants,
                    )
                except HarnessError as e:  # cells without a result: rows not judged on this side
                    print(f"{label} {er}: {e}", flush=True)
        return compare_dirs(
            root / "baseline",
            root / "candidate",
            root,
            title=f"{args.engine} {args.candidate} against {args.baseline}",
            seconds=time.monotonic() - t0,
            rec=rec,
            scope=scope,
        )


def _scope(
    cells: str | None, no_conformance: bool, workloads: list[str], variants: tuple[str, ...], limit: float, storage: str
) -> str:
    """What both sides ran, for the pages' header."""
    from harness.matrices.conformance import cells as C
    from harness.matrices.conformance.matrix import select

    parts = []
    if not no_conformance:
        total = len(C.all_cells())
        chosen = len(select(C.all_cells(), cells))
        parts.append(
            f"conformance: {chosen} of {total} cells"
            + (f" (ids matching {cells!r}; --cells . runs them all)" if chosen < total else "")
        )
    if workloads:
        faults = " and ".join(v or "no faults" for v in variants)
        parts.append(f"workloads: {', '.join(workloads)}, each with {faults}, {limit:.0f} s per run on {storage}")
    return "; ".join(parts)
