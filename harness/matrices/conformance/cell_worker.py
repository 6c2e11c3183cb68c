"""The conformance worker process: runs cells one at a time on one engine.

Protocol (JSON lines): stdin ``{"cell": {...}, "root": "<dir>"}``; stdout
``{"cell": "<id>", "obs": {...}}``. The controller bounds each cell with a
timeout and replaces a worker that hangs.

Usage: ``python -m harness.matrices.conformance.cell_worker --engine delta-rs``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Protocol

from harness.matrices.conformance.cells import Cell
from harness.matrices.conformance.deltars_backend import DeltaRsBackend
from harness.matrices.conformance.deltaspark_backend import DeltaSparkBackend
from harness.matrices.conformance.matrix import post_check
from harness.matrices.conformance.sail_backend import SailBackend
from harness.matrices.conformance.verdict import Observation


class Backend(Protocol):
    default_isolation: str

    def run_cell(self, cell: Cell, root: Path) -> Observation: ...

    def reader_options(self) -> dict[str, str] | None: ...

    def close(self) -> None: ...


def backend(engine: str) -> Backend:
    if engine == "delta-rs":
        return DeltaRsBackend()
    if engine == "delta-spark":
        return DeltaSparkBackend()
    if engine == "sail":
        return SailBackend()
    raise ValueError(f"no conformance backend for engine {engine!r}")


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
        out.write(json.dumps({"ready": True}) + "\n")
        out.flush()
        for line in sys.stdin:
            if not line.strip():
                continue
            msg = json.loads(line)
            cell = Cell.from_json(msg["cell"])
            try:
                obs = be.run_cell(cell, Path(msg["root"]))
                try:
                    post_check(cell, obs, be.default_isolation, be.reader_options())
                except Exception as exc:  # noqa: BLE001 - recorded, never a pass
                    obs.controlled = False
                    obs.control_note = f"post-cell check failed: {type(exc).__name__}: {exc}"
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
