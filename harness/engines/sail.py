"""Sail: a Spark Connect server in Rust (pysail), one server process per node."""

from __future__ import annotations

import os
from pathlib import Path

from harness.core.capacity import Load, MiB
from harness.core.procs import ManagedProcess, venv_bin
from harness.core.storage import Storage
from harness.engines.base import Capabilities, ClientConfig, Node
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


class SailEngine(ServerEngine):
    name = "sail"
    capabilities = SAIL_CAPABILITIES

    def _spawn(self, name: str, storage: Storage, log: Path, extra_env: dict[str, str] | None = None) -> ManagedProcess:
        # One storage identity per node: a Sail server holds one set of
        # credentials for all the sessions it serves.
        env = {
            **os.environ,
            **storage.client_env(name),
            "RUST_LOG": os.environ.get("RUST_LOG", "info"),
            **(extra_env or {}),
        }
        return ManagedProcess(
            f"sail-{name}",
            [venv_bin("sail"), "spark", "server", "--ip", "127.0.0.1", "--port", "0"],
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
            engine=self.name, node=node.name, process=process, table_uri=table_uri, url=node.url, timeout=timeout
        )

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"pysail": version("pysail"), "pyspark": version("pyspark")}
