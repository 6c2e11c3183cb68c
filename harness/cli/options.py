"""What the commands share: exit codes and argument types."""

from __future__ import annotations

import argparse
from collections.abc import Callable

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# A command: parsed arguments in, exit code out.
Handler = Callable[[argparse.Namespace], int]


def positive(kind: type) -> object:
    def parse(s: str) -> object:
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if v <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {s!r}")
        return v

    return parse


def spark_options(p: argparse.ArgumentParser) -> None:
    from harness.engines.deltaspark import AUTO, COORDINATED, LOG_STORES, SINGLE_DRIVER

    p.add_argument(
        "--log-store",
        default=AUTO,
        help=f"delta-spark's commit protocol on S3: {', '.join((AUTO, *LOG_STORES))} (default {AUTO}: "
        f"{COORDINATED} when several delta-spark clusters write the table, else {SINGLE_DRIVER}, "
        "delta-spark's own default for s3a)",
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
