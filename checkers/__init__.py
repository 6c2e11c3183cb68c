"""Checkers by name. Each is a pure function (history, log) -> CheckResult."""

from __future__ import annotations

from collections.abc import Callable

from checkers import (
    app_txn,
    atomicity,
    bank,
    compaction,
    create_race,
    duplicates,
    durability,
    exception_classes,
    identity,
    list_append,
    liveness,
    log_sanity,
    metadata,
    multi_table,
    partitions,
    read_validity,
    restore,
    serializability,
    streaming,
    time_travel,
    unique_key,
    vacuum,
)
from checkers.base import CheckerFn
from checkers.facts import reads
from harness.core.errors import HarnessError
from harness.core.history import History, Op
from harness.core.plugins import load_object

CHECKERS: dict[str, CheckerFn] = {
    log_sanity.NAME: log_sanity.check,
    durability.NAME: durability.check,
    atomicity.NAME: atomicity.check,
    duplicates.NAME: duplicates.check,
    read_validity.NAME: read_validity.check,
    serializability.NAME: serializability.check,
    bank.NAME: bank.check,
    unique_key.NAME: unique_key.check,
    list_append.NAME: list_append.check,
    partitions.NAME: partitions.check,
    compaction.NAME: compaction.check,
    metadata.NAME: metadata.check,
    app_txn.NAME: app_txn.check,
    create_race.NAME: create_race.check,
    exception_classes.NAME: exception_classes.check,
    time_travel.NAME: time_travel.check,
    restore.NAME: restore.check,
    vacuum.NAME: vacuum.check,
    identity.NAME: identity.check,
    multi_table.NAME: multi_table.check,
    streaming.NAME: streaming.check,
    liveness.NAME: liveness.check,
}


def checker_fn(name: str) -> CheckerFn:
    """A registered checker by name, or one of your own as "module:function",
    a pure function (History, TransactionLog) -> CheckResult."""
    if name in CHECKERS:
        return CHECKERS[name]
    if ":" not in name:
        raise HarnessError(f"unknown checker {name!r}; valid: {', '.join(CHECKERS)}, or module:function of your own")
    fn = load_object(name, "checker")
    if not callable(fn):
        raise HarnessError(f"checker {name!r} is not a function")
    return fn


# Checkers a hole in the table's log does not bound (checkers.horizon):
# log-sanity judges the log entries themselves, create-race the tables its
# rounds created, each by its own log; liveness the history's timing.
WHOLE_LOG = frozenset({log_sanity.NAME, create_race.NAME, liveness.NAME})

# Checkers whose verdict rests on these ops of the history, and on no version
# of the log that they did not see: past a hole in the log they stay valid
# while none of the ops may have met a later version. Every other checker
# judges the table at every version, so a version it cannot judge leaves it
# unknown (checkers.horizon).
RESTS_ON_OPS: dict[str, Callable[[History], list[Op]]] = {
    read_validity.NAME: reads,
    exception_classes.NAME: exception_classes.judged_ops,
}
