"""S3 fault proxy: sits between the engine clients and the S3 server.

Run as its own process (`python -m harness.s3proxy.server --upstream URL --port 0`),
so that the clients' request load cannot stall the harness that steers it.
Plain HTTP/1.1 on asyncio streams, keep-alive on both sides. Each request is
attributed to a client by the access key id of its SigV4 signature (the
harness hands every client its own, see harness/storage.py), classified by
kind (GET, PUT, LIST, HEAD, DELETE, POST) and path class (commit,
checkpoint, log, data), and then meets the fault rules that match it.

The control API lives under the reserved path /__dj__/ on the same port (no
S3 bucket name can contain an underscore); harness/s3proxy_client.py wraps it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

CONTROL_PREFIX = "/__dj__/"
FAULT_KINDS = ("latency", "error", "reset", "ambiguous", "partition", "strip-if-none-match", "hold", "pin")
REQUEST_KINDS = ("GET", "PUT", "LIST", "HEAD", "DELETE", "POST")
PATH_CLASSES = ("commit", "checkpoint", "log", "data", "bucket")
ERROR_CODES = {500: "InternalError", 503: "SlowDown"}
UPSTREAM_CONNECT_TIMEOUT = 5.0
UPSTREAM_READ_TIMEOUT = 60.0
CLIENT_IDLE_TIMEOUT = 300.0
MAX_HEADER_BYTES = 64 * 1024
# Hop-by-hop: never forwarded as they came; the proxy frames each side itself.
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "proxy-connection"}

_COMMIT_RX = re.compile(r"(?:^|/)_delta_log/(\d{20})\.json$")
_VERSIONED_LOG_RX = re.compile(r"(?:^|/)_delta_log/(\d{20})\.")
_CREDENTIAL_RX = re.compile(r"Credential=([^/,\s]+)/")
_CONTENTS_RX = re.compile(rb"<Contents>.*?</Contents>", re.S)
_KEY_RX = re.compile(rb"<Key>(.*?)</Key>", re.S)


# --- classification (pure) ---------------------------------------------------


def path_class(key: str) -> str:
    """commit (`_delta_log/<20 digits>.json`), checkpoint (`*.checkpoint*.parquet`,
    `_last_checkpoint`), log (other `_delta_log/` files: .crc, temp commits)
    or data."""
    if not key:
        return "bucket"
    if "_delta_log/" in key or key.endswith("_delta_log"):
        name = key.rsplit("/", 1)[-1]
        if _COMMIT_RX.search(key):
            return "commit"
        if name == "_last_checkpoint" or (".checkpoint" in name and name.endswith(".parquet")):
            return "checkpoint"
        return "log"
    return "data"


def log_version(key: str) -> int | None:
    """The table version a versioned `_delta_log/` file belongs to (commit,
    checkpoint, crc), else None."""
    m = _VERSIONED_LOG_RX.search(key)
    return int(m.group(1)) if m else None


def split_target(target: str) -> tuple[str, str, dict[str, list[str]]]:
    """(bucket, key, query) of a path-style request target."""
    parts = urlsplit(target)
    path = unquote(parts.path).lstrip("/")
    bucket, _, key = path.partition("/")
    return bucket, key, parse_qs(parts.query, keep_blank_values=True)


def request_kind(method: str, key: str, query: dict[str, list[str]]) -> str:
    if method == "GET" and not key and ("list-type" in query or "prefix" in query or not query):
        return "LIST"
    return method


def access_key_id(headers: Headers, query: dict[str, list[str]]) -> str:
    """The SigV4 access key id (header or presigned query); '-' if unsigned."""
    m = _CREDENTIAL_RX.search(headers.get("authorization") or "")
    if m:
        return m.group(1)
    cred = query.get("X-Amz-Credential", [""])[0]
    return cred.split("/", 1)[0] if cred else "-"


def parse_identity(key: str) -> tuple[str | None, str]:
    """(node, client) a harness access key id encodes: `dj-<node>-<client>`
    (a delta-rs process on a node), `dj-<node>` (a Sail server: one identity
    per node) or `dj-<client>`. Other keys are their own client."""
    if not key.startswith("dj-"):
        return None, key
    rest = key[3:]
    m = re.fullmatch(r"(n\d+)-(.+)", rest)
    if m:
        return m.group(1), m.group(2)
    if re.fullmatch(r"n\d+", rest):
        return rest, rest
    return None, rest


def hidden_by_pin(key: str, version: int) -> bool:
    v = log_version(key)
    return v is not None and v > version


def filter_listing(body: bytes, version: int) -> tuple[bytes, int]:
    """A ListObjects response without the log files of versions > `version`,
    and without `_last_checkpoint` when a hidden checkpoint shows it points
    past the pin. Returns (body, entries dropped)."""
    entries = _CONTENTS_RX.findall(body)
    keys = []
    for e in entries:
        m = _KEY_RX.search(e)
        keys.append(unquote(m.group(1).decode()) if m else "")
    drop = {i for i, k in enumerate(keys) if hidden_by_pin(k, version)}
    if any(path_class(keys[i]) == "checkpoint" for i in drop):
        drop |= {i for i, k in enumerate(keys) if k.endswith("_delta_log/_last_checkpoint")}
    if not drop:
        return body, 0
    dropped = [entries[i] for i in sorted(drop)]
    for e in dropped:
        body = body.replace(e, b"", 1)
    m = re.search(rb"<KeyCount>(\d+)</KeyCount>", body)
    if m:
        body = body[: m.start(1)] + str(int(m.group(1)) - len(dropped)).encode() + body[m.end(1) :]
    return body, len(dropped)


def s3_error(status: int, code: str, message: str, resource: str = "") -> Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message><Resource>{resource}</Resource>"
        f"<RequestId>dj-proxy</RequestId></Error>"
    ).encode()
    return Response(status, _REASONS.get(status, "Error"), Headers([("Content-Type", "application/xml")]), body)


_REASONS = {
    200: "OK",
    404: "Not Found",
    400: "Bad Request",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


# --- HTTP/1.1 ------------------------------------------------------------------


class Headers:
    """Ordered, case-preserving headers with case-insensitive lookup."""

    def __init__(self, items: list[tuple[str, str]] | None = None):
        self.items = list(items or [])

    def get(self, name: str, default: str | None = None) -> str | None:
        n = name.lower()
        for k, v in self.items:
            if k.lower() == n:
                return v
        return default

    def remove(self, name: str) -> bool:
        n = name.lower()
        before = len(self.items)
        self.items = [(k, v) for k, v in self.items if k.lower() != n]
        return len(self.items) != before

    def set(self, name: str, value: str) -> None:
        self.remove(name)
        self.items.append((name, value))

    def encode(self) -> bytes:
        return b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in self.items)


@dataclass
class Request:
    method: str
    target: str
    headers: Headers
    body: bytes
    chunked: bool = False  # framing the client chose; kept upstream (signed headers may name it)

    def wants_close(self) -> bool:
        return (self.headers.get("connection") or "").lower() == "close"


@dataclass
class Response:
    status: int
    reason: str
    headers: Headers
    body: bytes
    no_body: bool = False  # HEAD: Content-Length describes the object, no bytes follow

    def encode(self, keep_alive: bool = True) -> bytes:
        h = Headers([(k, v) for k, v in self.headers.items if k.lower() not in _HOP])
        if not self.no_body or self.headers.get("content-length") is None:
            h.items.append(("Content-Length", str(len(self.body))))
        else:
            h.items.append(("Content-Length", self.headers.get("content-length") or "0"))
        if not keep_alive:
            h.items.append(("Connection", "close"))
        head = f"HTTP/1.1 {self.status} {self.reason}\r\n".encode() + h.encode() + b"\r\n"
        return head + (b"" if self.no_body else self.body)


async def _read_head(reader: asyncio.StreamReader) -> tuple[str, Headers] | None:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise
    lines = raw.decode("latin-1").split("\r\n")
    headers = Headers()
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers.items.append((k.strip(), v.strip()))
    return lines[0], headers


async def _read_body(reader: asyncio.StreamReader, headers: Headers) -> tuple[bytes, bool]:
    if "chunked" in (headers.get("transfer-encoding") or "").lower():
        parts = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()).strip():
                    pass  # trailers: none of our clients send any
                return b"".join(parts), True
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    n = int(headers.get("content-length") or "0")
    return (await reader.readexactly(n) if n else b""), False


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request | None:
    head = await _read_head(reader)
    if head is None:
        return None
    line, headers = head
    method, target, _ = line.split(" ", 2)
    if (headers.get("expect") or "").lower() == "100-continue":
        # Answered here: the body is read whole before anything is forwarded.
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    body, chunked = await _read_body(reader, headers)
    return Request(method.upper(), target, headers, body, chunked)


async def read_response(reader: asyncio.StreamReader, method: str) -> tuple[Response, bool]:
    """(response, upstream connection reusable)."""
    while True:
        head = await _read_head(reader)
        if head is None:
            raise ConnectionError("upstream closed the connection")
        line, headers = head
        version, status_s, *rest = line.split(" ", 2)
        status = int(status_s)
        if not 100 <= status < 200:
            break
    reason = rest[0] if rest else ""
    keep = version == "HTTP/1.1" and (headers.get("connection") or "").lower() != "close"
    if method == "HEAD" or status in (204, 304):
        return Response(status, reason, headers, b"", no_body=method == "HEAD"), keep
    if headers.get("content-length") is None and "chunked" not in (headers.get("transfer-encoding") or ""):
        return Response(status, reason, headers, await reader.read()), False
    body, _ = await _read_body(reader, headers)
    return Response(status, reason, headers, body), keep


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST (SO_LINGER 0): the client sees 'connection reset'."""
    sock = writer.get_extra_info("socket")
    try:
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    writer.transport.abort()


