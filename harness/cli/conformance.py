"""`delta-jepsen conformance`: the conformance matrix (harness/matrices/conformance)."""

from __future__ import annotations

import argparse

from harness.cli.options import Handler


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    from harness.matrices.conformance.matrix import add_parser

    add_parser(sub)
    return {"conformance": cmd_conformance}


def cmd_conformance(args: argparse.Namespace) -> int:
    from harness.matrices.conformance.matrix import cmd_conformance as run

    return run(args)
