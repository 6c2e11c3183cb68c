"""kill: `kill -9` of a client worker or of an engine server node.

A killed worker's op becomes `info` (crash) and the runner continues its slot
under a new process id, so there is nothing to restart. A killed server node
(Sail) is started again by `stop`, on a new port: the node's url changes and
workers spawned from then on connect to the new server.
"""

from __future__ import annotations

from typing import Any

from nemeses.base import Nemesis, NemesisContext, NemesisError


class KillNemesis(Nemesis):
    name = "kill"

    def __init__(self) -> None:
        self.killed_node: str | None = None
        self.killed_process: int | None = None

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        cl = ctx.cluster
        targets: list[tuple[str, Any]] = [("client", c) for c in cl.clients()]
        targets += [("node", n) for n in cl.server_nodes() if cl.server_alive(n)]
        if not targets:
            raise NemesisError("nothing to kill: no live client worker or server node")
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