class _Dropped(Exception):
    """The client connection was reset or abandoned on purpose."""


# --- upstream --------------------------------------------------------------------


class Upstream:
    """Keep-alive connections to the S3 server, reused LIFO."""

    def __init__(self, url: str, resign: Resigner | None = None):
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"upstream must be http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.netloc = parts.netloc
        self.resign = resign
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def send(self, req: Request) -> Response:
        headers = Headers([(k, v) for k, v in req.headers.items if k.lower() not in _HOP])
        if self.resign is not None:
            headers = self.resign.sign(req.method, self.url + req.target, headers, self.netloc)
        if req.chunked:
            headers.items.append(("Transfer-Encoding", "chunked"))
            body = (f"{len(req.body):x}\r\n".encode() + req.body + b"\r\n" if req.body else b"") + b"0\r\n\r\n"
        else:
            if req.body or req.method in ("PUT", "POST"):
                headers.items.append(("Content-Length", str(len(req.body))))
            body = req.body
        data = f"{req.method} {req.target} HTTP/1.1\r\n".encode() + headers.encode() + b"\r\n" + body
        # A pooled connection the server closed meanwhile fails at once; only
        # reads are retried on a fresh one, since a write may have applied.
        retry_ok = req.method in ("GET", "HEAD")
        for attempt in range(2):
            conn = self._pooled() if attempt == 0 else None
            fresh = conn is None
            if conn is None:
                conn = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), UPSTREAM_CONNECT_TIMEOUT)
            r, w = conn
            try:
                w.write(data)
                await w.drain()
                resp, keep = await asyncio.wait_for(read_response(r, req.method), UPSTREAM_READ_TIMEOUT)
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                w.close()
                if fresh or not retry_ok:
                    raise
                continue
            except BaseException:
                w.close()
                raise
            if keep:
                self.idle.append((r, w))
            else:
                w.close()
            return resp
        raise ConnectionError("unreachable")

    def _pooled(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        while self.idle:
            r, w = self.idle.pop()
            if not r.at_eof() and not w.is_closing():
                return r, w
            w.close()
        return None


class Resigner:
    """Re-signs requests with the real upstream credentials (external S3),
    so that clients can carry per-client key ids the upstream never sees.
    The client's payload hash is kept as it sent it."""

    def __init__(self, key: str, secret: str, token: str | None):
        from botocore.auth import S3SigV4Auth, SigV4Auth
        from botocore.credentials import Credentials

        class _Auth(S3SigV4Auth):
            _modify_request_before_signing = SigV4Auth._modify_request_before_signing

        self._auth_cls = _Auth
        self.creds = Credentials(key, secret, token)

    def sign(self, method: str, url: str, headers: Headers, netloc: str) -> Headers:
        from botocore.awsrequest import AWSRequest

        m = re.search(r"Credential=[^/]+/\d{8}/([^/]+)/", headers.get("authorization") or "")
        region = m.group(1) if m else "us-east-1"
        if (headers.get("x-amz-content-sha256") or "") == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD":
            raise _Unsignable("chunk-signed payloads cannot be re-signed")
        keep = [
            (k, v)
            for k, v in headers.items
            if k.lower() not in ("authorization", "x-amz-date", "host", "x-amz-security-token", "date")
        ]
        req = AWSRequest(method=method, url=url, headers=dict(keep))
        self._auth_cls(self.creds, "s3", region).add_auth(req)
        out = Headers([("Host", netloc)])
        out.items.extend((k, v) for k, v in req.headers.items())
        return out


class _Unsignable(Exception):
    pass


# --- fault rules -------------------------------------------------------------------


@dataclass
class Target:
    """Which requests a rule applies to; a field left None matches all. A
    field may also be a list of values."""

    client: Any = None
    node: Any = None
    method: Any = None
    path_class: Any = None

    def matches(self, info: ReqInfo) -> bool:
        def ok(want: Any, *have: Any) -> bool:
            if want is None:
                return True
            wants = want if isinstance(want, list) else [want]
            return any(str(w) == str(h) for w in wants for h in have if h is not None)

        return (
            ok(self.client, info.client, info.key)
            and ok(self.node, info.node)
            and ok(self.method, info.kind)
            and ok(self.path_class, info.path_class)
        )


@dataclass
class Rule:
    id: int
    kind: str
    target: Target
    params: dict[str, Any]
    applied: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": asdict(self.target),
            "params": self.params,
            "applied": self.applied,
        }


