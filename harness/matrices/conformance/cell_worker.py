"""The conformance worker process: runs cells one at a time on one engine.

Protocol (JSON lines): stdout first ``{"ready": true, "default_isolation":
..., "reader_options": ...}``; then stdin ``{"cell": {...}, "root": "<dir>"}``,
stdout ``{"cell": "<id>", "obs": {...}}``. The controller bounds each cell
with a timeout, replaces a worker that hangs, and judges each cell's table
itself while the worker (and the storage it owns) still runs: the worker
imports engines only, so it can run in an engine release's own environment.

Usage: ``python -m harness.matrices.conformance.cell_worker --engine delta-rs``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Protocol

from harness.core.plugins import load_object
from harness.matrices.conformance.cells import Cell
from harness.matrices.conformance.verdict import Observation

# Each engine's backend, imported alone: a worker in a delta-rs release's own
# environment must not import what the Spark backends need.
BACKENDS = {
    "delta-rs": "harness.matrices.conformance.deltars_backend:DeltaRsBackend",
    "delta-spark": "harness.matrices.conformance.deltaspark_backend:DeltaSparkBackend",
    "sail": "harness.matrices.conformance.sail_backend:SailBackend",
}


class Backend(Protocol):
    default_isolation: str

    def run_cell(self, cell: Cell, root: Path) -> Observation: ...

    def reader_options(self) -> dict[str, str] | None: ...

    def close(self) -> None: ...


def backend(engine: str) -> Backend:
    """`engine`: a name, or name==release where the backend starts servers
    of that release (delta-spark, Sail); a client library's release is the
    one installed where the worker runs."""
    name, _, release = engine.partition("==")
    if name not in BACKENDS:
        raise ValueError(f"no conformance backend for engine {engine!r}")
    cls = load_object(BACKENDS[name], "conformance backend")
    if release and name in ("delta-spark", "sail"):
        return cls(release)  # type: ignore[operator,no-any-return]
    return cls()  # type: ignore[operator,no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--root", default=None, help="start the backend's storage and nodes here before any cell")
    args = ap.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr  # engine chatter must not corrupt the protocol
    be = backend(args.engine)
    try:
        # Nodes start (and warm up) before the first cell, so that a cell's
        # timeout bounds the cell alone.
        if args.root and hasattr(be, "start"):
            be.start(Path(args.root))
        # What the controller needs to judge each cell's table itself (the
        # worker only runs engines): how to read the table, and the level an
        # unmarked table has.
        ready = {"ready": True, "default_isolation": be.default_isolation, "reader_options": be.reader_options()}
        out.write(json.dumps(ready) + "\n")
        out.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            msg = json.loads(line)
            cell = Cell.from_json(msg["cell"])
            try:
                obs = be.run_cell(cell, Path(msg["root"]))
                reply = {"cell": cell.id, "obs": obs.to_json()}
            except Exception as exc:  # noqa: BLE001 - a harness bug in one cell must not end the matrix
                reply = {"cell": cell.id, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            out.write(json.dumps(reply) + "\n")
            out.flush()
    finally:
        be.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
