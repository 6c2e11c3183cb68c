"""Where the table lives, as engines and the log reader see it: the seam the
run's storages (harness.run.storage) implement."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

__all__ = ["RECOVERED_REPLACED_COMMITS", "Storage"]

# In a run folder: what `check` read of the store's log of replaced commit
# files when it recovered the table of a run whose harness was killed (such
# a run wrote no run.json to hold it).
RECOVERED_REPLACED_COMMITS = "logs/seaweedfs-replaced-commits.json"


class Storage(ABC):
    kind: str

    @abstractmethod
    def table_uri(self, name: str) -> str: ...

    # The S3 fault proxy's steering client (harness.s3proxy.client.S3ProxyClient)
    # when one stands in front of the store; typed loosely because the bottom
    # layer cannot name a class of the layer above it.
    proxy: Any = None

    def replaced_commits(self, table_uri: str) -> dict[str, Any] | None:
        """run.json's `store_replaced_commits`: the table's commit files the
        store's own log shows a second write replacing; None where the store
        keeps no such log."""
        return None

    def client_env(self, client: str, node: str | None = None) -> dict[str, str]:
        """Environment for an engine process (Sail reads AWS_* from it)."""
        return {}

    def deltars_options(self, client: str, node: str | None = None) -> dict[str, str]:
        """delta-rs `storage_options` for one client."""
        return {}

    def coordinator_endpoint(self) -> str | None:
        """The DynamoDB endpoint engines reach a commit coordinator at (None:
        the storage offers none)."""
        return None

    def coordinator_reader_options(self) -> dict[str, str] | None:
        """boto3 settings for the harness's own reads of the coordinator's
        DynamoDB (None: no coordinator endpoint)."""
        return None

    def reader_options(self) -> dict[str, str] | None:
        """boto3 settings for the harness's own log reader (None: local)."""
        return None

    def describe(self) -> dict[str, Any]:
        """What goes into spec.json: enough to re-run, never a secret."""
        return {"kind": self.kind}

    @abstractmethod
    def stop(self) -> None:
        """Stop what the storage started (a moto server, the proxy)."""
