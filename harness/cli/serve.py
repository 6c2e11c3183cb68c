"""`delta-jepsen serve`: the results browser, on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

from harness.cli.options import Handler
from harness.core.errors import HarnessError


def _port(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {s!r}") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0..65535: {s!r}")
    return v


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    s = sub.add_parser("serve", help="browse the results in a web browser (on 127.0.0.1 only)")
    s.add_argument("--port", type=_port, default=8000, help="the port on 127.0.0.1 (default 8000; 0 picks a free one)")
    s.add_argument("--results-dir", default=None, help="results root (default $DJ_RESULTS_DIR or ./results)")
    return {"serve": cmd_serve}


def cmd_serve(args: argparse.Namespace) -> int:
    from harness.core.procs import install_signal_handlers
    from harness.run.results import results_root
    from harness.serve.server import make_server

    root = results_root(args.results_dir)
    if not root.is_dir():
        raise HarnessError(f"no results folder at {root} (a run makes one; or pass --results-dir DIR)")
    label = str(root).rstrip("/") + "/"
    try:
        server = make_server(Path(root), args.port, label)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise HarnessError(f"port {args.port} on 127.0.0.1 is in use (--port 0 picks a free one)") from None
        raise
    # SIGTERM unwinds like Ctrl-C: out of serve_forever, the socket closed by `with`.
    install_signal_handlers()
    with server:
        print(f"serving {label} at {server.url} (Ctrl-C stops)", flush=True)
        server.serve_forever()
    return 0
