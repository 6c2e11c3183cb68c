"""Workloads by name."""

from __future__ import annotations

from harness.procs import HarnessError
from workloads.base import Workload

WORKLOAD_NAMES = ("append", "register", "bank", "delete-insert")


def make_workload(name: str, seed: int, isolation: str | None = None) -> Workload:
    if name == "append":
        from workloads.append import AppendWorkload

        return AppendWorkload(seed, isolation)
    if name == "register":
        from workloads.register import RegisterWorkload

        return RegisterWorkload(seed, isolation)
    if name == "bank":
        from workloads.bank import BankWorkload

        return BankWorkload(seed, isolation)
    if name == "delete-insert":
        from workloads.delete_insert import DeleteInsertWorkload

        return DeleteInsertWorkload(seed, isolation)
    raise HarnessError(f"unknown workload {name!r}; valid: {', '.join(WORKLOAD_NAMES)}")
