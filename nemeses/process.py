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
    """`kill -9` of a client worker in the middle of one of the workload's
    `kill_during` ops (VACUUM, RESTORE, a checkpoint): the fault waits, for
    up to its half of the cycle, for a worker to start one, then kills it a
    random few milliseconds in. The engine runs in the worker (delta-rs) or
    the worker is the client of a server that carries on (Spark): for
    delta-rs the operation itself dies half done."""

    name = "kill-mid-op"
    POLL_S = 0.002
    MAX_DELAY_S = 0.02

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        if not ctx.target_ops:
            raise NemesisError("kill-mid-op: the workload names no op to kill a client during (kill_during)")
        deadline = time.monotonic() + ctx.fault_seconds
        while time.monotonic() < deadline:
            busy = [c for c in ctx.cluster.clients() if c.op in ctx.target_ops]
            if busy:
                c = ctx.rng.choice(busy)
                time.sleep(ctx.rng.uniform(0, self.MAX_DELAY_S))
                still = any(x.process == c.process and x.op == c.op for x in ctx.cluster.clients())
                if still and ctx.cluster.crash_client(c.process):
                    self.killed_process = c.process
                    return {"target": "client", "process": c.process, "node": c.node, "pid": c.pid, "op": c.op}
            time.sleep(self.POLL_S)
        raise NemesisError(f"kill-mid-op: no client ran {', '.join(sorted(ctx.target_ops))} within the fault's window")
