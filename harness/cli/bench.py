"""The `bench-*` commands: each prints the figures an issue names (see harness/bench/)."""

from __future__ import annotations

import argparse

from harness.cli.options import Handler, positive
from harness.core.capacity import CLIENT_THREAD, EMBEDDED_STORE, HARNESS, check_fits
from harness.core.errors import HarnessError


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    from harness.engines import ENGINE_NAMES

    b = sub.add_parser("bench-overhead", help="the harness's own per-op cost next to a bare loop")
    b.add_argument("--engine", default="delta-spark", help=f"one of: {', '.join(ENGINE_NAMES)} (default delta-spark)")
    b.add_argument("--storage", default="local", help="local or s3 (default local)")
    b.add_argument("--ops", type=positive(int), default=300, help="ops per measurement (default 300)")
    bs = sub.add_parser(
        "bench-startup", help="seconds until engine nodes answer (delta-spark JVMs next to Sail servers)"
    )
    bs.add_argument("--engines", default="delta-spark,sail", help="comma-separated (default delta-spark,sail)")
    bs.add_argument("--nodes", type=positive(int), default=2, help="nodes started at once (default 2)")
    bs.add_argument("--repeat", type=positive(int), default=3, help="starts per engine (default 3)")
    bc = sub.add_parser("bench-checker", help="the serializability analysis on simulated histories (10k..10M)")
    bc.add_argument(
        "--sizes",
        default="100000,1000000",
        help="transaction counts (default 100000,1000000; 10000000 takes 3 minutes)",
    )
    bc.add_argument("--concurrency", type=positive(int), default=8, help="transactions in flight (default 8)")
    bc.add_argument("--isolation", default="WriteSerializable", help="Serializable or WriteSerializable")
    bc.add_argument("--seed", type=int, default=1, help="seed of the simulated histories (default 1)")
    bp = sub.add_parser("bench-proxy", help="the S3 fault proxy's added latency and throughput, no faults armed")
    bp.add_argument("--requests", type=positive(int), default=600, help="requests each way for latency (default 600)")
    bp.add_argument("--clients", type=positive(int), default=8, help="concurrent clients for throughput (default 8)")
    bp.add_argument("--seconds", type=positive(float), default=5.0, help="throughput measurement time (default 5)")
    bk = sub.add_parser("bench-check", help="full `check` of a stored simulated run (default 100k commits), timed")
    bk.add_argument("--commits", default="100000", help="log commits per run, comma-separated (default 100000)")
    bk.add_argument("--concurrency", type=positive(int), default=8, help="transactions in flight (default 8)")
    bk.add_argument("--seed", type=int, default=1, help="seed of the simulated runs (default 1)")
    bk.add_argument(
        "--dir", default=None, help="keep the generated runs here and reuse them (default: a temp dir, removed)"
    )
    bk.add_argument("--profile", default=None, help="write cProfile stats of each check to PREFIX.<commits>")
    bg = sub.add_parser("bench-storage", help="one run per engine and workload on local, moto and SeaweedFS")
    bg.add_argument("--engines", default="delta-rs", help="comma-separated (default delta-rs)")
    bg.add_argument("--workloads", default="append,register", help="comma-separated (default append,register)")
    bg.add_argument("--time-limit", type=positive(float), default=20.0, help="seconds per run (default 20)")
    bg.add_argument("--concurrency", type=positive(int), default=4, help="client workers (default 4)")
    bg.add_argument("--repeat", type=positive(int), default=1, help="runs per store and cell (default 1)")
    bg.add_argument(
        "--profile", action="store_true", help="also each S3 store behind the proxy: where an op's time goes"
    )
    bl = sub.add_parser(
        "bench-log-store", help="the default delta-spark run under each commit protocol: verdicts and ops/s"
    )
    bl.add_argument(
        "--log-stores",
        default="coordinated,single-driver",
        help="comma-separated --log-store values, the first the baseline (default coordinated,single-driver)",
    )
    bl.add_argument("--repeat", type=positive(int), default=3, help="runs per protocol (default 3)")
    bl.add_argument("--time-limit", type=positive(float), default=30.0, help="seconds per run (default 30)")
    bl.add_argument("--concurrency", type=positive(int), default=4, help="client workers (default 4)")
    bl.add_argument("--nodes", type=positive(int), default=2, help="delta-spark clusters (default 2)")
    bm = sub.add_parser(
        "bench-moto-race", help="racing conditional writes (S3, DynamoDB) on moto as shipped and mended: double winners"
    )
    bm.add_argument("--rounds", type=positive(int), default=1000, help="rounds per store and server (default 1000)")
    bm.add_argument("--racers", type=positive(int), default=8, help="racers per round, >= 2 (default 8)")
    bm.add_argument(
        "--switch-interval",
        type=positive(float),
        default=1e-6,
        help="the server's GIL switch interval in seconds: small widens moto's races (default 1e-6)",
    )
    return {
        "bench-moto-race": cmd_bench_moto_race,
        "bench-storage": cmd_bench_storage,
        "bench-log-store": cmd_bench_log_store,
        "bench-overhead": cmd_bench_overhead,
        "bench-startup": cmd_bench_startup,
        "bench-checker": cmd_bench_checker,
        "bench-proxy": cmd_bench_proxy,
        "bench-check": cmd_bench_check,
    }


