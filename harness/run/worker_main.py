"""A client worker process: one engine session, ops in on stdin, results out.

Started by :mod:`harness.run.workers`. The protocol is one JSON object per line.
The worker first answers ``{"ready": true}`` once its session is open, then
one reply per op. Anything a library prints goes to stderr (the worker's log)
so it cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness.core.table import TableSpec
from harness.engines import make_client
from harness.engines.base import ClientConfig
from workloads import make_workload

CONFIG_ENV = "DJ_WORKER_CONFIG"
STOP = "__stop__"


# Python's programming errors: raised by the harness's own code they mean a
# bug in it, never an answer of the engine.
_BUG_TYPES = (
    KeyError,
    TypeError,
    AttributeError,
    NameError,
    AssertionError,
    IndexError,
    ZeroDivisionError,
    RecursionError,
)
# The checkout: harness/run/worker_main.py is three levels below it.
_PROJECT = str(Path(__file__).resolve().parents[2])
_OWN_DIRS = tuple(os.path.join(_PROJECT, d) + os.sep for d in ("harness", "workloads", "checkers", "nemeses"))


def harness_fault(exc: BaseException) -> str | None:
    """'<type>: <message> (at <file>:<line>)' if `exc` is a programming error
    raised in the harness's own code (its innermost frame is in the
    project), else None: an error raised inside pyspark or deltalake is the
    engine's, whatever its type."""
    if not isinstance(exc, _BUG_TYPES):
        return None
    tb = exc.__traceback__
    if tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = os.path.abspath(tb.tb_frame.f_code.co_filename)
    if not path.startswith(_OWN_DIRS):
        return None
    return f"{type(exc).__name__}: {exc} (at {os.path.relpath(path, _PROJECT)}:{tb.tb_lineno})"


def _needs(workload: Any, table: Any, f: str) -> set[str]:
    """The engine primitives op `f` needs: creating a table with an
    identity column needs the engine to declare one (spec C19)."""
    if f == "create-table":
        return {"create-table", "identity-columns"} if table.identity else {"create-table"}
    return {workload.primitive(f)}


def run_op(client: Any, workload: Any, table: Any, op: dict[str, Any]) -> dict[str, Any]:
    """Run one op; `engine_ns` is the time spent in the engine, so the
    controller can tell its own overhead apart (bench-overhead)."""
    t0 = time.perf_counter_ns()
    missing = _needs(workload, table, op["f"]) - client.capabilities.ops
    if missing:
        # Reported, never skipped silently and never counted as passed.
        lacks = sorted(missing - {op["f"]})
        return {
            "type": "fail",
            "engine_ns": 0,
            "error": {
                "class": "unsupported",
                "raw": f"{client.name} cannot run {op['f']!r}" + (f" (it has no {', '.join(lacks)})" if lacks else ""),
            },
        }
    try:
        if op["f"] == "create-table":
            res = client.create_table(table)
        else:
            res = workload.invoke(client, table, op)
        reply = {"type": "ok", "value": res.value, "version": res.version}
    except Exception as exc:  # every engine error becomes a classified fail/info
        fault = harness_fault(exc)
        if fault is not None:
            # Not the engine's doing, and not known whether the engine had
            # already applied the op: info, of a class of its own.
            traceback.print_exc()
            reply = {
                "type": "info",
                "error": {"class": "harness-fault", "raw": fault},
                "engine_ns": time.perf_counter_ns() - t0,
            }
            return reply
        c = client.classify(exc)
        print(f"op {op.get('id')} {op.get('f')}: {c.raw[:2000]}", file=sys.stderr, flush=True)
        reply = {"type": "fail" if c.definite else "info", "error": {"class": c.cls.value, "raw": c.raw}}
    reply["engine_ns"] = time.perf_counter_ns() - t0
    return reply


def main() -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)

    def send(msg: dict[str, Any]) -> None:
        proto.write(json.dumps(msg, separators=(",", ":")) + "\n")

    try:
        cfg = json.loads(os.environ[CONFIG_ENV])
        client = make_client(ClientConfig(**cfg["client"]))
        workload = make_workload(cfg["workload"], cfg["seed"], cfg.get("isolation"))
        table = TableSpec.from_json(cfg["table"])
        client.open()
    except Exception as exc:
        traceback.print_exc()
        send({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"ready": True, "pid": os.getpid()})
    try:
        for line in sys.stdin:
            op = json.loads(line)
            if op.get("f") == STOP:
                break
            send(run_op(client, workload, table, op))
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
