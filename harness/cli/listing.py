"""`delta-jepsen list`: the names every option takes."""

from __future__ import annotations

import argparse

from harness.cli.options import Handler


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    sub.add_parser("list", help="list workloads, engines, storages, nemeses and checkers")
    return {"list": cmd_list}


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
