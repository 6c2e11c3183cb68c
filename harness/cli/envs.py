"""`delta-jepsen envs`: the engine releases' own environments, built and cached."""

from __future__ import annotations

import argparse
import time

from harness.cli.options import Handler


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    e = sub.add_parser(
        "envs",
        help="list the cached environments of engine releases (--engine delta-rs==0.15.3), build or remove them",
    )
    e.add_argument(
        "--build", default=None, metavar="ENGINE==RELEASE", help="build this release's environment now (e.g. for CI)"
    )
    e.add_argument(
        "--remove",
        default=None,
        metavar="ENGINE[==RELEASE]|all",
        help="remove the environments of this engine (or release), or all of them",
    )
    return {"envs": cmd_envs}


# The libraries a release's environment pins beside it, shown in the listing.
_SHOWN = ("pyspark", "pyarrow", "numpy")


def cmd_envs(args: argparse.Namespace) -> int:
    from harness.core.errors import HarnessError
    from harness.engines import ENGINE_NAMES
    from harness.engines.envs import cache_root, ensure, limit_bytes, listed, remove
    from harness.engines.jars import print_progress
    from harness.engines.releases import env_request, parse_engine_release

    if args.build:
        er = parse_engine_release(args.build, ENGINE_NAMES)
        if er.release is None:
            raise HarnessError(f"--build {args.build}: name a release, e.g. {er.name}==1.5.1")
        t0 = time.monotonic()
        env = ensure(env_request(er), print_progress)
        print(f"{er}: {env.path} (ready in {time.monotonic() - t0:.2f} s)")
        return 0
    if args.remove:
        if args.remove == "all":
            gone = remove()
        else:
            er = parse_engine_release(args.remove, ENGINE_NAMES)
            gone = remove(er.name, er.release)
        for env in gone:
            print(f"removed {env.engine}=={env.release} ({env.path})")
        if not gone:
            print("nothing to remove")
        return 0
    envs = listed()
    total = sum(size for _e, size, _u in envs)
    print(f"{cache_root()}: {len(envs)} environment(s), {total / 1e6:.0f} MB of {limit_bytes() / 1e6:.0f} MB")
    for env, size, used in envs:
        libs = " ".join(f"{k}=={v}" for k, v in sorted(env.resolved.items()) if k in _SHOWN)
        stamp = time.strftime("%Y-%m-%d %H:%M", time.gmtime(used))
        print(f"  {env.engine}=={env.release:<10} {size / 1e6:7.0f} MB  last used {stamp}  {libs}")
    return 0
