"""Engines whose nodes are server processes, one per node (Sail, delta-spark).

What such engines share: all of a run's servers are spawned from one
thread (PDEATHSIG follows the thread that spawned a child) and only then
waited on, so their start-ups overlap; a node can be killed and started
again on a fresh log (the nemeses' kill); every server is stopped with
its process group. An engine supplies how to spawn one server and how to
tell from its log that it answers.
"""

from __future__ import annotations

from pathlib import Path

from harness.core.procs import ManagedProcess
from harness.core.storage import Storage
from harness.engines.base import SPARK_CLIENT_MODULES, Engine, Node


class ServerEngine(Engine):
    client_modules = SPARK_CLIENT_MODULES  # both server engines are Spark Connect servers
    # Seconds between SIGTERM and SIGKILL when the nodes are stopped.
    stop_grace = 5.0

    def __init__(self) -> None:
        self.servers: list[ManagedProcess] = []
        self.by_name: dict[str, ManagedProcess] = {}
        self.restarts = 0

    # -- what an engine supplies --------------------------------------------------

    def _spawn(self, name: str, storage: Storage, log: Path, extra_env: dict[str, str] | None = None) -> ManagedProcess:
        """Start node `name`'s server process (not waiting for it)."""
        raise NotImplementedError

    def _ready(self, srv: ManagedProcess, timeout: float) -> str:
        """Wait until the server answers; its Spark Connect url."""
        raise NotImplementedError

    def _after_start(self, nodes: list[Node], logs_dir: Path) -> None:
        """Once every node answers, before the run uses them."""

    def _cleanup(self) -> None:
        """After every server has stopped."""

    # -- shared -------------------------------------------------------------------

    def _launch(
        self, name: str, storage: Storage, log: Path, extra_env: dict[str, str] | None = None
    ) -> ManagedProcess:
        srv = self._spawn(name, storage, log, extra_env)
        self.servers.append(srv)
        self.by_name[name] = srv
        return srv

    def _log_path(self, logs_dir: Path, name: str) -> Path:
        # A restarted node gets a fresh log: the old one already holds a
        # readiness line with the old port.
        suffix = f".r{self.restarts}" if self.restarts else ""
        return logs_dir / f"{self.name}-{name}{suffix}.log"

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        nodes = []
        try:
            started = [
                (f"n{first + i}", self._launch(f"n{first + i}", storage, self._log_path(logs_dir, f"n{first + i}")))
                for i in range(n)
            ]
            for name, srv in started:
                nodes.append(Node(name, url=self._ready(srv, timeout), pid=srv.pid, log=str(srv.log_path)))
            self._after_start(nodes, logs_dir)
        except BaseException:
            self.stop_nodes()
            raise
        return nodes

    def server(self, name: str) -> ManagedProcess | None:
        return self.by_name.get(name)

    def restart_node(
        self, node: Node, storage: Storage, logs_dir: Path, timeout: float, extra_env: dict[str, str] | None = None
    ) -> None:
        old = self.by_name.get(node.name)
        if old is not None:
            old.kill()
            if old in self.servers:
                self.servers.remove(old)
        self.restarts += 1
        srv = self._launch(node.name, storage, self._log_path(logs_dir, node.name), extra_env)
        node.url, node.pid, node.log = self._ready(srv, timeout), srv.pid, str(srv.log_path)

    def stop_nodes(self) -> None:
        for srv in self.servers:
            srv.stop(grace=self.stop_grace)
        self.servers.clear()
        self.by_name.clear()
        self._cleanup()
