"""delta-jepsen: the command line.

Exit codes: 0 valid, 1 invalid, 2 bad input or harness error, 3 unknown,
130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import random
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from harness.core.errors import HarnessError

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"delta-jepsen: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _positive(kind: type) -> object:
    def parse(s: str) -> object:
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {s!r}")
        return v

    return parse


def _spark_options(p: argparse.ArgumentParser) -> None:
    from harness.engines.deltaspark import LOG_STORES

    p.add_argument(
        "--log-store",
        default="default",
        help=f"delta-spark's commit protocol on S3: {', '.join(LOG_STORES)} "
        "(default: delta-spark's own default for s3a, S3SingleDriverLogStore)",
    )
    p.add_argument(
        "--spark-jars",
        default=None,
        help="a directory of Delta's jars for delta-spark, instead of fetching "
        "them from Maven Central (default $DJ_SPARK_JARS; `delta-jepsen jars --dest DIR` fills one)",
    )
    p.add_argument(
        "--spark-remote",
        default=None,
        help="--engine spark-connect: the Spark Connect endpoints of a "
        "running cluster with Delta configured, sc://host:port[,sc://host:port...] (nodes take them "
        "round-robin; default $DJ_SPARK_REMOTE)",
    )


def build_parser() -> argparse.ArgumentParser:
    from harness.engines import ENGINE_NAMES
    from harness.run.storage import STORAGE_KINDS
    from nemeses import NEMESIS_NAMES
    from workloads import WORKLOAD_NAMES

    p = _Parser(prog="delta-jepsen", description="Jepsen-style correctness tests for Delta Lake tables.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    r = sub.add_parser("run", help="run a test and check it (the default command)")
    r.add_argument("--workload", default="append", help=f"one of: {', '.join(WORKLOAD_NAMES)} (default append)")
    r.add_argument(
        "--engine",
        default="delta-spark",
        help=f"one of: {', '.join(ENGINE_NAMES)} (default delta-spark), "
        "or several comma-separated (mixed mode: their clients share the table)",
    )
    r.add_argument("--storage", default="s3", help=f"one of: {', '.join(STORAGE_KINDS)} (default s3: embedded moto)")
    r.add_argument("--nodes", type=_positive(int), default=2, help="engine nodes, e.g. Sail servers (default 2)")
    r.add_argument("--concurrency", type=_positive(int), default=4, help="client worker processes (default 4)")
    r.add_argument("--time-limit", type=_positive(float), default=30.0, help="seconds of workload (default 30)")
    r.add_argument("--seed", type=int, default=None, help="generator seed (default: random, recorded)")
    r.add_argument(
        "--op-timeout", type=_positive(float), default=30.0, help="seconds before an op is info (default 30)"
    )
    r.add_argument(
        "--strict-exceptions",
        action="store_true",
        help="fail the run (exit 1) on a conflict that carries no E1-E6 class or one the log rules out; "
        "by default these are reported as findings beside the verdict",
    )
    r.add_argument("--isolation", default=None, help="table isolation level: Serializable or WriteSerializable")
    r.add_argument(
        "--nemesis",
        default="none",
        help=f"comma-separated faults: {', '.join(NEMESIS_NAMES)} (S3 faults turn on --s3-proxy)",
    )
    r.add_argument(
        "--nemesis-interval",
        type=_positive(float),
        default=10.0,
        help="seconds per nemesis cycle: quiet for half, one fault for the other half (default 10)",
    )
    r.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    r.add_argument(
        "--local-root", default=None, help="--storage local: directory for the table (default: the run folder)"
    )
    r.add_argument("--s3-endpoint", default=None, help="--storage external-s3: endpoint (default $AWS_ENDPOINT_URL)")
    r.add_argument("--s3-bucket", default=None, help="--storage external-s3: bucket (default $DJ_S3_BUCKET)")
    r.add_argument(
        "--s3-proxy",
        action="store_true",
        help="route clients through the S3 fault proxy (stats in logs/s3proxy-stats.json)",
    )
    _spark_options(r)
    r.add_argument("--no-progress", action="store_true", help="no live progress line")
    c = sub.add_parser("check", help="re-run the checkers on a stored run, without any engine")
    c.add_argument("run_dir", help="a run folder, e.g. results/latest")
    c.add_argument("--json", action="store_true", help="print results.json instead of the summary")
    b = sub.add_parser("bench-overhead", help="the harness's own per-op cost next to a bare loop")
    b.add_argument("--engine", default="delta-spark", help=f"one of: {', '.join(ENGINE_NAMES)} (default delta-spark)")
    b.add_argument("--storage", default="local", help="local or s3 (default local)")
    b.add_argument("--ops", type=_positive(int), default=300, help="ops per measurement (default 300)")
    bs = sub.add_parser(
        "bench-startup", help="seconds until engine nodes answer (delta-spark JVMs next to Sail servers)"
    )
    bs.add_argument("--engines", default="delta-spark,sail", help="comma-separated (default delta-spark,sail)")
    bs.add_argument("--nodes", type=_positive(int), default=2, help="nodes started at once (default 2)")
    bs.add_argument("--repeat", type=_positive(int), default=3, help="starts per engine (default 3)")
    bc = sub.add_parser("bench-checker", help="the serializability analysis on simulated histories (10k..1M)")
    bc.add_argument("--sizes", default="10000,100000,1000000", help="transaction counts (default 10000,100000,1000000)")
    bc.add_argument("--concurrency", type=_positive(int), default=8, help="transactions in flight (default 8)")
    bc.add_argument("--isolation", default="WriteSerializable", help="Serializable or WriteSerializable")
    bc.add_argument("--seed", type=int, default=1)
    bp = sub.add_parser("bench-proxy", help="the S3 fault proxy's added latency and throughput, no faults armed")
    bp.add_argument("--requests", type=_positive(int), default=600, help="requests each way for latency (default 600)")
    bp.add_argument("--clients", type=_positive(int), default=8, help="concurrent clients for throughput (default 8)")
    bp.add_argument("--seconds", type=_positive(float), default=5.0, help="throughput measurement time (default 5)")
    bk = sub.add_parser("bench-check", help="full `check` of a stored simulated run (default 100k commits), timed")
    bk.add_argument("--commits", default="100000", help="log commits per run, comma-separated (default 100000)")
    bk.add_argument("--concurrency", type=_positive(int), default=8, help="transactions in flight (default 8)")
    bk.add_argument("--seed", type=int, default=1)
    bk.add_argument(
        "--dir", default=None, help="keep the generated runs here and reuse them (default: a temp dir, removed)"
    )
    bk.add_argument("--profile", default=None, help="write cProfile stats of each check to PREFIX.<commits>")
    m = sub.add_parser("matrix", help="one run per workload x engine x isolation level, summarised as a table")
    m.add_argument("--workloads", default="all", help="comma-separated, or all (default)")
    m.add_argument("--engines", default="sail,delta-rs", help="comma-separated (default sail,delta-rs)")
    m.add_argument("--isolation", default="Serializable,WriteSerializable", help="levels, comma-separated")
    m.add_argument("--time-limit", type=_positive(float), default=60.0, help="seconds per cell (default 60)")
    m.add_argument("--concurrency", type=_positive(int), default=8, help="client workers per cell (default 8)")
    m.add_argument("--storage", default="s3", help="storage for every cell (default s3: embedded moto)")
    m.add_argument("--jobs", type=_positive(int), default=1, help="cells run at once (default 1)")
    m.add_argument("--seed", type=int, default=1)
    m.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    sub.add_parser("list", help="list workloads, engines, storages, nemeses and checkers")
    j = sub.add_parser(
        "jars",
        help="fetch delta-spark's jars from Maven Central into the cache (and copy them to a "
        "directory for offline machines)",
    )
    j.add_argument("--features", default="delta,s3", help="comma-separated: delta, s3, dynamodb (default delta,s3)")
    j.add_argument("--dest", default=None, help="copy the jars here (use it later with --spark-jars DIR)")
    from harness.matrices.conformance.runner import add_parser as add_conformance

    add_conformance(sub)
    return p


def cmd_run(args: argparse.Namespace) -> int:
    from harness.check.pipeline import check_run
    from harness.core.isolation import LEVELS as ISOLATION_LEVELS
    from harness.engines import parse_engine_list
    from harness.run.plan import RunSpec
    from harness.run.progress import Progress
    from harness.run.results import new_run_dir, results_root
    from harness.run.runner import Runner
    from harness.run.storage import STORAGE_KINDS
    from nemeses import PROXY_NEMESES, make_nemeses, parse_nemeses
    from workloads import make_workload

    if args.isolation is not None and args.isolation not in ISOLATION_LEVELS:
        raise HarnessError(f"unknown isolation level {args.isolation!r}; valid: {', '.join(ISOLATION_LEVELS)}")
    if args.storage not in STORAGE_KINDS:
        raise HarnessError(f"unknown storage {args.storage!r}; valid: {', '.join(STORAGE_KINDS)}")
    make_workload(args.workload, 0)
    engines = parse_engine_list(args.engine)
    nemesis = parse_nemeses(args.nemesis)
    spark_remote = _spark_remote(args, engines, nemesis)
    make_nemeses(nemesis, args.storage)  # bad combinations exit 2 before anything starts
    spec = RunSpec(
        workload=args.workload,
        engine=",".join(engines),
        storage=args.storage,
        nodes=args.nodes,
        concurrency=args.concurrency,
        time_limit=args.time_limit,
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(2**31),
        op_timeout=args.op_timeout,
        isolation=args.isolation,
        nemesis=nemesis,
        nemesis_interval=args.nemesis_interval,
        local_root=args.local_root,
        s3_endpoint=args.s3_endpoint,
        s3_bucket=args.s3_bucket,
        s3_proxy=args.s3_proxy or bool(PROXY_NEMESES & set(nemesis)),
        log_store=args.log_store,
        spark_jars=args.spark_jars,
        spark_remote=spark_remote,
        strict_exceptions=args.strict_exceptions,
    )
    from harness.engines.deltaspark import LOG_STORES

    if args.log_store not in LOG_STORES:
        raise HarnessError(f"unknown --log-store {args.log_store!r}; valid: {', '.join(LOG_STORES)}")
    if args.spark_jars and not Path(args.spark_jars).is_dir():
        raise HarnessError(f"--spark-jars {args.spark_jars}: no such directory")
    from harness.core.procs import install_signal_handlers

    install_signal_handlers()
    run_dir = new_run_dir(results_root(args.results_dir), spec.workload, "+".join(engines))
    print(f"run: {run_dir}  seed {spec.seed}", file=sys.stderr)
    with Progress(spec.time_limit, enabled=not args.no_progress) as progress:
        outcome = Runner(spec, run_dir, progress).run()
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "elapsed": round(outcome.elapsed, 3),
                "interrupted": outcome.interrupted,
                "counts": outcome.counts,
                "fatal": outcome.fatal,
                "refused": outcome.refused,
            },
            indent=2,
        )
        + "\n"
    )
    report = check_run(run_dir)
    print(report.summary, end="")
    if outcome.interrupted:
        return EXIT_INTERRUPTED
    if outcome.fatal:
        raise HarnessError(outcome.fatal)
    return report.exit_code


def _spark_remote(args: argparse.Namespace, engines: tuple[str, ...], nemesis: list[str]) -> str | None:
    """--spark-remote, checked against the engines, storage and faults of the
    run: the endpoints, comma-separated, or None without spark-connect."""
    from harness.engines import remote
    from nemeses import PROXY_NEMESES

    if remote.NAME not in engines:
        if args.spark_remote is not None:
            raise HarnessError(f"--spark-remote is for --engine {remote.NAME} (not in {','.join(engines)!r})")
        return None
    value = args.spark_remote if args.spark_remote is not None else os.environ.get(remote.REMOTE_ENV)
    if not value:
        raise HarnessError(
            f"--engine {remote.NAME} needs --spark-remote sc://host:port[,sc://host:port...] (or ${remote.REMOTE_ENV})"
        )
    urls = remote.parse_remotes(value)
    remote.check_storage(args.storage)
    for notice in remote.check_nemeses(engines, nemesis, PROXY_NEMESES, args.s3_proxy):
        print(f"delta-jepsen: note: {notice}", file=sys.stderr)
    return ",".join(urls)


def cmd_check(args: argparse.Namespace) -> int:
    from harness.check.pipeline import check_run

    run_dir = Path(args.run_dir)
    if not run_dir.exists():
        raise HarnessError(f"no such run folder: {run_dir}")
    report = check_run(run_dir.resolve() if run_dir.is_symlink() else run_dir)
    print(json.dumps(report.doc, indent=2, default=str) if args.json else report.summary, end="\n" if args.json else "")
    return report.exit_code


def cmd_list(args: argparse.Namespace) -> int:
    from checkers import CHECKERS
    from harness.engines import ENGINE_NAMES
    from harness.run.storage import STORAGE_KINDS
    from nemeses import NEMESIS_NAMES
    from workloads import WORKLOAD_NAMES

    for title, names in (
        ("workloads", WORKLOAD_NAMES),
        ("engines", ENGINE_NAMES),
        ("storage", STORAGE_KINDS),
        ("nemeses", NEMESIS_NAMES),
        ("checkers", tuple(CHECKERS)),
    ):
        print(f"{title}: {', '.join(names)}")
    return 0


def cmd_jars(args: argparse.Namespace) -> int:
    import shutil

    from harness.engines.jars import print_progress, resolve

    jars = resolve([f.strip() for f in args.features.split(",") if f.strip()], progress=print_progress)
    for p in jars.jars:
        print(p)
    if args.dest:
        dest = Path(args.dest)
        dest.mkdir(parents=True, exist_ok=True)
        for p in jars.jars:
            shutil.copy2(p, dest / p.name)
        print(f"copied {len(jars.jars)} jars to {dest}", file=sys.stderr)
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    import time

    from harness.core.isolation import LEVELS as ISOLATION_LEVELS
    from harness.engines import ENGINE_NAMES, REMOTE_ENGINES
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
    engines = pick("engine", args.engines, tuple(n for n in ENGINE_NAMES if n not in REMOTE_ENGINES))
    levels = pick("isolation level", args.isolation, ISOLATION_LEVELS)
    if args.storage not in STORAGE_KINDS:
        raise HarnessError(f"unknown storage {args.storage!r}; valid: {', '.join(STORAGE_KINDS)}")
    root = results_root(args.results_dir) / "matrix" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return run_matrix(
        workloads, engines, levels, args.time_limit, args.concurrency, args.storage, args.jobs, root, args.seed
    )


def cmd_bench_overhead(args: argparse.Namespace) -> int:
    from harness.bench.overhead import bench_overhead

    return bench_overhead(args.engine, args.storage, args.ops)


def cmd_bench_startup(args: argparse.Namespace) -> int:
    from harness.bench.overhead import bench_startup
    from harness.engines import parse_engine_list

    return bench_startup(list(parse_engine_list(args.engines)), args.nodes, args.repeat)


def cmd_bench_checker(args: argparse.Namespace) -> int:
    from harness.bench.checker import bench_checker
    from harness.core.isolation import LEVELS as ISOLATION_LEVELS

    if args.isolation not in ISOLATION_LEVELS:
        raise HarnessError(f"unknown isolation level {args.isolation!r}; valid: {', '.join(ISOLATION_LEVELS)}")
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        raise HarnessError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    if not sizes or min(sizes) <= 0:
        raise HarnessError("--sizes must be positive integers")
    return bench_checker(sizes, args.concurrency, args.isolation, args.seed)


def cmd_bench_proxy(args: argparse.Namespace) -> int:
    from harness.bench.proxy import bench_proxy

    return bench_proxy(args.requests, args.clients, args.seconds)


def cmd_bench_check(args: argparse.Namespace) -> int:
    from harness.bench.check import bench_check

    try:
        sizes = [int(x) for x in args.commits.split(",") if x.strip()]
    except ValueError:
        raise HarnessError(f"--commits must be comma-separated integers, got {args.commits!r}") from None
    if not sizes or min(sizes) < 2:
        raise HarnessError("--commits must be integers >= 2")
    return bench_check(sizes, args.concurrency, args.seed, args.dir, args.profile)


def _cmd_conformance(args: argparse.Namespace) -> int:
    from harness.matrices.conformance.runner import cmd_conformance

    return cmd_conformance(args)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]  # `delta-jepsen` alone runs the default test
    args = build_parser().parse_args(argv)
    handlers = {
        "run": cmd_run,
        "check": cmd_check,
        "list": cmd_list,
        "bench-overhead": cmd_bench_overhead,
        "bench-checker": cmd_bench_checker,
        "bench-check": cmd_bench_check,
        "matrix": cmd_matrix,
        "bench-proxy": cmd_bench_proxy,
        "conformance": _cmd_conformance,
        "jars": cmd_jars,
        "bench-startup": cmd_bench_startup,
    }
    try:
        return handlers[args.cmd](args)
    except HarnessError as e:
        print(f"delta-jepsen: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("delta-jepsen: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        os._exit(EXIT_BAD_INPUT)
    except OSError as e:
        # A path the harness cannot use (an unwritable --results-dir or
        # --local-root, a file where a folder should be): bad input, and
        # never exit 1, which only an engine's broken guarantee may give.
        where = f": {e.filename}" if e.filename else ""
        print(f"delta-jepsen: error: {e.strerror or e}{where}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 - a harness bug is no verdict on the engine
        traceback.print_exc()
        print(
            "delta-jepsen: error: the harness failed (a bug in delta-jepsen, not a verdict on the engine; "
            "traceback above)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


def entry() -> None:
    """The console script: main(), then the exit code and nothing else.

    Python's exit handlers (children stopped, reader pool closed) run here;
    the interpreter's own teardown is skipped, because a native thread of a
    library (grpc, arrow) being destroyed there once aborted a finished run
    ("terminate called without an active exception", exit -6) after its
    verdict was written: a harness fault that no exit code may carry.
    """
    code = main()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code if isinstance(code, int) else EXIT_BAD_INPUT)


if __name__ == "__main__":
    entry()
