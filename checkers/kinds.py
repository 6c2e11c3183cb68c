"""Every anomaly kind a checker can report, the spec claims it breaks, and its
human name: one table (Elle's way: detection names a kind; what it means
lives here, once).

A kind breaks one claim, or one of a few where the level or the evidence
decides (a cycle breaks C15 under WriteSerializable and C14 under
Serializable). An :class:`~checkers.base.Anomaly` whose kind is not here,
or whose claim is not one of its kind's, is a harness bug and raises.
``None`` among the claims: the kind is evidence against several claims at
once and names none (the README's "(C4)").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "AnomalyKind", "kind_of"]


@dataclass(frozen=True)
class AnomalyKind:
    kind: str
    claims: tuple[str | None, ...]  # the first is the usual one
    title: str  # what a person calls it
    checkers: tuple[str, ...]  # the checkers that report it


_CONFLICT_CLAIMS = ("E1", "E2", "E3", "E4", "E5", "E6")
_CYCLE = ("C15", "C14")

_TABLE: tuple[AnomalyKind, ...] = (
    # log-sanity: the log itself (C4), and data files it names (C7)
    AnomalyKind("log-gap", ("C4",), "Gap in the log's versions", ("log-sanity",)),
    AnomalyKind("log-unparseable", ("C4",), "Unparseable commit", ("log-sanity",)),
    AnomalyKind("log-missing-commit", ("C4",), "Commit file missing", ("log-sanity",)),
    AnomalyKind("log-multiple-metadata", ("C4",), "Two metaData actions in one commit", ("log-sanity",)),
    AnomalyKind("log-multiple-protocol", ("C4",), "Two protocol actions in one commit", ("log-sanity",)),
    AnomalyKind("log-duplicate-file-action", ("C4",), "Two actions on one file in one commit", ("log-sanity",)),
    AnomalyKind("log-checkpoint-mismatch", ("C4",), "Checkpoint disagrees with its commits", ("log-sanity",)),
    AnomalyKind("log-checkpoint-broken", ("C4",), "Checkpoint written in part", ("log-sanity",)),
    AnomalyKind("log-in-commit-timestamp", ("C4",), "In-commit timestamps out of order", ("log-sanity",)),
    AnomalyKind("missing-data-file", ("C7",), "Data file missing from the store", ("log-sanity",)),
    # acknowledged writes
    AnomalyKind("lost-write", ("C7",), "Lost write", ("durability", "app-txn")),
    AnomalyKind("lost-rows", ("C7",), "Rows lost from the final state", ("durability", "app-txn")),
    AnomalyKind("wrong-commit-version", ("C7",), "Wrong commit version reported", ("durability",)),
    AnomalyKind("partial-op", ("C6",), "Partial write", ("atomicity",)),
    AnomalyKind("split-op", ("C4",), "One op in several commits", ("atomicity",)),
    AnomalyKind(
        "failed-but-committed",
        ("C6",),
        "Failed op whose effects committed",
        ("atomicity", "metadata-conflicts", "create-race"),
    ),
    AnomalyKind("orphan-rows", ("C5",), "Rows no op wrote", ("atomicity",)),
    AnomalyKind("duplicate-row", (None,), "Row applied twice", ("duplicates",)),
    AnomalyKind("duplicate-application", ("E5", None), "Write applied twice", ("duplicates", "app-txn")),
    AnomalyKind("duplicate-commit", (None,), "Op committed twice", ("duplicates",)),
    # reads
    AnomalyKind("state-never-existed", ("C12",), "Read of a state no version had", ("read-validity",)),
    AnomalyKind("stale-read", ("C12",), "Stale read", ("read-validity",)),
    AnomalyKind("future-read", ("C12",), "Read from the future", ("read-validity",)),
    AnomalyKind("read-version-mismatch", ("C12",), "Read differs from the version named", ("read-validity",)),
    # bank
    AnomalyKind("wrong-total", ("C6",), "Balances do not sum to the total", ("bank",)),
    AnomalyKind("read-wrong-total", ("C12",), "Read of balances with a wrong total", ("bank",)),
    AnomalyKind("load-never-visible", ("C7", "C6"), "Acknowledged load never visible", ("bank",)),
    # serializability (Adya's phenomena, as Elle names them)
    AnomalyKind("G0", _CYCLE, "Write cycle (G0)", ("serializability",)),
    AnomalyKind("G1a", _CYCLE, "Aborted read (G1a)", ("serializability",)),
    AnomalyKind("G1c", _CYCLE, "Circular information flow (G1c)", ("serializability",)),
    AnomalyKind("G-single", _CYCLE, "Read skew or lost update (G-single)", ("serializability",)),
    AnomalyKind("G2-item", _CYCLE, "Item anti-dependency cycle (G2-item)", ("serializability",)),
    AnomalyKind("G2", _CYCLE, "Predicate anti-dependency cycle (G2)", ("serializability",)),
    AnomalyKind("history-order", ("C14",), "Serial order differs from the log's", ("serializability",)),
    AnomalyKind("snapshot-mismatch", ("C12",), "Read outside its snapshot", ("serializability",)),
    AnomalyKind("duplicate-key", _CYCLE, "Two live rows of one key", ("unique-key",)),
    # list-append
    AnomalyKind("duplicate-position", _CYCLE, "Lost append (two elements at one position)", ("list-append",)),
    AnomalyKind("list-gap", ("C12",), "Gap in a list", ("list-append",)),
    AnomalyKind("broken-link", ("C12",), "Element linked to a missing predecessor", ("list-append",)),
    AnomalyKind("incompatible-order", ("C12",), "Reads of incompatible list orders", ("list-append",)),
    AnomalyKind("non-snapshot-read", ("C12",), "One statement read several states", ("list-append",)),
    # partitions, compaction, metadata
    AnomalyKind("partition-conflict", ("P1",), "Conflict between disjoint partitions", ("partition-conflicts",)),
    AnomalyKind("foreign-partition-rewrite", ("P1",), "Write outside its partition", ("partition-conflicts",)),
    AnomalyKind("compaction-duplicated-rows", ("C8", "M5", "M6"), "Compaction added rows", ("compaction",)),
    AnomalyKind("compaction-lost-rows", ("C8", "M5", "M6"), "Compaction dropped rows", ("compaction",)),
    AnomalyKind("write-on-compacted-files", ("M5",), "Write committed on compacted files", ("compaction",)),
    AnomalyKind(
        "commit-after-metadata-change", ("C17",), "Commit over a concurrent metadata change", ("metadata-conflicts",)
    ),
    AnomalyKind("lost-metadata-update", ("C7",), "Lost metadata change", ("metadata-conflicts",)),
    # app-txn
    AnomalyKind("txn-version-regression", ("E5",), "Application txn version went back", ("app-txn",)),
    # create-race
    AnomalyKind("multiple-creators", ("E6",), "Two creators of one table", ("create-race",)),
    AnomalyKind("table-recreated", ("E6",), "Table created over an existing one", ("create-race",)),
    AnomalyKind("phantom-create", ("E6",), "Create acknowledged, another's table kept", ("create-race",)),
    AnomalyKind("lost-create", ("C7",), "Acknowledged create not durable", ("create-race",)),
    AnomalyKind("lost-append", ("C7",), "Acknowledged append to a raced table lost", ("create-race",)),
    AnomalyKind("race-log-corrupt", ("C4",), "Raced table's log broken", ("create-race",)),
    AnomalyKind("read-state-never-existed", ("C12",), "Read of a raced table's state no version had", ("create-race",)),
    # the operations beside the writers: time travel, RESTORE, VACUUM
    AnomalyKind("time-travel-mismatch", ("T1",), "Time-travel read of another state", ("time-travel",)),
    AnomalyKind("restore-mismatch", ("T3",), "RESTORE left another state", ("restore",)),
    AnomalyKind("vacuumed-live-file", ("T2",), "VACUUM deleted a file still in retention", ("vacuum",)),
    AnomalyKind("duplicate-identity-value", ("T4",), "Identity value given twice", ("identity",)),
    AnomalyKind("identity-high-water-mark", ("T4",), "High water mark below a value written", ("identity",)),
    AnomalyKind("stream-duplicate-row", ("T5",), "A source row reached the sink twice", ("streaming",)),
    AnomalyKind("stream-lost-row", ("T5",), "A source row never reached the sink", ("streaming",)),
    AnomalyKind("stream-crossed-metadata-change", ("C18",), "A stream read past a metadata change", ("streaming",)),
    AnomalyKind("cross-table-commit", ("C1",), "A commit carried another table's write", ("multi-table",)),
    AnomalyKind(
        "multi-table-read-mismatch", ("C2",), "A query over two tables saw no version of one", ("multi-table",)
    ),
    AnomalyKind(
        "concurrent-identity-commit", ("C19",), "Concurrent identity transactions both committed", ("identity",)
    ),
    # liveness: an op no fault explains went unanswered (a verdict of unknown)
    AnomalyKind("stalled-op", ("C10",), "Op stalled while others completed", ("liveness",)),
    # exception classes
    AnomalyKind("conflict-unclassified", ("E1-E6",), "Conflict of no documented class", ("exception-classes",)),
    AnomalyKind("wrong-conflict-class", _CONFLICT_CLAIMS, "Conflict class the log rules out", ("exception-classes",)),
)

KINDS: dict[str, AnomalyKind] = {k.kind: k for k in _TABLE}


def kind_of(kind: str, claim: str | None) -> AnomalyKind:
    """The table's row for `kind`; raises ValueError when the kind is not in
    the table or `claim` is not one it breaks (a checker bug)."""
    row = KINDS.get(kind)
    if row is None:
        raise ValueError(f"anomaly kind {kind!r} is not in checkers/kinds.py")
    if claim not in row.claims:
        raise ValueError(f"anomaly kind {kind!r} breaks {row.claims}, not {claim!r}")
    return row
