"""The S3 server behind the proxy: pooled connections to it, and SigV4
re-signing for an endpoint that checks signatures."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit

from harness.s3proxy.http import _HOP, Headers, Request, Response, read_response
from harness.s3proxy.s3 import UPSTREAM_CONNECT_TIMEOUT, UPSTREAM_READ_TIMEOUT

# --- upstream --------------------------------------------------------------------


class Upstream:
    """Keep-alive connections to the S3 server, reused LIFO."""

    def __init__(self, url: str, resign: Resigner | None = None, dechunk: bool = False):
        parts = urlsplit(url)
        if parts.scheme != "http":
            raise ValueError(f"upstream must be http://host:port, got {url!r}")
        self.url = url.rstrip("/")
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.netloc = parts.netloc
        self.resign = resign
        # Decode aws-chunked uploads (each chunk signed) into plain bodies:
        # for a store that refuses them (SeaweedFS without S3 logins).
        self.dechunk = dechunk
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def send(self, req: Request) -> Response:
        headers = Headers([(k, v) for k, v in req.headers.items if k.lower() not in _HOP])
        if self.dechunk and (headers.get("x-amz-content-sha256") or "").startswith("STREAMING-"):
            req = dechunked(req, headers)
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


def decode_aws_chunked(body: bytes) -> bytes:
    """The payload of an aws-chunked body: `<hex size>[;chunk-signature=..]`
    CRLF, the chunk, CRLF, ..., a zero-size chunk, then any trailers."""
    out, pos = [], 0
    while True:
        end = body.find(b"\r\n", pos)
        if end < 0:
            raise ValueError("aws-chunked body ends inside a chunk header")
        size = int(body[pos:end].split(b";", 1)[0], 16)
        if size == 0:
            return b"".join(out)
        start = end + 2
        if start + size > len(body):
            raise ValueError("aws-chunked body shorter than its chunk sizes")
        out.append(body[start : start + size])
        pos = start + size + 2


def dechunked(req: Request, headers: Headers) -> Request:
    """`req` with its aws-chunked payload decoded, sent as an unsigned
    payload (the store this is for checks no signature); `headers` edited."""
    body = decode_aws_chunked(req.body)
    encoding = [e.strip() for e in (headers.get("content-encoding") or "").split(",") if e.strip()]
    headers.remove("content-encoding")
    if [e for e in encoding if e != "aws-chunked"]:
        headers.set("Content-Encoding", ", ".join(e for e in encoding if e != "aws-chunked"))
    for name in ("x-amz-decoded-content-length", "x-amz-trailer"):
        headers.remove(name)
    headers.set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
    return Request(req.method, req.target, req.headers, body, chunked=False)


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