def cmd_bench_overhead(args: argparse.Namespace) -> int:
    from harness.bench.overhead import bench_overhead

    return bench_overhead(args.engine, args.storage, args.ops)


def cmd_bench_log_store(args: argparse.Namespace) -> int:
    from harness.bench.log_store import bench_log_store
    from harness.engines.deltaspark import LOG_STORES, DeltaSparkEngine
    from harness.run.plan import run_load

    stores = [s.strip() for s in args.log_stores.split(",") if s.strip()]
    bad = [s for s in stores if s not in LOG_STORES]
    if bad or not stores:
        raise HarnessError(f"--log-stores {args.log_stores!r}: valid: {', '.join(LOG_STORES)}")
    check_fits("--nodes", args.nodes, lambda n: run_load([DeltaSparkEngine()], n, args.concurrency, "s3"))
    return bench_log_store(stores, args.repeat, args.time_limit, args.concurrency, args.nodes)


def cmd_bench_storage(args: argparse.Namespace) -> int:
    from harness.bench.storage import bench_storage
    from harness.engines import parse_engine_list
    from harness.run.plan import RunSpec, heaviest_run
    from workloads import WORKLOAD_NAMES

    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOAD_NAMES]
    if unknown or not workloads:
        raise HarnessError(f"--workloads {args.workloads!r}: valid: {', '.join(WORKLOAD_NAMES)}")
    engines = list(parse_engine_list(args.engines))
    # One run at a time, as its own process, with a run's default nodes, on each store in turn.
    nodes = RunSpec().nodes
    check_fits("--concurrency", args.concurrency, lambda n: HARNESS + heaviest_run(engines, nodes, n, "s3"))
    return bench_storage(engines, workloads, args.time_limit, args.concurrency, args.repeat, args.profile)


def cmd_bench_startup(args: argparse.Namespace) -> int:
    from harness.bench.overhead import bench_startup
    from harness.engines import parse_engine_list
    from harness.run.plan import heaviest_run

    engines = list(parse_engine_list(args.engines))
    # Each engine's nodes start in turn, from this process, on local storage.
    check_fits("--nodes", args.nodes, lambda n: heaviest_run(engines, n, 0, "local"))
    return bench_startup(engines, args.nodes, args.repeat)


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

    check_fits("--clients", args.clients, lambda n: HARNESS + EMBEDDED_STORE + CLIENT_THREAD * n)
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


def cmd_bench_moto_race(args: argparse.Namespace) -> int:
    from harness.bench.moto_race import bench_moto_race

    return bench_moto_race(args.rounds, args.racers, args.switch_interval)
