"""S3 fault proxy: sits between the engine clients and the S3 server.

Run as its own process (`python -m harness.s3proxy.server --upstream URL --port 0`),
so that the clients' request load cannot stall the harness that steers it.
Plain HTTP/1.1 on asyncio streams, keep-alive on both sides. Each request is
attributed to a client by the access key id of its SigV4 signature (the
harness hands every client its own, see harness/run/storage.py), classified by
kind (GET, PUT, LIST, HEAD, DELETE, POST) and path class (commit,
checkpoint, log, data), and then meets the fault rules that match it.

The control API lives under the reserved path /__dj__/ on the same port (no
S3 bucket name can contain an underscore); harness/s3proxy/client.py wraps it.

Modules: `s3` (what a request is), `http` (HTTP/1.1 on asyncio streams),
`upstream` (the S3 server behind, SigV4 re-signing), `rules` (fault rules
and holds), and this one: the proxy, its control API and `main`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.s3proxy.http import _REASONS, Headers, Request, Response, _Dropped, _reset, read_request
from harness.s3proxy.rules import _DEFAULT_TARGETS, Hold, ReqInfo, Rule, Target, _validate
from harness.s3proxy.s3 import (
    CLIENT_IDLE_TIMEOUT,
    CONTROL_PREFIX,
    ERROR_CODES,
    MAX_HEADER_BYTES,
    access_key_id,
    dynamodb_action,
    dynamodb_error,
    filter_listing,
    filter_young,
    hidden_by_pin,
    log_version,
    parse_identity,
    path_class,
    request_kind,
    s3_error,
    split_target,
)
from harness.s3proxy.upstream import Resigner, Upstream, _Unsignable

# --- the proxy -----------------------------------------------------------------------

MAX_TRACKED_KEYS = 200_000
MAX_STALE_S = 3600.0


class Proxy:
    def __init__(self, upstream: Upstream, seed: int | None = None):
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.rules: dict[int, Rule] = {}
        self.next_id = 1
        self.holds: dict[int, Hold] = {}
        self.hold_added = asyncio.Event()
        self.healed = asyncio.Event()  # set and replaced at each heal/rule removal: wakes blackholed requests
        self.flushed = asyncio.Event()  # set and replaced at each heal only: ends late answers
        # When each key was first written through the proxy (monotonic): a
        # stale listing hides the young ones, so it must see every write,
        # also those made before its rule was armed.
        self.put_at: dict[tuple[str, str], float] = {}
        self.registry: dict[str, tuple[str | None, str]] = {}
        self.stats: dict[str, Any] = {
            "requests": 0,
            "clients": {},
            "faults": {},
            "upstream_errors": 0,
            "if_none_match_puts": 0,
            # Time the store took per request kind and path class: where an
            # op's time goes on S3 (bench-storage --profile reads it).
            "store": {},
        }
        self.started = time.time()

    # identity and bookkeeping

    def identify(self, req: Request) -> ReqInfo:
        bucket, key, query = split_target(req.target)
        akid = access_key_id(req.headers, query)
        node, client = self.registry.get(akid) or parse_identity(akid)
        action = dynamodb_action(req.headers)
        if action is not None:
            return ReqInfo(akid, node, client, action, "coordinator", bucket, key)
        kind = request_kind(req.method, key, query)
        pc = path_class(query.get("prefix", [""])[0] if kind == "LIST" else key)
        if kind == "LIST" and pc == "log":
            pc = "commit"  # listing the log is how clients discover commits
        return ReqInfo(akid, node, client, kind, pc, bucket, key)

    @staticmethod
    def _error(info: ReqInfo, status: int, message: str, req: Request) -> Response:
        if info.path_class == "coordinator":
            return dynamodb_error(status, message)
        return s3_error(status, ERROR_CODES[status], message, req.target)

    def _count(self, info: ReqInfo, req: Request) -> None:
        self.stats["requests"] += 1
        c = self.stats["clients"].setdefault(
            info.key, {"node": info.node, "client": info.client, "requests": 0, "kinds": {}, "path_classes": {}}
        )
        c["requests"] += 1
        c["kinds"][info.kind] = c["kinds"].get(info.kind, 0) + 1
        c["path_classes"][info.path_class] = c["path_classes"].get(info.path_class, 0) + 1
        if info.kind == "PUT" and req.headers.get("if-none-match") is not None:
            self.stats["if_none_match_puts"] += 1

    def _fires(self, rule: Rule) -> bool:
        count = rule.params.get("count")
        if count is not None and rule.applied >= count:
            return False
        return self.rng.random() < float(rule.params.get("rate", 1.0))

    def _applied(self, rule: Rule) -> None:
        rule.applied += 1
        self.stats["faults"][rule.kind] = self.stats["faults"].get(rule.kind, 0) + 1

    def matching(self, info: ReqInfo, kind: str, req: Request | None = None) -> list[Rule]:
        """The rules of `kind` for this request; a rule with body_contains
        only for a request whose body holds that text (e.g. a coordinator's
        UpdateItem that ratifies a commit, not one that clears a list)."""
        return [
            r
            for r in self.rules.values()
            if r.kind == kind
            and r.target.matches(info)
            and (
                not r.params.get("body_contains")
                or (req is not None and r.params["body_contains"].encode() in (req.body or b""))
            )
        ]

    # the request path

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                req = await asyncio.wait_for(read_request(reader, writer), CLIENT_IDLE_TIMEOUT)
                if req is None:
                    break
                if req.target.startswith(CONTROL_PREFIX):
                    resp = await self.control(req)
                else:
                    resp = await self.serve(req)
                writer.write(resp.encode(keep_alive=not req.wants_close()))
                await writer.drain()
                if req.wants_close():
                    break
        except _Dropped:
            _reset(writer)
            return
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            pass
        try:
            writer.close()
        except Exception:
            pass

    async def serve(self, req: Request) -> Response:
        info = self.identify(req)
        self._count(info, req)
        for rule in self.matching(info, "partition", req):
            if self._fires(rule):
                self._applied(rule)
                await self._blackhole(rule)
                raise _Dropped()
        for rule in self.matching(info, "reset", req):
            if self._fires(rule):
                self._applied(rule)
                raise _Dropped()
        for rule in self.matching(info, "error", req):
            if self._fires(rule):
                self._applied(rule)
                status = int(rule.params.get("status", 500))
                return self._error(info, status, "injected by delta-jepsen s3proxy", req)
        delay = 0.0
        for rule in self.matching(info, "latency", req):
            if self._fires(rule):
                self._applied(rule)
                delay += (
                    float(rule.params.get("ms", 0)) + self.rng.uniform(0, float(rule.params.get("jitter_ms", 0)))
                ) / 1000
        if delay:
            await asyncio.sleep(delay)
        pin = self._pin(info)
        if pin is not None and info.kind in ("GET", "HEAD") and hidden_by_pin(info.object_key, pin):
            return self._not_found(info, req)
        for rule in self.matching(info, "strip-if-none-match", req):
            if req.headers.get("if-none-match") is not None and self._fires(rule):
                self._applied(rule)
                req.headers.remove("if-none-match")
        # A hold may name the log version it waits for (a client reads older
        # commits with the same method before it makes its own).
        hold = next(
            (
                r
                for r in self.matching(info, "hold", req)
                if r.params.get("version") in (None, log_version(info.object_key)) and self._fires(r)
            ),
            None,
        )
        if hold is not None:
            return await self._held(hold, info, req)
        resp = await self._forward(req, info)
        applied = 200 <= resp.status < 300
        if applied:
            self._note_write(info, req)
        for rule in self.matching(info, "ambiguous", req):
            if self._fires(rule):
                self._applied(rule)
                raise _Dropped()  # the write applied upstream; its answer is lost
        if applied:
            resp = await self._after_applied(info, req, resp)
        if pin is not None and resp.status == 200:
            resp = self._apply_pin(pin, info, req, resp)
        if info.kind == "LIST" and resp.status == 200:
            resp = self._stale_list(info, resp)
        return resp

    def _note_write(self, info: ReqInfo, req: Request) -> None:
        if not info.object_key:
            return
        where = (info.bucket, info.object_key)
        if info.kind == "DELETE":
            self.put_at.pop(where, None)  # written again later, it is young again
            return
        # A multipart upload's object exists once completed (POST ?uploadId),
        # not at its first part (PUT ?partNumber&uploadId) or its initiation.
        multipart = "uploadId=" in req.target
        if (info.kind == "PUT" and not multipart) or (info.kind == "POST" and multipart):
            if len(self.put_at) >= MAX_TRACKED_KEYS:
                self._forget_old_writes()
            self.put_at.setdefault(where, time.monotonic())

    def _forget_old_writes(self) -> None:
        """Keys older than any stale listing may hide: a key forgotten reads
        as old, which is what it is."""
        horizon = time.monotonic() - MAX_STALE_S
        self.put_at = {k: t for k, t in self.put_at.items() if t > horizon}

    async def _after_applied(self, info: ReqInfo, req: Request, resp: Response) -> Response:
        """A request the store applied, answered late and/or with an error: the
        client cannot tell it from one that never took effect. Only a
        request that succeeded upstream counts toward rate and count, so
        "the first N" are N writes that did happen."""
        late = next((r for r in self.matching(info, "applied-late", req) if self._fires(r)), None)
        if late is not None:
            self._applied(late)
            await self._late(float(late.params["ms"]) / 1000)
            if late.params.get("then", "send") == "reset":
                raise _Dropped()
        for rule in self.matching(info, "applied-error", req):
            if self._fires(rule):
                self._applied(rule)
                status = int(rule.params.get("status", 500))
                return self._error(info, status, "injected by delta-jepsen s3proxy (applied)", req)
        return resp

    async def _late(self, seconds: float) -> None:
        """Hold an answer for `seconds`, or until a heal: an answer already
        owed outlives its rule's removal (the client is waiting on it), but
        a heal leaves nothing pending."""
        ev = self.flushed
        try:
            await asyncio.wait_for(ev.wait(), seconds)
        except TimeoutError:
            pass

    def _stale_list(self, info: ReqInfo, resp: Response) -> Response:
        """A listing that has not caught up with the newest writes, while a
        GET of them succeeds: an eventually consistent store's LIST."""
        for rule in self.matching(info, "stale-list"):
            if not self._fires(rule):
                continue
            cutoff = time.monotonic() - float(rule.params["ms"]) / 1000
            body, dropped = filter_young(resp.body, info.bucket, self.put_at, cutoff)
            if dropped:
                self._applied(rule)
                self.stats["stale_list_hidden"] = self.stats.get("stale_list_hidden", 0) + dropped
                return Response(resp.status, resp.reason, resp.headers, body)
        return resp

    async def _forward(self, req: Request, info: ReqInfo) -> Response:
        t0 = time.monotonic()
        try:
            resp = await self.upstream.send(req)
            self._timed(info, time.monotonic() - t0)
            return resp
        except _Unsignable as e:
            return s3_error(501, "NotImplemented", str(e), req.target)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError) as e:
            self.stats["upstream_errors"] += 1
            # A request the upstream may or may not have applied: the client
            # must see an indeterminate failure, not a made-up S3 answer.
            raise _Dropped() from e

    def _timed(self, info: ReqInfo, seconds: float) -> None:
        cell = self.stats["store"].setdefault(f"{info.kind} {info.path_class}", {"n": 0, "ms": 0.0})
        cell["n"] += 1
        cell["ms"] = round(cell["ms"] + seconds * 1000, 3)

    async def _blackhole(self, rule: Rule) -> None:
        """Wait until the rule is removed or the proxy healed (or max_s)."""
        max_s = float(rule.params.get("max_s", 3600))
        deadline = time.monotonic() + max_s
        while rule.id in self.rules and time.monotonic() < deadline:
            ev = self.healed
            try:
                await asyncio.wait_for(ev.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break

    async def _held(self, rule: Rule, info: ReqInfo, req: Request) -> Response:
        loop = asyncio.get_running_loop()
        h = Hold(self.next_id, rule.id, info, time.monotonic(), loop.create_future(), loop.create_future())
        self.next_id += 1
        if rule.params.get("after"):
            return await self._held_answer(rule, h, info, req)
        self._applied(rule)
        if await self._until_released(h) == "drop":
            if not h.done.done():
                h.done.set_result(None)
            raise _Dropped()
        try:
            resp = await self._forward(req, info)
        except BaseException:
            if not h.done.done():
                h.done.set_result(None)
            raise
        if not h.done.done():
            h.done.set_result(resp.status)
        return resp

    async def _held_answer(self, rule: Rule, h: Hold, info: ReqInfo, req: Request) -> Response:
        """A hold after the store applied the request: its answer waits, so
        the writer is stuck between a write that took effect and knowing it
        (e.g. a commit the coordinator ratified, not yet backfilled). A
        request the store refused (a condition that failed) took no effect:
        it is answered at once, and the hold waits for the next."""
        resp = await self._forward(req, info)
        if not 200 <= resp.status < 300:
            return resp
        self._applied(rule)
        h.done.set_result(resp.status)
        if await self._until_released(h) == "drop":
            raise _Dropped()
        return resp

    async def _until_released(self, h: Hold) -> str:
        """List the hold, wait for its release: "forward" or "drop"."""
        self.holds[h.id] = h
        self.hold_added.set()
        self.hold_added = asyncio.Event()
        try:
            return await h.release
        finally:
            self.holds.pop(h.id, None)

    def _pin(self, info: ReqInfo) -> int | None:
        versions = [int(r.params["version"]) for r in self.matching(info, "pin")]
        return min(versions) if versions else None

    def _not_found(self, info: ReqInfo, req: Request) -> Response:
        for r in self.matching(info, "pin"):
            self._applied(r)
            break
        if info.kind == "HEAD":
            return Response(404, "Not Found", Headers([("Content-Type", "application/xml")]), b"", no_body=True)
        return s3_error(404, "NoSuchKey", "The specified key does not exist.", req.target)

    def _apply_pin(self, pin: int, info: ReqInfo, req: Request, resp: Response) -> Response:
        if info.kind == "LIST":
            body, dropped = filter_listing(resp.body, pin)
            if dropped:
                self._pin_applied(info)
                return Response(resp.status, resp.reason, resp.headers, body)
        elif info.kind == "GET" and info.object_key.endswith("_delta_log/_last_checkpoint"):
            try:
                points_to = int(json.loads(resp.body)["version"])
            except (ValueError, KeyError, TypeError):
                return resp
            if points_to > pin:
                return self._not_found(info, req)
        return resp

    def _pin_applied(self, info: ReqInfo) -> None:
        for r in self.matching(info, "pin"):
            self._applied(r)
            break

    # control API

    def add_rule(self, kind: str, target: dict[str, Any] | None, params: dict[str, Any] | None) -> Rule:
        target = {**_DEFAULT_TARGETS.get(kind, {}), **(target or {})}
        params = dict(params or {})
        if kind == "hold":
            params.setdefault("count", 1)  # "the next commit PUT"
        _validate(kind, target, params)
        rule = Rule(self.next_id, kind, Target(**target), params)
        self.next_id += 1
        self.rules[rule.id] = rule
        return rule

    def remove_rule(self, rule_id: int) -> bool:
        found = self.rules.pop(rule_id, None) is not None
        self._wake()
        return found

    def _wake(self) -> None:
        self.healed.set()
        self.healed = asyncio.Event()

    def heal(self) -> dict[str, Any]:
        """Every rule removed; held requests forwarded in the order they were
        held; blackholed requests reset."""
        n = len(self.rules)
        self.rules.clear()
        held = sorted(self.holds.values(), key=lambda h: h.id)
        for h in held:
            if not h.release.done():
                h.release.set_result("forward")
        self._wake()
        self.flushed.set()
        self.flushed = asyncio.Event()
        return {"removed": n, "released": [h.id for h in held]}

    async def wait_holds(self, client: str | None, wait: float) -> list[Hold]:
        deadline = time.monotonic() + wait
        while True:
            hs = [
                h
                for h in sorted(self.holds.values(), key=lambda h: h.id)
                if client is None or client in (h.info.client, h.info.key)
            ]
            if hs or time.monotonic() >= deadline:
                return hs
            ev = self.hold_added
            try:
                await asyncio.wait_for(ev.wait(), deadline - time.monotonic())
            except TimeoutError:
                pass

    async def release(self, hold_id: int, drop: bool, wait: float) -> dict[str, Any]:
        h = self.holds.get(hold_id)
        if h is None or h.release.done():
            raise KeyError(f"no pending hold {hold_id}")
        h.release.set_result("drop" if drop else "forward")
        # Wait for the upstream's answer: releasing A then B forwards A's
        # request, and sees it applied, before B's is sent.
        try:
            status = await asyncio.wait_for(asyncio.shield(h.done), wait)
        except TimeoutError:
            return {"id": hold_id, "status": None, "timeout": True}
        return {"id": hold_id, "status": status}

    async def control(self, req: Request) -> Response:
        parts = urlsplit(req.target)
        path = parts.path[len(CONTROL_PREFIX) :].strip("/")
        query = parse_qs(parts.query)
        try:
            body = json.loads(req.body) if req.body else {}
            result = await self._control(req.method, path.split("/"), query, body)
            status = 200
        except KeyError as e:
            result, status = {"error": str(e.args[0] if e.args else e)}, 404
        except (ValueError, TypeError) as e:
            result, status = {"error": str(e)}, 400
        return Response(
            status,
            _REASONS.get(status, "OK"),
            Headers([("Content-Type", "application/json")]),
            json.dumps(result).encode(),
        )

    async def _control(self, method: str, path: list[str], query: dict[str, list[str]], body: Any) -> Any:
        route = (method, path[0] if path else "")
        if route == ("GET", "health"):
            return {"ok": True, "upstream": self.upstream.url, "uptime": round(time.time() - self.started, 3)}
        if route == ("GET", "faults"):
            return {"faults": [r.to_json() for r in self.rules.values()]}
        if route == ("POST", "faults"):
            if not isinstance(body, dict) or "kind" not in body:
                raise ValueError("body must be {kind, target, params}")
            return self.add_rule(body["kind"], body.get("target"), body.get("params")).to_json()
        if route == ("DELETE", "faults") and len(path) == 2:
            if not self.remove_rule(int(path[1])):
                raise KeyError(f"no fault rule {path[1]}")
            return {"removed": int(path[1])}
        if route == ("POST", "heal"):
            return self.heal()
        if route == ("GET", "stats"):
            return {**self.stats, "rules": {r.id: r.applied for r in self.rules.values()}, "held": len(self.holds)}
        if route == ("GET", "holds"):
            client = query.get("client", [None])[0]
            hs = await self.wait_holds(client, min(float(query.get("wait", ["0"])[0]), 120.0))
            return {"holds": [h.to_json() for h in hs]}
        if route == ("POST", "holds") and len(path) == 3 and path[2] in ("release", "drop"):
            wait = float((body or {}).get("wait", 30.0))
            return await self.release(int(path[1]), path[2] == "drop", wait)
        if route == ("POST", "clients"):
            for key, ident in (body or {}).items():
                self.registry[key] = (ident.get("node"), str(ident.get("client", key)))
            return {"registered": sorted(self.registry)}
        raise KeyError(f"no such control endpoint: {method} {CONTROL_PREFIX}{'/'.join(path)}")


async def run_server(
    upstream_url: str, port: int, seed: int | None, resign: Resigner | None, dechunk: bool = False
) -> None:
    proxy = Proxy(Upstream(upstream_url, resign, dechunk), seed)
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", port, limit=MAX_HEADER_BYTES, backlog=512)
    bound = server.sockets[0].getsockname()[1]
    # The launcher waits for this line (harness/s3proxy_client.py).
    print(f"s3proxy listening on 127.0.0.1:{bound} upstream {upstream_url}", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.s3proxy.server", description=__doc__.split("\n")[0])
    p.add_argument("--upstream", required=True, help="S3 endpoint, http://host:port")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--seed", type=int, default=None, help="seed for fault rates and jitter")
    p.add_argument(
        "--resign",
        action="store_true",
        help="re-sign requests with DJ_PROXY_UPSTREAM_KEY / _SECRET / _TOKEN from the environment",
    )
    p.add_argument(
        "--dechunk",
        action="store_true",
        help="decode aws-chunked (chunk-signed) uploads into plain bodies, for a store that refuses them",
    )
    args = p.parse_args(argv)
    resign = None
    if args.resign:
        key, secret = os.environ.get("DJ_PROXY_UPSTREAM_KEY"), os.environ.get("DJ_PROXY_UPSTREAM_SECRET")
        if not key or not secret:
            print("s3proxy: --resign needs DJ_PROXY_UPSTREAM_KEY and DJ_PROXY_UPSTREAM_SECRET", file=sys.stderr)
            return 2
        resign = Resigner(key, secret, os.environ.get("DJ_PROXY_UPSTREAM_TOKEN"))
    try:
        Upstream(args.upstream)
    except ValueError as e:
        print(f"s3proxy: {e}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run_server(args.upstream, args.port, args.seed, resign, args.dechunk))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
