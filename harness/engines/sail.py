"""Sail: a Spark Connect server in Rust (pysail), one server process per node.

A release other than the pinned one (`--engine sail==0.6.6`) runs its server
and its Spark Connect client from an environment of its own
(harness.engines.envs). What each release can do is one table, `SINCE`,
found by running each series' last release: Delta tables from 0.3.2, DELETE
from 0.5 (0.3-0.4 reject a BIGINT column compared with an integer literal,
the form every workload's predicate takes), MERGE and ALTER TABLE SET
TBLPROPERTIES from 0.6, UPDATE from 0.7.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from harness.core.capacity import Load, MiB
from harness.core.procs import ManagedProcess, venv_bin
from harness.core.storage import Storage
from harness.engines.base import Capabilities, ClientConfig, Node
from harness.engines.envs import ReleaseEnv, ensure
from harness.engines.releases import EngineRelease, env_request, parse_release
from harness.engines.servers import ServerEngine

SAIL_CAPABILITIES = Capabilities(
    # Not here: add-columns ("unsupported ALTER TABLE operation") and
    # append-idempotent (txnAppId/txnVersion ignored: no txn action, a
    # re-sent pair applies twice), both seen with Sail 0.7.2.
    ops=frozenset(
        {
            "create-table",
            "append",
            "read",
            "update",
            "delete",
            "merge",
            "insert_select",
            "set-properties",
            "create-table-at",
            "read-tables",
            "read-as-of-time",
        }
    ),
    read_version_known=False,
    commit_version_known=False,
    row_level_concurrency=False,
    # Sail writes no isolation level of its own; Delta's documented default.
    default_isolation="WriteSerializable",
    notes="conflicts surface as a generic 'Failed to commit transaction'; "
    "no readVersion in commitInfo; no OPTIMIZE/VACUUM/DESCRIBE HISTORY",
)


# The first release of each op the pinned release has (ops not named: 0.3).
SINCE: dict[str, tuple[int, int]] = {
    "delete": (0, 5),
    "merge": (0, 6),
    "set-properties": (0, 6),
    "update": (0, 7),
    "read-as-of-time": (0, 7),  # checked with 0.7.2 only
}


def capabilities_of(release: str | None) -> Capabilities:
    """The pinned release's capabilities, narrowed to what `release` has."""
    if release is None:
        return SAIL_CAPABILITIES
    v = parse_release(release)[:2]
    ops = frozenset(op for op in SAIL_CAPABILITIES.ops if v >= SINCE.get(op, (0, 3)))
    missing = sorted(SAIL_CAPABILITIES.ops - ops)
    notes = SAIL_CAPABILITIES.notes + (f"; sail {release} lacks {', '.join(missing)}" if missing else "")
    return dataclasses.replace(SAIL_CAPABILITIES, ops=ops, notes=notes)


def installed_capabilities() -> Capabilities:
    """Where a client runs: the capabilities of the pysail installed there
    (the harness's own, or a release's environment)."""
    from importlib.metadata import version

    return capabilities_of(version("pysail"))


class SailEngine(ServerEngine):
    name = "sail"
    capabilities = SAIL_CAPABILITIES

    def __init__(self, release: str | None = None, progress: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.release = release
        self.progress = progress
        self.env: ReleaseEnv | None = None
        if release is not None:
            self.capabilities = capabilities_of(release)

    def prepare(self) -> None:
        if self.release is not None and self.env is None:
            self.env = ensure(env_request(EngineRelease(self.name, self.release)), self.progress)

    def _spawn(self, name: str, storage: Storage, log: Path, extra_env: dict[str, str] | None = None) -> ManagedProcess:
        # One storage identity per node: a Sail server holds one set of
        # credentials for all the sessions it serves.
        env = {
            **os.environ,
            **storage.client_env(name),
            "RUST_LOG": os.environ.get("RUST_LOG", "info"),
            **(extra_env or {}),
        }
        self.prepare()
        sail = self.env.bin("sail") if self.env is not None else venv_bin("sail")
        return ManagedProcess(
            f"sail-{name}",
            [sail, "spark", "server", "--ip", "127.0.0.1", "--port", "0"],
            log,
            env=env,
        ).start()

    def node_load(self) -> Load:
        # Measured: a Sail server holds 356 MiB resident after a short run.
        return Load(memory=512 * MiB, tasks=1, files=1)

    def _ready(self, srv: ManagedProcess, timeout: float) -> str:
        m = srv.wait_for_log(r"Spark Connect server on 127\.0\.0\.1:(\d+)", timeout)
        return f"sc://127.0.0.1:{m.group(1)}"

    def client_config(
        self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float
    ) -> ClientConfig:
        return ClientConfig(
            engine=self.name,
            node=node.name,
            process=process,
            table_uri=table_uri,
            url=node.url,
            timeout=timeout,
            python=self.env.python if self.env is not None else None,
        )

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        if self.release is not None:
            self.prepare()
            assert self.env is not None
            return {"pysail": self.env.resolved["pysail"], "pyspark": self.env.resolved["pyspark"]}
        return {"pysail": version("pysail"), "pyspark": version("pyspark")}
