"""Transactions as the serializability checker sees them (spec C14-C16).

Every committed write op is one transaction at its commit version (from the
log). What it read and wrote is recovered from the data itself: each row
version carries the id of the op that wrote it (``writer``) and, for updates
and merges, the id of the op whose version it replaced (``prev_writer``), so
the checker does not depend on what an engine chooses to report.

Row versions are named by (key, writer): the version of row ``key`` that
transaction ``writer`` installed. ``INITIAL`` names a version that existed
before any transaction of the history (e.g. rows loaded at setup).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

from harness.core.isolation import WRITE_SERIALIZABLE

Key = Hashable
INITIAL = "<initial>"


@dataclass(frozen=True, slots=True)
class RowRef:
    """A row version: row `key` as installed by transaction `writer`."""

    key: Key
    writer: str


@dataclass(frozen=True, slots=True)
class Write:
    """A new row version of `key`; `prev` is the writer of the version it
    replaced (None: an insert of a key with no live version). `attr` is the
    value predicates are evaluated on, where it is not the key itself (e.g.
    rows identified by id, deleted by a range of k)."""

    key: Key
    prev: str | None = None
    attr: Key | None = None


@dataclass(frozen=True, slots=True)
class Predicate:
    """A condition on keys, evaluated at the transaction's read version:
    keys in [lo, hi] (inclusive). Rows matching it that the transaction did
    not see give predicate anti-dependencies (G2)."""

    lo: Key
    hi: Key

    def matches(self, key: Key) -> bool:
        return self.lo <= key <= self.hi  # type: ignore[operator]


@dataclass(slots=True)
class Txn:
    id: str
    version: int  # commit version, from the log
    read_version: int | None = None  # snapshot it read; None when unknown
    reads: tuple[RowRef, ...] = ()  # row versions it observed
    writes: tuple[Write, ...] = ()  # row versions it installed
    deletes: tuple[RowRef, ...] = ()  # row versions it deleted
    predicates: tuple[Predicate, ...] = ()
    isolation: str = WRITE_SERIALIZABLE  # the level the table carried at this commit
    operation: str = ""  # e.g. UPDATE, DELETE, MERGE, WRITE (for explanations)

    @property
    def reads_anything(self) -> bool:
        return bool(self.reads or self.predicates)


@dataclass
class AbortedRead:
    """A committed transaction read a row version whose writer did not commit."""

    reader: str
    row: RowRef
    writer_status: str  # "failed", "never invoked", ...


@dataclass
class TxnHistory:
    """The input of the analysis: committed transactions in commit order plus
    what is known about writers that did not commit."""

    txns: list[Txn]
    failed: set[str] = field(default_factory=set)  # ops that definitely did not commit
    # Transactions whose reads could not be recovered: judged unknown, not guessed.
    unknown: dict[str, str] = field(default_factory=dict)
    assumed_default_level: str | None = None  # recorded when the table carried none
