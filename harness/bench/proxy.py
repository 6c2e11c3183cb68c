"""bench-proxy: what the S3 fault proxy costs with no fault armed.

Latency: the same mix of small PUT / GET / LIST requests sent to moto
directly and through the proxy, interleaved request by request (so both
see the same bucket and the same load on the machine); the added latency
is the per-pair difference. Throughput: concurrent clients hammer the
proxy for a fixed time, then moto directly for the same time: the proxy's
requests/s, next to the server's own ceiling.

moto itself tops out at a few hundred requests/s on this machine, so the
proxy's own ceiling is also measured in front of a stub S3 server (this
module run with --stub: it answers every request at once), in its own
process as moto is.

Requests are raw HTTP/1.1 on keep-alive connections (moto does not check
signatures), so the client's own cost stays small next to what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, python_argv
from harness.run.storage import EmbeddedS3, open_storage
from harness.s3proxy.client import start_proxy
from harness.s3proxy.http import read_request

TARGET_ADDED_P50_MS = 2.0
TARGET_THROUGHPUT = 500.0
BODY = b"x" * 1024
_MIX = ("PUT", "GET", "LIST")


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


class _Conn:
    """One keep-alive connection signing (in form only) as `key`."""

    def __init__(self, endpoint: str, bucket: str, key: str, space: str = ""):
        host, port = endpoint.removeprefix("http://").split(":")
        self.space = space
        self.conn = http.client.HTTPConnection(host, int(port), timeout=30)
        self.bucket = bucket
        self.headers = {
            "Authorization": f"AWS4-HMAC-SHA256 Credential={key}/20260101/us-east-1/s3/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0",
            "x-amz-date": "20260101T000000Z",
            "x-amz-content-sha256": "UNSIGNED-PAYLOAD",
        }

    def request(self, kind: str, n: int) -> None:
        key = f"bench/{self.space}o{n % 50:03d}"
        if kind == "PUT":
            self.conn.request("PUT", f"/{self.bucket}/{key}", body=BODY, headers=self.headers)
        elif kind == "GET":
            self.conn.request("GET", f"/{self.bucket}/{key}", headers=self.headers)
        else:
            prefix = f"bench/{self.space}"
            self.conn.request("GET", f"/{self.bucket}?list-type=2&prefix={prefix}&max-keys=20", headers=self.headers)
        resp = self.conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise HarnessError(f"bench-proxy: {kind} {key} answered {resp.status}")

    def close(self) -> None:
        self.conn.close()


@dataclass
class ProxyBench:
    requests: int
    direct_p50_ms: float
    proxy_p50_ms: float
    added_p50_ms: float
    added_p99_ms: float
    clients: int
    proxy_rps: float
    direct_rps: float
    stub_proxy_rps: float
    stub_direct_rps: float


def _latency(s3: EmbeddedS3, proxy_ep: str, n: int) -> tuple[list[float], list[float]]:
    direct, proxied = _Conn(s3.endpoint, s3.bucket, "dj-bench"), _Conn(proxy_ep, s3.bucket, "dj-bench")
    try:
        for i in range(50):  # every GET finds its object; connections warm
            direct.request("PUT", i)
        d_lat, p_lat = [], []
        for i in range(n):
            kind = _MIX[i % len(_MIX)]
            # Alternate which path goes first, so neither always meets a warmer server.
            order = [(direct, d_lat), (proxied, p_lat)] if i % 2 else [(proxied, p_lat), (direct, d_lat)]
            for conn, lat in order:
                t = time.perf_counter()
                conn.request(kind, i)
                lat.append((time.perf_counter() - t) * 1000)
        return d_lat, p_lat
    finally:
        direct.close()
        proxied.close()


def _throughput(endpoint: str, bucket: str, clients: int, seconds: float) -> float:
    counts = [0] * clients
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1, timeout=30)
    stop = threading.Event()

    def run(c: int) -> None:
        # Each client its own objects: with two clients sharing keys, moto
        # once answered a PUT 500 on a loaded machine (a fault of the store
        # behind the proxy, not of the path being measured).
        conn = _Conn(endpoint, bucket, f"dj-bench-{c}", space=f"c{c}/")
        try:
            for n in range(50):  # every GET finds its object
                conn.request("PUT", n)
            start.wait()
            i = c
            while not stop.is_set():
                conn.request(_MIX[i % len(_MIX)], i)
                counts[c] += 1
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported after the join
            errors.append(e)
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - t0
    if errors:
        raise HarnessError(f"bench-proxy: a client failed: {errors[0]!r}")
    return sum(counts) / elapsed


def measure(n: int, clients: int, seconds: float) -> ProxyBench:
    with tempfile.TemporaryDirectory(prefix="dj-bench-proxy-") as tmp:
        s3 = open_storage("s3", Path(tmp), proxy=True)
        assert isinstance(s3, EmbeddedS3) and s3._proxy_proc is not None
        try:
            proxy_ep = s3._proxy_proc.endpoint
            d_lat, p_lat = _latency(s3, proxy_ep, n)
            added = [p - d for p, d in zip(p_lat, d_lat, strict=True)]
            proxy_rps = _throughput(proxy_ep, s3.bucket, clients, seconds)
            direct_rps = _throughput(s3.endpoint, s3.bucket, clients, seconds)
        finally:
            s3.stop()
        stub = ManagedProcess("s3stub", python_argv("harness.bench.proxy", "--stub"), Path(tmp) / "stub.log").start()
        try:
            m = stub.wait_for_log(r"stub listening on 127\.0\.0\.1:(\d+)", 20)
            stub_ep = f"http://127.0.0.1:{m.group(1)}"
            proxy = start_proxy(stub_ep, Path(tmp) / "proxy-stub.log")
            try:
                stub_proxy_rps = _throughput(proxy.endpoint, "bench", clients, seconds)
            finally:
                proxy.stop()
            stub_direct_rps = _throughput(stub_ep, "bench", clients, seconds)
        finally:
            stub.stop()
    return ProxyBench(
        n,
        statistics.median(d_lat),
        statistics.median(p_lat),
        statistics.median(added),
        _pct(added, 0.99),
        clients,
        proxy_rps,
        direct_rps,
        stub_proxy_rps,
        stub_direct_rps,
    )


def bench_proxy(n: int, clients: int, seconds: float) -> int:
    r = measure(n, clients, seconds)
    ok_lat = r.added_p50_ms <= TARGET_ADDED_P50_MS
    # moto, not the proxy, bounds the first figure; the stub run shows the proxy's own ceiling.
    ok_rps = max(r.proxy_rps, r.stub_proxy_rps) >= TARGET_THROUGHPUT
    print(f"S3 fault proxy, no faults armed; {r.requests} requests each way (PUT 1 KiB / GET / LIST), interleaved")
    print(f"  latency p50: direct {r.direct_p50_ms:.2f} ms, through the proxy {r.proxy_p50_ms:.2f} ms")
    print(
        f"  added latency per request: p50 {r.added_p50_ms:.2f} ms, p99 {r.added_p99_ms:.2f} ms  "
        f"(target p50 <= {TARGET_ADDED_P50_MS:g} ms: {'met' if ok_lat else 'MISSED'})"
    )
    print(
        f"  throughput with {r.clients} concurrent clients, in front of moto: through the proxy "
        f"{r.proxy_rps:.0f} requests/s, moto directly {r.direct_rps:.0f} requests/s"
    )
    print(
        f"  throughput with {r.clients} concurrent clients, in front of a stub S3 server: through the proxy "
        f"{r.stub_proxy_rps:.0f} requests/s, the stub directly {r.stub_direct_rps:.0f} requests/s  "
        f"(target >= {TARGET_THROUGHPUT:g}/s: {'met' if ok_rps else 'MISSED'})"
    )
    return 0 if ok_lat and ok_rps else 1


_LISTING = (
    b'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>bench</Name><KeyCount>1</KeyCount>'
    b"<Contents><Key>bench/o000</Key><Size>1024</Size></Contents></ListBucketResult>"
)


async def _stub_handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while (req := await read_request(reader, writer)) is not None:
            body = _LISTING if "list-type" in req.target else BODY if req.method == "GET" else b""
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    writer.close()


async def _stub_main() -> None:
    server = await asyncio.start_server(_stub_handle, "127.0.0.1", 0, backlog=512)
    print(f"stub listening on 127.0.0.1:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m harness.bench.proxy")
    p.add_argument("--stub", action="store_true", help="run the stub S3 server bench-proxy measures against")
    if not p.parse_args().stub:
        sys.exit("use: delta-jepsen bench-proxy")
    asyncio.run(_stub_main())
