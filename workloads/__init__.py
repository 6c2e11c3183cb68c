"""Workloads by name: each lives in its own module, imported on demand."""

from __future__ import annotations

import importlib

from harness.core.errors import HarnessError
from workloads.base import Workload

# name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "append": "workloads.append:AppendWorkload",
    "register": "workloads.register:RegisterWorkload",
    "bank": "workloads.bank:BankWorkload",
    "delete-insert": "workloads.delete_insert:DeleteInsertWorkload",
    "upsert": "workloads.upsert:UpsertWorkload",
    "list-append": "workloads.list_append:ListAppendWorkload",
    "partitioned": "workloads.partitioned:PartitionedWorkload",
    "compaction": "workloads.compaction:CompactionWorkload",
    "metadata": "workloads.metadata:MetadataWorkload",
    "app-txn": "workloads.app_txn:AppTxnWorkload",
    "create-race": "workloads.create_race:CreateRaceWorkload",
}
WORKLOAD_NAMES = tuple(_REGISTRY)


def make_workload(name: str, seed: int, isolation: str | None = None) -> Workload:
    target = _REGISTRY.get(name)
    if target is None:
        raise HarnessError(f"unknown workload {name!r}; valid: {', '.join(WORKLOAD_NAMES)}")
    module, cls = target.split(":")
    return getattr(importlib.import_module(module), cls)(seed, isolation)
