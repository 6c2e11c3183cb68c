"""`delta-jepsen matrix`: one run per workload x engine x isolation level."""

from __future__ import annotations

import argparse

from harness.cli.options import Handler, positive
from harness.core.errors import HarnessError


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    m = sub.add_parser("matrix", help="one run per workload x engine x isolation level, summarised as a table")
    m.add_argument("--workloads", default="all", help="comma-separated, or all (default)")
    m.add_argument(
        "--engines",
        default="sail,delta-rs",
        help="comma-separated (default sail,delta-rs); releases side by side as delta-rs==0.8.1,delta-rs==0.9.0",
    )
    m.add_argument("--isolation", default="Serializable,WriteSerializable", help="levels, comma-separated")
    m.add_argument("--time-limit", type=positive(float), default=60.0, help="seconds per cell (default 60)")
    m.add_argument("--concurrency", type=positive(int), default=8, help="client workers per cell (default 8)")
    m.add_argument("--storage", default="s3", help="storage for every cell (default s3: embedded moto)")
    m.add_argument("--jobs", type=positive(int), default=1, help="cells run at once (default 1)")
    m.add_argument("--seed", type=int, default=1, help="seed of every cell's run (default 1)")
    m.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    m.add_argument("--no-progress", action="store_true", help="no progress line per cell on stderr")
    m.add_argument("--junit-xml", metavar="PATH", default=None, help="also write one JUnit testcase per cell, for CI")
    return {"matrix": cmd_matrix}


def cmd_matrix(args: argparse.Namespace) -> int:
    import time

    from harness.check import junit
    from harness.core.isolation import LEVELS as ISOLATION_LEVELS
    from harness.engines import ENGINE_NAMES, REMOTE_ENGINES
    from harness.engines.releases import parse_engine_release
    from harness.matrices.workload import run_matrix
    from harness.run.results import results_root
    from harness.run.storage import STORAGE_KINDS
    from workloads import WORKLOAD_NAMES

    def pick(flag: str, value: str, valid: tuple[str, ...]) -> list[str]:
        names = list(valid) if value == "all" else [n.strip() for n in value.split(",") if n.strip()]
        bad = [n for n in names if n not in valid]
        if bad or not names:
            raise HarnessError(f"unknown {flag} {(bad[0] if bad else value)!r}; valid: {', '.join(valid)}")
        return names

    workloads = pick("workload", args.workloads, WORKLOAD_NAMES)
    remote = [n for n in (n.strip() for n in args.engines.split(",")) if n in REMOTE_ENGINES]
    if remote:
        raise HarnessError(f"matrix cannot run {remote[0]} (it needs --spark-remote): use delta-jepsen run")
    local = tuple(n for n in ENGINE_NAMES if n not in REMOTE_ENGINES)
    if args.engines == "all":
        engines = list(local)
    else:
        # Releases side by side: delta-rs==0.8.1,delta-rs==0.9.0.
        engines = [str(parse_engine_release(e, local)) for e in args.engines.split(",") if e.strip()]
        if not engines:
            raise HarnessError(f"unknown engine {args.engines!r}; valid: {', '.join(local)}")
    levels = pick("isolation level", args.isolation, ISOLATION_LEVELS)
    if args.storage not in STORAGE_KINDS:
        raise HarnessError(f"unknown storage {args.storage!r}; valid: {', '.join(STORAGE_KINDS)}")
    _check_size(args, engines, len(workloads) * len(engines) * len(levels))
    target = junit.check_target(args.junit_xml)
    root = results_root(args.results_dir) / "matrix" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    with junit.recording(target, "delta-jepsen.matrix", "delta-jepsen.matrix") as rec:
        return run_matrix(
            workloads,
            engines,
            levels,
            args.time_limit,
            args.concurrency,
            args.storage,
            args.jobs,
            root,
            args.seed,
            show_progress=not args.no_progress,
            rec=rec,
        )


def _check_size(args: argparse.Namespace, engines: list[str], cells: int) -> None:
    """--concurrency and --jobs against the machine: `jobs` cells run at
    once (no more than there are cells), each a run of its own."""
    from harness.core.capacity import HARNESS, check_fits
    from harness.run.plan import RunSpec, heaviest_run

    nodes = RunSpec().nodes  # what each cell runs with
    check_fits("--concurrency", args.concurrency, lambda n: HARNESS + heaviest_run(engines, nodes, n, args.storage))
    cell = heaviest_run(engines, nodes, args.concurrency, args.storage)
    check_fits("--jobs", args.jobs, lambda n: HARNESS + cell * min(n, cells))
