"""Sail: a Spark Connect server in Rust (pysail), one server process per node."""

from __future__ import annotations

import os
from pathlib import Path

from harness.engines.base import Capabilities, ClientConfig, Engine, Node
from harness.procs import HarnessError, ManagedProcess, venv_bin
from harness.storage import Storage

SAIL_CAPABILITIES = Capabilities(
    # Not here: add-columns ("unsupported ALTER TABLE operation") and
    # append-idempotent (txnAppId/txnVersion ignored: no txn action, a
    # re-sent pair applies twice), both seen with Sail 0.7.2.
    ops=frozenset({"create-table", "append", "read", "update", "delete", "merge", "insert_select",
                   "set-properties", "create-table-at"}),
    read_version_known=False,
    commit_version_known=False,
    row_level_concurrency=False,
    # Sail writes no isolation level of its own; Delta's documented default.
    default_isolation="WriteSerializable",
    notes="conflicts surface as a generic 'Failed to commit transaction'; "
    "no readVersion in commitInfo; no OPTIMIZE/VACUUM/DESCRIBE HISTORY",
)


class SailEngine(Engine):
    name = "sail"
    capabilities = SAIL_CAPABILITIES

    def __init__(self) -> None:
        self.servers: list[ManagedProcess] = []
        self.by_name: dict[str, ManagedProcess] = {}
        self.restarts = 0

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        nodes = []
        try:
            for i in range(n):
                name = f"n{first + i}"
                srv, url = self._start_server(name, storage, logs_dir / f"sail-{name}.log", timeout)
                nodes.append(Node(name, url=url, pid=srv.pid, log=str(srv.log_path)))
        except HarnessError:
            self.stop_nodes()
            raise
        return nodes

    def _start_server(self, name: str, storage: Storage, log: Path, timeout: float,
                      extra_env: dict[str, str] | None = None) -> tuple[ManagedProcess, str]:
        # One storage identity per node: a Sail server holds one set of
        # credentials for all the sessions it serves.
        env = {**os.environ, **storage.client_env(name), "RUST_LOG": os.environ.get("RUST_LOG", "info"),
               **(extra_env or {})}
        srv = ManagedProcess(
            f"sail-{name}",
            [venv_bin("sail"), "spark", "server", "--ip", "127.0.0.1", "--port", "0"],
            log,
            env=env,
        ).start()
        self.servers.append(srv)
        self.by_name[name] = srv
        m = srv.wait_for_log(r"Spark Connect server on 127\.0\.0\.1:(\d+)", timeout)
        return srv, f"sc://127.0.0.1:{m.group(1)}"

    def server(self, name: str) -> ManagedProcess | None:
        return self.by_name.get(name)

    def restart_node(self, node: Node, storage: Storage, logs_dir: Path, timeout: float,
                     extra_env: dict[str, str] | None = None) -> None:
        old = self.by_name.get(node.name)
        if old is not None:
            old.kill()
            if old in self.servers:
                self.servers.remove(old)
        self.restarts += 1
        # A fresh log: the old one already holds a "server on <port>" line.
        srv, url = self._start_server(node.name, storage, logs_dir / f"sail-{node.name}.r{self.restarts}.log",
                                      timeout, extra_env)
        node.url, node.pid, node.log = url, srv.pid, str(srv.log_path)

    def stop_nodes(self) -> None:
        for srv in self.servers:
            srv.stop()
        self.servers.clear()
        self.by_name.clear()

    def client_config(self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float) -> ClientConfig:
        return ClientConfig(engine=self.name, node=node.name, process=process, table_uri=table_uri, url=node.url, timeout=timeout)

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"pysail": version("pysail"), "pyspark": version("pyspark")}
