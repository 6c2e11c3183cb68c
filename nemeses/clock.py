"""clock: skew the wall clock of one node through libfaketime.

The node's engine process is started again under LD_PRELOAD=libfaketime
with a FAKETIME offset: a server node (Sail, delta-spark's JVM) is restarted
under the skew, and its client workers (Spark Connect clients, which write
no time into the table) keep the real clock; a node without a server
(delta-rs, where the worker is the engine) has its current workers killed,
so that their slots respawn them under the skew (their ops in flight become
`info`). The monotonic clock is left alone (FAKETIME_DONT_FAKE_MONOTONIC),
so timeouts keep working; what moves is what the engine writes as wall time
(commitInfo timestamps, file modification times). `stop` starts the node's
processes again without it.

Two defects of libfaketime 0.9.10 (Debian 12) under DONT_FAKE_MONOTONIC
shape this:
- Its monotonic fix (on by default with glibc) turns a JVM's timed waits
  (Object.wait, LockSupport.parkNanos) into immediate returns, measured
  here: wait(300 ms) returned after 0 ms, so every timed wait in the JVM
  spins, and a Spark Connect server did not start within 60 s on 2 cores.
  FAKETIME_FORCE_MONOTONIC_FIX=0 restores them (and Python's own waits
  are right either way).
- clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) gets a negative time and
  fails with EINVAL (wolfcw/libfaketime#426): Python 3.11's time.sleep
  raises OSError, e.g. in pyspark's retry back-off. Hence a server node's
  client workers are not skewed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from nemeses.base import Nemesis, NemesisContext, NemesisError

LIBFAKETIME_PATHS = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
MISSING = (
    "the clock nemesis needs libfaketime (Debian package: faketime; "
    "install it with .ci/setup-debian or apt-get install faketime)"
)


def libfaketime() -> str | None:
    env = os.environ.get("DJ_LIBFAKETIME")
    for p in (env,) if env else LIBFAKETIME_PATHS:
        if Path(p).is_file():
            return p
    return None


def faketime_env(offset_s: int, lib: str) -> dict[str, str]:
    return {
        "LD_PRELOAD": lib,
        "FAKETIME": f"{offset_s:+d}",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        "FAKETIME_NO_CACHE": "1",
    }


class ClockNemesis(Nemesis):
    name = "clock"

    def __init__(self) -> None:
        self.skewed: str | None = None

    def validate(self, storage_kind: str) -> None:
        if libfaketime() is None:
            raise HarnessError(MISSING)

    def _apply(self, ctx: NemesisContext, node: str, env: dict[str, str] | None) -> dict[str, Any]:
        cl = ctx.cluster
        if node in cl.server_nodes():
            # Only the engine's process: its clients keep the real clock.
            return {"server": cl.restart_server(node, env)}
        cl.set_node_env(node, env)
        killed = [c.process for c in cl.clients() if c.node == node and cl.crash_client(c.process)]
        return {"workers_restarted": killed}

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        lib = libfaketime()
        if lib is None:
            raise NemesisError(MISSING)
        nodes = ctx.cluster.nodes()
        if not nodes:
            raise NemesisError("no node to skew")
        node = ctx.rng.choice(nodes)
        offset = ctx.rng.choice([-1, 1]) * ctx.rng.randint(60, 3600)
        self.skewed = node
        return {"node": node, "offset_s": offset, **self._apply(ctx, node, faketime_env(offset, lib))}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        node, self.skewed = self.skewed, None
        if node is None:
            return {"node": None}
        return {"node": node, "offset_s": 0, **self._apply(ctx, node, None)}

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        if self.skewed is None:
            return None
        return self.stop(ctx)
