"""Checkers by name. Each is a pure function (history, log) -> CheckResult."""

from __future__ import annotations

from checkers import atomicity, bank, duplicates, durability, log_sanity, read_validity, serializability
from checkers import list_append, unique_key
from checkers import compaction, partitions
from checkers import app_txn, metadata
from checkers import create_race
from checkers import exception_classes
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
