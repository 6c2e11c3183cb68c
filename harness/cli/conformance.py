"""`delta-jepsen conformance`: the conformance matrix (harness/matrices/conformance)."""

from __future__ import annotations

import argparse
import time

from harness.cli.options import Handler
from harness.core.errors import HarnessError


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    from harness.matrices.conformance.matrix import CELL_TIMEOUT_S, ENGINES

    c = sub.add_parser(
        "conformance",
        help="deterministic two-transaction conflict schedules per spec claim, "
        "as conformance.md / .json / .html; exit 1 on a safety deviation, 3 if a cell could not be judged",
    )
    c.add_argument(
        "--engine",
        default="delta-rs",
        help=f"one of: {', '.join(ENGINES)} (default delta-rs); "
        "a release other than the pinned one as delta-rs==0.15.3",
    )
    c.add_argument(
        "--cells",
        default=None,
        help="only the cells whose id matches this regular expression, e.g. 'unpartitioned/Serializable/insert>'",
    )
    c.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT_S, help="seconds per cell (default 90)")
    c.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    c.add_argument(
        "--jobs", type=int, default=1, help="workers at once, each with its own storage and nodes (default 1)"
    )
    c.add_argument("--no-progress", action="store_true", help="no progress line per cell on stderr")
    c.add_argument("--junit-xml", metavar="PATH", default=None, help="also write one JUnit testcase per cell, for CI")
    return {"conformance": cmd_conformance}


def cmd_conformance(args: argparse.Namespace) -> int:
    from harness.check import junit
    from harness.core.capacity import HARNESS, check_fits
    from harness.engines import make_engine
    from harness.engines.releases import parse_engine_release
    from harness.matrices.conformance.matrix import ENGINES, run_conformance
    from harness.run.plan import run_load
    from harness.run.results import results_root

    if args.cell_timeout <= 0:
        raise HarnessError(f"--cell-timeout must be > 0: {args.cell_timeout!r}")
    if args.jobs < 1:
        raise HarnessError(f"--jobs must be >= 1: {args.jobs!r}")
    er = parse_engine_release(args.engine, ENGINES)
    # A job is a worker process with its own store and the two nodes its
    # backend starts, and the engine's clients in it.
    job = run_load([make_engine(er.name, er.release)], 2, 1, "s3")
    check_fits("--jobs", args.jobs, lambda n: HARNESS + job * n)
    target = junit.check_target(args.junit_xml)
    root = results_root(args.results_dir) / f"conformance-{args.engine}" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    name = f"delta-jepsen.conformance.{args.engine}"
    with junit.recording(target, name, name) as rec:
        return run_conformance(
            str(er),
            root,
            args.cells,
            args.cell_timeout,
            jobs=args.jobs,
            show_progress=not args.no_progress,
            rec=rec,
        )
