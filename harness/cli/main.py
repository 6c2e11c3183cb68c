"""delta-jepsen: the command line, one module per command (or family).

Exit codes: 0 valid, 1 invalid, 2 bad input or harness error, 3 unknown,
130 interrupted.
"""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import traceback
from typing import NoReturn

from harness.cli import (
    bench,
    check,
    conformance,
    envs,
    jars,
    listing,
    matrix,
    qualify,
    reference,
    reproduce,
    run,
    serve,
    store_check,
)
from harness.cli.options import EXIT_BAD_INPUT, EXIT_INTERRUPTED, Handler
from harness.core.errors import HarnessError

# In the order `--help` lists them.
COMMANDS = (
    run,
    check,
    reproduce,
    bench,
    matrix,
    qualify,
    listing,
    jars,
    envs,
    conformance,
    serve,
    store_check,
    reference,
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"delta-jepsen: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Handler]]:
    p = _Parser(prog="delta-jepsen", description="Jepsen-style correctness tests for Delta Lake tables.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    handlers: dict[str, Handler] = {}
    for command in COMMANDS:
        handlers.update(command.add_parsers(sub))
    return p, handlers


def with_command(argv: list[str]) -> list[str]:
    """`argv` with its command: `delta-jepsen` alone, or with flags only, runs the default test."""
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        return ["run", *argv]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = with_command(list(sys.argv[1:] if argv is None else argv))
    parser, handlers = build_parser()
    args = parser.parse_args(argv)
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
