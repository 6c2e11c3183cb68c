"""Starting the S3 fault proxy and steering it: what nemeses and tests use.

`start_proxy()` runs harness/s3proxy.py as a managed child process (it dies
with the harness); `S3ProxyClient` speaks its JSON control API, with a
timeout on every call.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, python_argv

CONTROL_TIMEOUT = 10.0
START_TIMEOUT = 20.0


class S3ProxyClient:
    def __init__(self, endpoint: str, timeout: float = CONTROL_TIMEOUT):
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None, timeout: float | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.endpoint}/__dj__/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                msg = json.loads(e.read()).get("error", "")
            except (ValueError, AttributeError):
                msg = e.reason
            raise HarnessError(f"s3proxy {method} /__dj__/{path}: {e.code} {msg}") from None
        except (urllib.error.URLError, OSError) as e:
            raise HarnessError(f"s3proxy {method} /__dj__/{path}: {e}") from None

    def health(self) -> dict[str, Any]:
        return self._call("GET", "health")

    def add_fault(self, kind: str, target: dict[str, Any] | None = None, **params: Any) -> int:
        """A fault rule; returns its id. target: {client, node, method,
        path_class}, any subset (a value may be a list). params by kind:
        latency {ms, jitter_ms}, error {status: 500|503}, pin {version},
        applied-error {status: 500|503} and applied-late {ms, then:
        send|reset} (a request the store applied, answered with an error or
        late; default target PUT), stale-list {ms} (LIST without the keys
        first written less than ms ago; target LIST). Every kind takes rate
        (0..1) and count (max applications; for applied-* only requests the
        store applied count, for stale-list only listings it changed)."""
        return int(self._call("POST", "faults", {"kind": kind, "target": target or {}, "params": params})["id"])

    def remove_fault(self, rule_id: int) -> None:
        self._call("DELETE", f"faults/{rule_id}")

    def faults(self) -> list[dict[str, Any]]:
        return self._call("GET", "faults")["faults"]

    def heal(self) -> dict[str, Any]:
        """All rules removed, held requests forwarded, blackholed ones reset."""
        return self._call("POST", "heal", {})

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "stats")

    def hold_next_commit(self, client: str, version: int | None = None, **target: Any) -> int:
        """Hold `client`'s next commit PUT (or the request `target` names, e.g.
        method="HEAD") until released; with `version`, only a request for
        that log version's commit file."""
        params = {} if version is None else {"version": version}
        return self.add_fault("hold", {"client": client, **target}, **params)

    def holds(self, client: str | None = None, wait: float = 0.0) -> list[dict[str, Any]]:
        """Pending holds (oldest first); waits up to `wait` s for one to appear."""
        q = f"holds?wait={wait}" + (f"&client={client}" if client else "")
        return self._call("GET", q, timeout=wait + self.timeout)["holds"]

    def wait_hold(self, client: str, timeout: float) -> dict[str, Any]:
        hs = self.holds(client, wait=timeout)
        if not hs:
            raise HarnessError(f"s3proxy: no request from {client} held within {timeout:.0f}s")
        return hs[0]

    def release(self, hold_id: int, wait: float = 30.0) -> int | None:
        """Forward a held request; returns the upstream's status once it answered."""
        res = self._call("POST", f"holds/{hold_id}/release", {"wait": wait}, timeout=wait + self.timeout)
        return res["status"]

    def drop(self, hold_id: int) -> None:
        """Never forward a held request: its client sees a reset."""
        self._call("POST", f"holds/{hold_id}/drop", {"wait": 1.0})

    def pin(self, version: int, client: str | None = None, node: str | None = None) -> int:
        """Hide log entries newer than `version` from a client's LIST/GET/HEAD."""
        if client is None and node is None:
            raise HarnessError("s3proxy pin needs a client or a node")
        target = {k: v for k, v in (("client", client), ("node", node)) if v is not None}
        return self.add_fault("pin", target, version=version)

    def unpin(self, rule_id: int) -> None:
        self.remove_fault(rule_id)

    def register(self, key: str, node: str | None, client: str) -> None:
        """Attribute an access key id the naming scheme does not explain."""
        self._call("POST", "clients", {key: {"node": node, "client": client}})


@dataclass
class ProxyProcess:
    process: ManagedProcess
    port: int
    upstream: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def control(self) -> S3ProxyClient:
        return S3ProxyClient(self.endpoint)

    def stop(self) -> None:
        self.process.stop(grace=2)


def start_proxy(
    upstream: str,
    log_path: str | os.PathLike[str],
    *,
    seed: int | None = None,
    resign_credentials: tuple[str, str, str | None] | None = None,
    dechunk: bool = False,
    timeout: float = START_TIMEOUT,
) -> ProxyProcess:
    """The proxy in front of `upstream`, on a free loopback port. With
    `resign_credentials` (key, secret, token) it re-signs every request, so
    clients may carry their own key ids in front of a real S3 endpoint; the
    secret travels in the child's environment, never its argv or logs."""
    argv = python_argv("harness.s3proxy.server", "--upstream", upstream, "--port", "0")
    if seed is not None:
        argv += ["--seed", str(seed)]
    if dechunk:
        argv.append("--dechunk")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if resign_credentials is not None:
        argv.append("--resign")
        key, secret, token = resign_credentials
        env.update({"DJ_PROXY_UPSTREAM_KEY": key, "DJ_PROXY_UPSTREAM_SECRET": secret})
        if token:
            env["DJ_PROXY_UPSTREAM_TOKEN"] = token
    proc = ManagedProcess(
        "s3proxy", argv, Path(log_path), env=env, cwd=str(Path(__file__).resolve().parents[2])
    ).start()
    try:
        m = proc.wait_for_log(r"s3proxy listening on 127\.0\.0\.1:(\d+)", timeout)
    except BaseException:
        proc.stop()
        raise
    return ProxyProcess(proc, int(m.group(1)), upstream)
