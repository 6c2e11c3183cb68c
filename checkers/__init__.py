"""Checkers by name. Each is a pure function (history, log) -> CheckResult."""

from __future__ import annotations

from checkers import (
    app_txn,
    atomicity,
    bank,
    compaction,
    create_race,
    duplicates,
    durability,
    exception_classes,
    list_append,
    log_sanity,
    metadata,
    partitions,
    read_validity,
    serializability,
    unique_key,
)
from checkers.base import CheckerFn

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
}