@dataclass
class ReqInfo:
    key: str
    node: str | None
    client: str
    kind: str
    path_class: str
    bucket: str
    object_key: str


@dataclass
class Hold:
    id: int
    rule_id: int
    info: ReqInfo
    since: float
    release: asyncio.Future = field(repr=False)  # result: "forward" or "drop"
    done: asyncio.Future = field(repr=False)  # result: upstream status, set once forwarded

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.rule_id,
            "key": self.info.key,
            "client": self.info.client,
            "node": self.info.node,
            "method": self.info.kind,
            "path": self.info.object_key,
            "held_for": round(time.monotonic() - self.since, 3),
        }


_DEFAULT_TARGETS = {"hold": {"method": "PUT", "path_class": "commit"}, "strip-if-none-match": {"method": "PUT"}}


def _validate(kind: str, target: dict[str, Any], params: dict[str, Any]) -> None:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; valid: {', '.join(FAULT_KINDS)}")
    unknown = set(target) - {"client", "node", "method", "path_class"}
    if unknown:
        raise ValueError(f"unknown target field(s) {sorted(unknown)}")
    for name, valid in (("method", REQUEST_KINDS), ("path_class", PATH_CLASSES)):
        vals = target.get(name)
        for v in vals if isinstance(vals, list) else [vals] if vals is not None else []:
            if v not in valid:
                raise ValueError(f"unknown {name} {v!r}; valid: {', '.join(valid)}")
    rate = params.get("rate", 1.0)
    if not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    if kind == "error" and params.get("status", 500) not in ERROR_CODES:
        raise ValueError(f"error status must be one of {sorted(ERROR_CODES)}")
    if kind == "latency" and not isinstance(params.get("ms", 0), (int, float)):
        raise ValueError("latency needs a numeric ms")
    if kind == "hold" and params.get("version") is not None and not isinstance(params["version"], int):
        raise ValueError("a hold's version must be an integer")
    if kind == "pin" and not isinstance(params.get("version"), int):
        raise ValueError("pin needs an integer version")


