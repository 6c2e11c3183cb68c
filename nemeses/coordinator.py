"""Faults of a commit coordinator (delta-spark's coordinated commits, whose
DynamoDB requests pass through the S3 fault proxy on the embedded store).

- coordinator-down: the coordinator is unreachable (its requests get no
  answer until the fault ends) for one node or for all: no commit can be
  ratified, reads of unbackfilled commits stall.
- kill-after-ratify: a node's JVM is killed (SIGKILL) right after the
  coordinator ratified one of its commits and before the answer reached it,
  so before it backfilled the commit: the version exists only as a staged
  file the coordinator names, until another writer backfills it. The node is
  started again when the fault stops.

The ambiguous faults (nemeses.s3: ambiguous, ambiguous-5xx, ambiguous-late)
act on the coordinator's ratifying UpdateItems as on commit PUTs.
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from nemeses.base import NemesisContext, NemesisError
from nemeses.s3 import ProxyNemesis, _node_or_all

# Only an UpdateItem that ratifies a commit adds to the table's list of
# commits; the one that clears the list after a backfill puts an empty one.
RATIFY_MARK = '"ADD"'
COORDINATOR = {"path_class": "coordinator"}


class _CoordinatorNemesis(ProxyNemesis):
    def validate(self, storage_kind: str) -> None:
        # Only the embedded moto serves the coordinator's DynamoDB behind
        # the proxy; elsewhere the coordinator has a server of its own.
        if storage_kind != "s3":
            raise HarnessError(f"nemesis {self.name!r} needs --storage s3 (the embedded store serves the coordinator)")


class CoordinatorDownNemesis(_CoordinatorNemesis):
    name = "coordinator-down"
    kind = "partition"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        return {**COORDINATOR, **_node_or_all(ctx)}, {"max_s": round(ctx.fault_seconds * 2 + 5, 1)}


class KillAfterRatifyNemesis(_CoordinatorNemesis):
    name = "kill-after-ratify"
    kind = "hold"

    def __init__(self) -> None:
        super().__init__()
        self.killed_node: str | None = None

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        if ctx.proxy is None:
            raise NemesisError(f"{self.name}: no S3 fault proxy in this run")
        cl = ctx.cluster
        nodes = [n for n in cl.server_nodes() if cl.server_alive(n)]
        if not nodes:
            raise NemesisError("nothing to kill: no live server node")
        # The next commit any node gets ratified: forwarded first, then its
        # answer held, so the coordinator has ratified it while the node
        # still waits to hear so. Its node is the one killed.
        target = {**COORDINATOR, "method": "UpdateItem", "node": nodes}
        self.rule_id = ctx.proxy.add_fault(self.kind, target, after=True, count=1, body_contains=RATIFY_MARK)
        # A whole cycle: on a loaded machine a node's next commit may take a while.
        wait = 2 * ctx.fault_seconds
        holds = ctx.proxy.holds(wait=wait)
        ctx.proxy.remove_fault(self.rule_id)
        self.rule_id = None
        if not holds:
            raise NemesisError(f"no commit of {', '.join(nodes)} was ratified within {wait:g} s")
        held = holds[0]
        node = held["node"]
        pid = cl.kill_server(node)
        self.killed_node = node
        ctx.proxy.drop(held["id"])  # the JVM is gone; its connection with it
        return {"target": "node", "node": node, "pid": pid, "signal": "SIGKILL", "held": held}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        node, self.killed_node = self.killed_node, None
        if node is None:
            return {"restarted": None}
        return {"target": "node", "node": node, **ctx.cluster.restart_server(node)}

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        healed = super().heal(ctx)
        self.killed_node = None
        dead = [n for n in ctx.cluster.server_nodes() if not ctx.cluster.server_alive(n)]
        if not dead:
            return healed
        return {**(healed or {}), "restarted": {n: ctx.cluster.restart_server(n) for n in dead}}
