"""`delta-jepsen run`: compose a run from the command line, run it, check it."""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from typing import TYPE_CHECKING

from harness.cli.options import EXIT_INTERRUPTED, Handler, positive, spark_options
from harness.core.contract import AUTO_NODES
from harness.core.errors import HarnessError

if TYPE_CHECKING:
    from harness.check.junit import Recorder


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    from harness.engines import ENGINE_NAMES
    from harness.run.storage import STORAGE_KINDS
    from nemeses import NEMESIS_NAMES
    from workloads import WORKLOAD_NAMES

    r = sub.add_parser("run", help="run a test and check it (the default command)")
    r.add_argument(
        "--workload",
        default="append",
        help=f"one of: {', '.join(WORKLOAD_NAMES)} (default append), or module:Class of your own (docs: how-to)",
    )
    r.add_argument(
        "--engine",
        default="delta-spark",
        help=f"one of: {', '.join(ENGINE_NAMES)} (default delta-spark), "
        "or several comma-separated (mixed mode: their clients share the table); "
        "a release other than the pinned one as delta-rs==0.15.3 (built into an environment of its own on first use)",
    )
    r.add_argument("--storage", default="s3", help=f"one of: {', '.join(STORAGE_KINDS)} (default s3: embedded moto)")
    r.add_argument(
        "--nodes",
        type=positive(int),
        default=AUTO_NODES,
        help="engine nodes, e.g. Sail servers or delta-spark JVMs (default 2; 1 for delta-spark alone on "
        "--storage local, where HDFSLogStore's mutual exclusion holds inside one JVM only)",
    )
    r.add_argument("--concurrency", type=positive(int), default=4, help="client worker processes (default 4)")
    r.add_argument("--time-limit", type=positive(float), default=30.0, help="seconds of workload (default 30)")
    r.add_argument("--seed", type=int, default=None, help="generator seed (default: random, recorded)")
    r.add_argument("--op-timeout", type=positive(float), default=30.0, help="seconds before an op is info (default 30)")
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
        type=positive(float),
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
    spark_options(r)
    r.add_argument("--no-progress", action="store_true", help="no live progress line")
    r.add_argument(
        "--junit-xml", metavar="PATH", default=None, help="also write the checkers' verdicts as JUnit XML for CI"
    )
    return {"run": cmd_run}


def cmd_run(args: argparse.Namespace) -> int:
    from harness.check import junit

    target = junit.check_target(args.junit_xml)
    classname = f"delta-jepsen.{args.workload}.{args.engine.replace(',', '+')}"
    with junit.recording(target, classname, classname) as rec:
        return _run(args, rec)


def _run(args: argparse.Namespace, rec: Recorder) -> int:
    from harness.check import junit
    from harness.check.pipeline import check_run
    from harness.core.procs import install_signal_handlers
    from harness.engines import parse_engine_releases
    from harness.run.plan import RunSpec, TestPlan
    from harness.run.progress import Progress
    from harness.run.results import new_run_dir, results_root
    from harness.run.runner import Runner
    from nemeses import PROXY_NEMESES, parse_nemeses

    releases = parse_engine_releases(args.engine)
    engines = tuple(e.name for e in releases)
    nemesis = parse_nemeses(args.nemesis)
    spark_remote = _spark_remote(args, engines, nemesis)
    spec = RunSpec(
        workload=args.workload,
        engine=",".join(map(str, releases)),
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
    progress = Progress(spec.time_limit, enabled=not args.no_progress)
    # Every part is checked here: bad input exits 2 before anything starts.
    plan = TestPlan.build(spec, progress.message)
    install_signal_handlers()
    # A workload of your own is "module:Class": no colon in a folder name.
    run_dir = new_run_dir(results_root(args.results_dir), spec.workload.replace(":", "."), "+".join(map(str, releases)))
    print(f"run: {run_dir}  seed {spec.seed}", file=sys.stderr)
    with progress:
        outcome = Runner(plan, run_dir, progress).run()
    (run_dir / "run.json").write_text(
        json.dumps(
            {
                "elapsed": round(outcome.elapsed, 3),
                "interrupted": outcome.interrupted,
                "counts": outcome.counts,
                "fatal": outcome.fatal,
                "refused": outcome.refused,
                "store_self_check": outcome.store_self_check,
                "store_replaced_commits": outcome.store_replaced_commits,
            },
            indent=2,
        )
        + "\n"
    )
    report = check_run(run_dir)
    rec.suites.append(junit.report_suite(report))
    print(report.summary, end="")
    if outcome.interrupted:
        # The partial run's verdicts stand, but CI must not read them as a whole run.
        why = "interrupted (SIGINT/SIGTERM): the verdicts are the partial history's"
        rec.suites[-1].cases.append(junit.error_case("interrupted", rec.classname, why, kind="interrupted"))
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
