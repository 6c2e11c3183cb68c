"""Checkers by name. Each is a pure function (history, log) -> CheckResult."""

from __future__ import annotations

from checkers import atomicity, bank, duplicates, durability, log_sanity, read_validity, serializability
from checkers.base import CheckerFn

CHECKERS: dict[str, CheckerFn] = {
    log_sanity.NAME: log_sanity.check,
    durability.NAME: durability.check,
    atomicity.NAME: atomicity.check,
    duplicates.NAME: duplicates.check,
    read_validity.NAME: read_validity.check,
    serializability.NAME: serializability.check,
    bank.NAME: bank.check,
}
