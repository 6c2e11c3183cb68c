"""Storage faults, all through the S3 fault proxy (harness/s3proxy.py).

- s3-errors: 500 InternalError / 503 SlowDown for a share of requests, not
  applied upstream (a definite failure of that request).
- latency: added delay, with jitter.
- ambiguous: commit PUTs (and a commit coordinator's ratifying UpdateItems)
  are applied upstream, but their answer is lost (the client sees a
  reset): the writer cannot know whether it committed.
- ambiguous-5xx: commit PUTs (and ratifying UpdateItems) are applied
  upstream, then answered 500 or 503 (in S3's or DynamoDB's words): an
  error the client may retry, although its commit is in the log.
- ambiguous-late: commit PUTs (and ratifying UpdateItems) are applied
  upstream, and their answer is held past any client timeout (until the
  heal): the writer times out.
- stale-list: LISTs omit the keys first written less than a few seconds
  ago while GETs find them, as an eventually consistent store's listing
  does (a store the Delta protocol does not support: it asks for
  consistent listing).
- partition: a node (all its clients) or one client is blackholed: requests
  get no answer until the fault is removed.
- unsafe-put: If-None-Match is stripped from commit PUTs, so a commit may
  overwrite another writer's commit of the same version (the hazard
  put-if-absent exists to prevent, spec C1/C7).

Faults are rules in the proxy: `stop` removes the rule, heal removes all.
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from nemeses.base import Nemesis, NemesisContext, NemesisError


class ProxyNemesis(Nemesis):
    needs_proxy = True
    kind: str = ""

    def __init__(self) -> None:
        self.rule_id: int | None = None

    def validate(self, storage_kind: str) -> None:
        if storage_kind == "local":
            raise HarnessError(
                f"nemesis {self.name!r} needs S3 storage (--storage s3 or external-s3), not --storage local"
            )

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        """(target, params) of the proxy rule this fault adds."""
        return {}, {}

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        if ctx.proxy is None:
            raise NemesisError(f"{self.name}: no S3 fault proxy in this run")
        target, params = self.rule(ctx)
        self.rule_id = ctx.proxy.add_fault(self.kind, target, **params)
        return {"rule": self.rule_id, "kind": self.kind, "target": target, "params": params}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        rid, self.rule_id = self.rule_id, None
        if ctx.proxy is None or rid is None:
            return {"rule": None}
        applied = next((r["applied"] for r in ctx.proxy.faults() if r["id"] == rid), None)
        try:
            ctx.proxy.remove_fault(rid)
        except HarnessError:
            return {"rule": rid, "removed": False}
        return {"rule": rid, "removed": True, "applied": applied}

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        self.rule_id = None
        if ctx.proxy is None:
            return None
        res = ctx.proxy.heal()
        return res if res.get("removed") or res.get("released") else None


# Where a commit takes effect: the PUT of the commit file, or, for an engine
# whose commits a commit coordinator ratifies, the coordinator's UpdateItem
# (the commit file's PUT is then its backfill).
COMMIT_POINTS = {"method": ["PUT", "UpdateItem"], "path_class": ["commit", "coordinator"]}


def _node_or_all(ctx: NemesisContext) -> dict[str, Any]:
    nodes = ctx.cluster.nodes()
    if nodes and ctx.rng.random() < 0.5:
        return {"node": ctx.rng.choice(nodes)}
    return {}


class S3ErrorsNemesis(ProxyNemesis):
    name = "s3-errors"
    kind = "error"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        return _node_or_all(ctx), {"status": ctx.rng.choice([500, 503]), "rate": round(ctx.rng.uniform(0.2, 0.5), 2)}


class LatencyNemesis(ProxyNemesis):
    """latency: every request of one node (or of all) is delayed by 50, 200
    or 500 ms, plus up to 200 ms of jitter, then passed on unchanged: slow
    commits widen every race window without failing anything."""

    name = "latency"
    kind = "latency"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        return _node_or_all(ctx), {"ms": ctx.rng.choice([50, 200, 500]), "jitter_ms": 200}


class AmbiguousNemesis(ProxyNemesis):
    name = "ambiguous"
    kind = "ambiguous"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        return dict(COMMIT_POINTS), {"rate": 0.5}


class PartitionNemesis(ProxyNemesis):
    name = "partition"
    kind = "partition"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        # A Sail server holds one storage identity for all its sessions: it
        # can only be cut off whole. A delta-rs worker has its own.
        servers = set(ctx.cluster.server_nodes())
        clients = [c for c in ctx.cluster.clients() if c.node not in servers]
        nodes = ctx.cluster.nodes()
        if clients and (not nodes or ctx.rng.random() < 0.5):
            c = ctx.rng.choice(clients)
            target: dict[str, Any] = {"client": str(c.process)}
        elif nodes:
            target = {"node": ctx.rng.choice(nodes)}
        else:
            raise NemesisError("nothing to partition: no node and no client")
        # Blackholed requests are answered (reset) at the latest a little
        # after the fault should have ended, even if nobody removes it.
        return target, {"max_s": round(ctx.fault_seconds * 2 + 5, 1)}


class UnsafePutNemesis(ProxyNemesis):
    name = "unsafe-put"
    kind = "strip-if-none-match"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"method": "PUT", "path_class": "commit"}, {}


class Ambiguous5xxNemesis(ProxyNemesis):
    name = "ambiguous-5xx"
    kind = "applied-error"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        target = {**COMMIT_POINTS, **_node_or_all(ctx)}
        return target, {"status": ctx.rng.choice([500, 503]), "rate": 0.5}


# Longer than any client waits for a PUT (delta-rs's object store timeout is
# the run's --op-timeout, 30 s by default): a late answer is a timeout. The
# heal ends what is still held, so a run never waits this long.
LATE_MS = 120_000


class AmbiguousLateNemesis(ProxyNemesis):
    name = "ambiguous-late"
    kind = "applied-late"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        target = {**COMMIT_POINTS, **_node_or_all(ctx)}
        # One held answer per fault: each costs its client a whole op timeout.
        return target, {"ms": LATE_MS, "then": "reset", "count": 1}


class StaleListNemesis(ProxyNemesis):
    name = "stale-list"
    kind = "stale-list"

    def rule(self, ctx: NemesisContext) -> tuple[dict[str, Any], dict[str, Any]]:
        # path_class commit: listings of the log, which is where clients
        # find the latest version.
        target = {"method": "LIST", "path_class": "commit", **_node_or_all(ctx)}
        return target, {"ms": ctx.rng.choice([1000, 3000, 5000])}
