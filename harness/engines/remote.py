"""spark-connect: existing Spark Connect endpoints (a real cluster with Delta
configured), driven as delta-spark nodes; the harness starts nothing.

Each node is a name for one of the given `sc://host:port` endpoints (round
robin). The cluster is not the harness's: it is never stopped, restarted,
paused or clock-skewed, and its commit protocol (LogStore) is whatever the
cluster was configured with. It must reach the table itself, so the run's
storage must be one it can see: a shared path (`local`) or `external-s3`
(the embedded moto listens on 127.0.0.1 with per-run keys).
"""

from __future__ import annotations

import re
import socket
from dataclasses import replace
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.storage import Storage
from harness.engines.base import SPARK_CLIENT_MODULES, ClientConfig, Engine, Node
from harness.engines.deltaspark import DELTA_SPARK_CAPABILITIES
from harness.engines.spark import spark_uri

NAME = "spark-connect"
REMOTE_FLAG = "--spark-remote"
REMOTE_ENV = "DJ_SPARK_REMOTE"
REMOTE_STORAGES = ("local", "external-s3")
HEALTH_TIMEOUT_S = 10.0

# The client is delta-spark's, so is what it can do; what the cluster runs
# (its Delta release, its LogStore) the harness cannot see.
CAPABILITIES = replace(
    DELTA_SPARK_CAPABILITIES,
    notes=DELTA_SPARK_CAPABILITIES.notes
    + "; the remote cluster must have Delta configured (DeltaSparkSessionExtension, DeltaCatalog)",
)

# pyspark's own URL grammar (ChannelBuilder): host without colons (no IPv6
# literals), then optional `/;key=value;...` parameters.
_URL = re.compile(r"sc://(?P<host>[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})(?P<params>/(;[A-Za-z0-9_.-]+=[^;=/?#\s]*)*)?")
# token: a secret, and the URL lands in spec.json and the repro command;
# pyspark reads it from this variable instead. session_id: every client
# must open its own session.
_REFUSED_PARAMS = {
    "token": "put the token in $SPARK_CONNECT_AUTHENTICATE_TOKEN, not in the URL (the URL is recorded in spec.json)",
    "session_id": "every client opens its own session",
}


def parse_remotes(value: str) -> list[str]:
    """`sc://host:port[/;params][,sc://...]` -> the URLs, validated."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise HarnessError(f"{REMOTE_FLAG}: no URL given (expected sc://host:port[,sc://host:port...])")
    for url in urls:
        m = _URL.fullmatch(url)
        if m is None or not 0 < int(m["port"]) < 65536:
            raise HarnessError(
                f"{REMOTE_FLAG}: bad URL {url!r} (expected sc://host:port, optionally "
                "followed by /;key=value parameters)"
            )
        for param in (m["params"] or "").split(";")[1:]:
            key = param.split("=", 1)[0]
            if key in _REFUSED_PARAMS:
                raise HarnessError(f"{REMOTE_FLAG}: parameter {key!r} not accepted: {_REFUSED_PARAMS[key]}")
    return urls


def host_port(url: str) -> tuple[str, int]:
    m = _URL.fullmatch(url)
    assert m is not None, url
    return m["host"], int(m["port"])


def check_storage(kind: str) -> None:
    if kind not in REMOTE_STORAGES:
        raise HarnessError(
            f"--engine {NAME} cannot use --storage {kind}: the remote cluster cannot reach the "
            "embedded S3 (127.0.0.1, per-run keys); use --storage external-s3 or --storage local "
            "(a path the cluster shares, see --local-root)"
        )


def check_nemeses(
    engines: tuple[str, ...], nemeses: list[str], proxy_nemeses: frozenset[str], s3_proxy: bool
) -> list[str]:
    """Raise for faults that cannot reach a remote cluster; return notices
    for those that reach only the harness's own processes."""
    if NAME not in engines:
        return []
    if "clock" in nemeses:
        raise HarnessError(
            f"--nemesis clock cannot skew a {NAME} node: the remote cluster's clock is not the "
            "harness's (skewing its client workers would change nothing the cluster writes)"
        )
    only_remote = all(e == NAME for e in engines)
    proxied = sorted(proxy_nemeses & set(nemeses))
    if only_remote and (proxied or s3_proxy):
        what = f"--nemesis {','.join(proxied)}" if proxied else "--s3-proxy"
        raise HarnessError(
            f"{what} cannot act on {NAME}: the remote cluster reaches storage directly, not "
            "through the harness's S3 fault proxy"
        )
    notices = []
    if {"kill", "pause"} & set(nemeses):
        notices.append(
            f"{NAME}: kill/pause act on client workers only; the remote cluster's processes are not the harness's"
        )
    if proxied or s3_proxy:
        notices.append(f"{NAME}: S3 faults reach the other engines' clients only, not the remote cluster")
    return notices


class SparkConnectRemoteEngine(Engine):
    name = NAME
    capabilities = CAPABILITIES
    client_modules = SPARK_CLIENT_MODULES

    def __init__(self, remotes: list[str] | str | None = None):
        if not remotes:
            raise HarnessError(f"--engine {NAME} needs {REMOTE_FLAG} sc://host:port[,sc://host:port...]")
        self.remotes = parse_remotes(remotes) if isinstance(remotes, str) else parse_remotes(",".join(remotes))

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        check_storage(storage.kind)
        nodes = [Node(f"n{first + i}", url=self.remotes[i % len(self.remotes)]) for i in range(n)]
        # Fail before any worker starts: a dead endpoint would otherwise
        # surface as every op timing out.
        for url in dict.fromkeys(node.url for node in nodes if node.url):
            try:
                socket.create_connection(host_port(url), timeout=min(timeout, HEALTH_TIMEOUT_S)).close()
            except OSError as e:
                raise HarnessError(f"{NAME}: cannot reach {url}: {e.strerror or e}") from None
        return nodes

    def restart_node(
        self, node: Node, storage: Storage, logs_dir: Path, timeout: float, extra_env: dict[str, str] | None = None
    ) -> None:
        raise HarnessError(f"{NAME}: node {node.name} is a remote cluster ({node.url}), not the harness's to restart")

    def client_config(
        self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float
    ) -> ClientConfig:
        return ClientConfig(
            engine=self.name,
            node=node.name,
            process=process,
            table_uri=spark_uri(table_uri),
            url=node.url,
            timeout=timeout,
        )

    def commit_protocol(self, storage: Storage) -> str:
        return "the remote cluster's own LogStore (not known to the harness)"

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"pyspark": version("pyspark")}  # the client's; the cluster's own is not visible here
