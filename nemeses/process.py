"""kill: `kill -9` of a client worker or of an engine server node
(kill-node: of a server node only; kill-mid-op: of a worker in the middle
of a maintenance op).

A killed worker's op becomes `info` (crash) and the runner continues its slot
under a new process id, so there is nothing to restart. A killed server node
(Sail) is started again by `stop`, on a new port: the node's url changes and
workers spawned from then on connect to the new server.
"""

from __future__ import annotations

import time
from typing import Any

from nemeses.base import Nemesis, NemesisContext, NemesisError


class KillNemesis(Nemesis):
    name = "kill"

    def __init__(self) -> None:
        self.killed_node: str | None = None
        self.killed_process: int | None = None

    # What it may kill: client workers, engine server nodes, or both.
    kills_clients = True

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        cl = ctx.cluster
        targets: list[tuple[str, Any]] = [("client", c) for c in cl.clients()] if self.kills_clients else []
        targets += [("node", n) for n in cl.server_nodes() if cl.server_alive(n)]
        if not targets:
            what = "client worker or server node" if self.kills_clients else "server node"
            raise NemesisError(f"nothing to kill: no live {what}")
        kind, t = ctx.rng.choice(targets)
        if kind == "node":
            pid = cl.kill_server(t)
            self.killed_node = t
            return {"target": "node", "node": t, "pid": pid, "signal": "SIGKILL"}
        if not cl.crash_client(t.process):
            raise NemesisError(f"client process {t.process} was already gone")
        self.killed_process = t.process
        return {"target": "client", "process": t.process, "node": t.node, "pid": t.pid, "signal": "SIGKILL"}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        if self.killed_node is not None:
            node, self.killed_node = self.killed_node, None
            return {"target": "node", "node": node, **ctx.cluster.restart_server(node)}
        process, self.killed_process = self.killed_process, None
        return {"target": "client", "process": process, "restarted": "by the runner, under a new process id"}

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        # Any server node found dead is started again, whoever killed it.
        dead = [n for n in ctx.cluster.server_nodes() if not ctx.cluster.server_alive(n)]
        self.killed_node = None
        if not dead:
            return None
        return {"restarted": {n: ctx.cluster.restart_server(n) for n in dead}}


class KillNodeNemesis(KillNemesis):
    """`kill -9` of an engine server node only (a Sail server, a delta-spark
    JVM: the driver of whatever it runs, a streaming query mid-batch too),
    started again at the fault's end."""

    name = "kill-node"
    kills_clients = False


class KillMidOpNemesis(KillNemesis):
    """`kill -9` of the engine in the middle of one of the workload's
    `kill_during` ops (VACUUM, RESTORE, a checkpoint, a streaming query):
    the fault waits, for up to its half of the cycle, for a client to start
    one, then, the workload's `kill_after` seconds into it (a range, drawn
    from; at once where this thread first sees the op later than that) and
    if the op still runs, kills the engine running it: the node's
    server where the node has one (a delta-spark JVM, a Sail server: started
    again when the fault stops), else the client worker, in which the engine
    runs (delta-rs): either way the operation itself dies half done."""

    name = "kill-mid-op"
    POLL_S = 0.002

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        if not ctx.target_ops:
            raise NemesisError("kill-mid-op: the workload names no op to kill the engine during (kill_during)")
        cl = ctx.cluster
        opened = time.monotonic()
        deadline = opened + ctx.fault_seconds
        while time.monotonic() < deadline:
            busy = [c for c in cl.clients() if c.op in ctx.target_ops]
            if not busy:
                time.sleep(self.POLL_S)
                continue
            c = ctx.rng.choice(busy)
            lo, hi = ctx.kill_after
            started = c.op_started if c.op_started is not None else time.monotonic()
            if time.monotonic() - started > hi and started < opened:
                time.sleep(self.POLL_S)
                continue  # begun before this fault and too far in: wait for the next one
            # One begun in this fault's window but first seen past `hi` (this
            # thread ran late on a loaded machine: with a window of a few
            # milliseconds no kill landed at all there) dies now, still mid-op.
            time.sleep(max(0.0, started + ctx.rng.uniform(lo, hi) - time.monotonic()))
            if not any(x.process == c.process and x.op_id == c.op_id for x in cl.clients()):
                continue  # it ended first: wait for the next one
            what = {"op": c.op, "op_id": c.op_id, "after_s": round(time.monotonic() - started, 3)}
            if c.node in cl.server_nodes() and cl.server_alive(c.node):
                pid = cl.kill_server(c.node)
                self.killed_node = c.node
                return {"target": "node", "node": c.node, "pid": pid, "signal": "SIGKILL", **what}
            if cl.crash_client(c.process):
                self.killed_process = c.process
                return {"target": "client", "process": c.process, "node": c.node, "pid": c.pid, **what}
        raise NemesisError(f"kill-mid-op: no client ran {', '.join(sorted(ctx.target_ops))} within the fault's window")
