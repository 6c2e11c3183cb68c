"""The nemeses' view of a live run (nemeses.base.Cluster over the runner's
nodes and client slots, handed over explicitly: the cluster reads nothing
else of the runner).

Server restarts run on one long-lived thread of their own: a child gets
PR_SET_PDEATHSIG, which fires when the *thread* that spawned it ends, so a
server started from the short-lived nemesis thread would be killed with it.
That thread ends only after the engines have stopped their nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from harness.core.storage import Storage
from harness.engines.base import Engine, Node
from nemeses.base import ClientProc


class Slot(Protocol):
    """A client slot of the run: its process number, node and live worker."""

    process: int
    node: Node
    worker: Any
    running: tuple[str, str, float] | None


RESTART_TIMEOUT = 90.0


class RunCluster:
    def __init__(
        self,
        nodes: Sequence[Node],
        slots: Sequence[Slot],
        node_engine: dict[str, Engine],
        node_env: dict[str, dict[str, str]],
        storage: Storage,
        logs_dir: Path,
        start_timeout: float,
    ):
        # Live views: slots get new workers and node_env is read by the runner
        # when it respawns a worker, so these are the runner's own objects.
        self._nodes = nodes
        self._slots = slots
        self._node_engine = node_engine
        self._node_env = node_env
        self._storage = storage
        self._logs_dir = logs_dir
        self.start_timeout = start_timeout
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="node-spawner")

    def _node(self, name: str) -> Any:
        return next(n for n in self._nodes if n.name == name)

    def nodes(self) -> list[str]:
        return [n.name for n in self._nodes]

    def clients(self) -> list[ClientProc]:
        out = []
        for s in self._slots:
            w = s.worker
            if w is not None and w.pid is not None and w.alive():
                f, op_id, t0 = s.running if s.running is not None else (None, None, None)
                out.append(ClientProc(s.process, s.node.name, w.pid, f, op_id, t0))
        return out

    def crash_client(self, process: int) -> bool:
        for s in self._slots:
            w = s.worker
            if s.process == process and w is not None and w.alive():
                w.crash()  # SIGKILL only: the slot thread records the op info and respawns
                return True
        return False

    def _server(self, node: str) -> Any:
        engine = self._node_engine.get(node)
        return engine.server(node) if engine is not None else None

    def server_nodes(self) -> list[str]:
        return [n for n in self.nodes() if self._server(n) is not None]

    def server_pid(self, node: str) -> int | None:
        srv = self._server(node)
        return srv.pid if srv is not None else None

    def server_alive(self, node: str) -> bool:
        srv = self._server(node)
        return srv is not None and srv.alive()

    def kill_server(self, node: str) -> int | None:
        srv = self._server(node)
        if srv is None or not srv.alive():
            return None
        pid = srv.pid
        srv.signal_kill()
        return pid

    def restart_server(self, node: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        n = self._node(node)
        engine = self._node_engine[node]
        storage = self._storage

        def restart() -> None:
            engine.restart_node(n, storage, self._logs_dir, self.start_timeout, env)

        self._spawner.submit(restart).result(RESTART_TIMEOUT)
        return {"restarted": True, "url": n.url, "pid": n.pid, "log": n.log}

    def set_node_env(self, node: str, env: dict[str, str] | None) -> None:
        if env:
            self._node_env[node] = dict(env)
        else:
            self._node_env.pop(node, None)

    def close(self) -> None:
        """After the engines stopped their nodes: the spawner thread may end."""
        self._spawner.shutdown(wait=True, cancel_futures=True)
