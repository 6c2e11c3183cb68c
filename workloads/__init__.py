"""Workloads by name: each lives in its own module, imported on demand."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.core.plugins import load_object
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
    "bank-overwrite": "workloads.bank_overwrite:BankOverwriteWorkload",
    "maintenance": "workloads.maintenance:MaintenanceWorkload",
    "identity": "workloads.identity:IdentityWorkload",
    "multi-table": "workloads.multi_table:MultiTableWorkload",
    "streaming": "workloads.streaming:StreamingWorkload",
}
WORKLOAD_NAMES = tuple(_REGISTRY)


def make_workload(name: str, seed: int, isolation: str | None = None) -> Workload:
    """A registered workload by name, or one of your own as "module:Class"
    (a Workload subclass in a module the harness and its workers can import,
    e.g. on PYTHONPATH)."""
    target = _REGISTRY.get(name)
    if target is None and ":" not in name:
        raise HarnessError(
            f"unknown workload {name!r}; valid: {', '.join(WORKLOAD_NAMES)}, or module:Class of your own"
        )
    cls = load_object(target or name, "workload")
    if not (isinstance(cls, type) and issubclass(cls, Workload)):
        raise HarnessError(f"workload {name!r} is not a subclass of workloads.base.Workload")
    return cls(seed, isolation)