# --- the proxy -----------------------------------------------------------------------


class Proxy:
    def __init__(self, upstream: Upstream, seed: int | None = None):
        self.upstream = upstream
        self.rng = random.Random(seed)
        self.rules: dict[int, Rule] = {}
        self.next_id = 1
        self.holds: dict[int, Hold] = {}
        self.hold_added = asyncio.Event()
        self.healed = asyncio.Event()  # set and replaced at each heal/rule removal: wakes blackholed requests
        self.registry: dict[str, tuple[str | None, str]] = {}
        self.stats: dict[str, Any] = {
            "requests": 0,
            "clients": {},
            "faults": {},
            "upstream_errors": 0,
            "if_none_match_puts": 0,
        }
        self.started = time.time()

    # identity and bookkeeping

    def identify(self, req: Request) -> ReqInfo:
        bucket, key, query = split_target(req.target)
        akid = access_key_id(req.headers, query)
        node, client = self.registry.get(akid) or parse_identity(akid)
        kind = request_kind(req.method, key, query)
        pc = path_class(query.get("prefix", [""])[0] if kind == "LIST" else key)
        if kind == "LIST" and pc == "log":
            pc = "commit"  # listing the log is how clients discover commits
        return ReqInfo(akid, node, client, kind, pc, bucket, key)

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

    def matching(self, info: ReqInfo, kind: str) -> list[Rule]:
        return [r for r in self.rules.values() if r.kind == kind and r.target.matches(info)]

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
        for rule in self.matching(info, "partition"):
            if self._fires(rule):
                self._applied(rule)
                await self._blackhole(rule)
                raise _Dropped()
        for rule in self.matching(info, "reset"):
            if self._fires(rule):
                self._applied(rule)
                raise _Dropped()
        for rule in self.matching(info, "error"):
            if self._fires(rule):
                self._applied(rule)
                status = int(rule.params.get("status", 500))
                return s3_error(status, ERROR_CODES[status], "injected by delta-jepsen s3proxy", req.target)
        delay = 0.0
        for rule in self.matching(info, "latency"):
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
        for rule in self.matching(info, "strip-if-none-match"):
            if req.headers.get("if-none-match") is not None and self._fires(rule):
                self._applied(rule)
                req.headers.remove("if-none-match")
        # A hold may name the log version it waits for (a client reads older
        # commits with the same method before it makes its own).
        hold = next(
            (
                r
                for r in self.matching(info, "hold")
                if r.params.get("version") in (None, log_version(info.object_key)) and self._fires(r)
            ),
            None,
        )
        if hold is not None:
            self._applied(hold)
            return await self._held(hold, info, req)
        resp = await self._forward(req, info)
        for rule in self.matching(info, "ambiguous"):
            if self._fires(rule):
                self._applied(rule)
                raise _Dropped()  # the write applied upstream; its answer is lost
        if pin is not None and resp.status == 200:
            resp = self._apply_pin(pin, info, req, resp)
        return resp

    async def _forward(self, req: Request, info: ReqInfo) -> Response:
        try:
            return await self.upstream.send(req)
        except _Unsignable as e:
            return s3_error(501, "NotImplemented", str(e), req.target)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ConnectionError) as e:
            self.stats["upstream_errors"] += 1
            # A request the upstream may or may not have applied: the client
            # must see an indeterminate failure, not a made-up S3 answer.
            raise _Dropped() from e

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
        self.holds[h.id] = h
        self.hold_added.set()
        self.hold_added = asyncio.Event()
        try:
            verdict = await h.release
        finally:
            self.holds.pop(h.id, None)
        if verdict == "drop":
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


async def run_server(upstream_url: str, port: int, seed: int | None, resign: Resigner | None) -> None:
    proxy = Proxy(Upstream(upstream_url, resign), seed)
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
        asyncio.run(run_server(args.upstream, args.port, args.seed, resign))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
