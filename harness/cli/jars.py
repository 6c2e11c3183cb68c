"""`delta-jepsen jars`: delta-spark's jars from Maven Central, cached, optionally copied."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.options import Handler


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    j = sub.add_parser(
        "jars",
        help="fetch delta-spark's jars from Maven Central into the cache (and copy them to a "
        "directory for offline machines)",
    )
    j.add_argument("--features", default="delta,s3", help="comma-separated: delta, s3, dynamodb (default delta,s3)")
    j.add_argument("--dest", default=None, help="copy the jars here (use it later with --spark-jars DIR)")
    return {"jars": cmd_jars}


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
