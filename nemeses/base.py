"""The nemesis seam: a fault that can be started, stopped and healed.

A nemesis never touches the runner directly. It acts on a `Cluster` (the
client workers and engine server processes of the run, see
nemeses/cluster.py) and on the S3 fault proxy, both handed to it in a
`NemesisContext`. That keeps every fault unit-testable with a fake cluster.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Protocol

from harness.s3proxy.client import S3ProxyClient


@dataclass(frozen=True)
class ClientProc:
    """A live client worker: its logical process, node and OS pid, and the
    op it is running (None between ops): name, id, when it started."""

    process: int
    node: str
    pid: int
    op: str | None = None
    op_id: str | None = None
    op_started: float | None = None  # time.monotonic() at its invocation


class Cluster(Protocol):
    """What the nemeses may do to a run. Implemented by harness.run.cluster.RunCluster."""

    def nodes(self) -> list[str]: ...

    def clients(self) -> list[ClientProc]: ...

    def crash_client(self, process: int) -> bool:
        """SIGKILL the worker of `process` (its op becomes info/crash and the
        slot continues under a new process id). False if it is gone."""
        ...

    def server_nodes(self) -> list[str]:
        """Nodes that run a server process of their own (Sail)."""
        ...

    def server_pid(self, node: str) -> int | None: ...

    def kill_server(self, node: str) -> int | None:
        """SIGKILL a node's server; returns the pid killed (None: not running)."""
        ...

    def restart_server(self, node: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Start a node's server again (killing it first if it still runs),
        with `env` added; new workers of the node connect to it."""
        ...

    def server_alive(self, node: str) -> bool: ...

    def set_node_env(self, node: str, env: dict[str, str] | None) -> None:
        """Extra environment for workers spawned for `node` from now on."""
        ...


@dataclass
class NemesisContext:
    rng: random.Random
    cluster: Cluster
    proxy: S3ProxyClient | None = None
    storage_kind: str = "local"
    # Seconds a fault stays on: targets that must outlast it (blackholes) use it.
    fault_seconds: float = 5.0
    # The ops a fault aims at where it aims at ops (the workload's
    # `kill_during`: VACUUM, RESTORE, checkpoints).
    target_ops: frozenset[str] = frozenset()
    # How far into such an op (seconds, a range drawn from) the fault strikes.
    kill_after: tuple[float, float] = (0.0, 0.02)


class NemesisError(Exception):
    """A fault could not be started or stopped (recorded, the run goes on)."""


class Nemesis(ABC):
    """A kind of fault: started and stopped by the nemesis schedule, healed
    before the final phase and on teardown."""

    name: str
    # Needs the S3 fault proxy (and so S3 storage).
    needs_proxy: bool = False

    @abstractmethod
    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        """Inject the fault; returns what was done (goes into the history)."""

    @abstractmethod
    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        """End the fault `start` injected; returns what was done."""

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        """Undo anything of this kind still in effect (idempotent; used
        before the final phase and in teardown, also after Ctrl-C). None
        when there was nothing to undo."""
        return None

    def validate(self, storage_kind: str) -> None:
        """Raise HarnessError when this fault cannot run in this setup; by
        default it runs in every one."""
        return None
