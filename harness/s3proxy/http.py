"""Plain HTTP/1.1 on asyncio streams, as much of it as S3 clients speak:
headers, requests and responses read and written with keep-alive."""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "expect", "proxy-connection"}

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
