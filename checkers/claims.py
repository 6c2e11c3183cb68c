"""The spec's claims, one line of text per id: what `spec C7` says.

This is the contract under test as the project cites it: checkers and
conformance rows cite its claims by id; the report shows the text beside
the id, so a person reading an anomaly need not look it up; the docs'
reference page "The contract under test" is written from it. The claims
restate Delta Lake's documentation (the spec the project was written
against); `tests/test_claims.py` keeps this table in step with that spec
wherever it is beside the checkout.

That spec speaks of concurrent writes only. The T claims restate what
Delta Lake's documentation says of the operations users run beside their
writers (time travel, VACUUM, RESTORE); the project adds them, so their
checks cite a claim as every other check does.
"""

from __future__ import annotations

__all__ = ["CLAIMS", "PROJECT_CLAIM_PREFIXES", "claim_text"]

CLAIMS: dict[str, str] = {
    "C1": (
        "A transaction covers exactly one table. There are no multi-table transactions and no BEGIN/END "
        "grouping; each statement (INSERT, UPDATE, DELETE, MERGE, OPTIMIZE, ALTER, DataFrame write) is one "
        "transaction. MERGE combines inserts, updates and deletes into one write transaction."
    ),
    "C2": (
        "A read that touches several tables sees each table at its latest version at access time; there is no"
        " cross-table snapshot."
    ),
    "C3": "Primary and foreign keys are informational only; nothing enforces them.",
    "C4": (
        "A commit is one new entry in the table's transaction log (`_delta_log/<20-digit version>.json`) that"
        " names every data file the transaction wrote. Each commit increments the version by one. The table "
        "at version v is exactly the data files marked live by log entries 0..v."
    ),
    "C5": (
        "Data files written by a transaction that never committed are not part of the table and never become "
        "visible; they may be left behind as untracked files, and VACUUM removes untracked files, including "
        "such leftovers."
    ),
    "C6": (
        "Every transaction either completes fully or fails fully: no reader ever sees part of a transaction's effects."
    ),
    "C7": (
        "A committed change is permanent: the durability of the table is the durability of the object store "
        "that holds the log and the data files."
    ),
    "C8": (
        "A write runs in three phases: (1) read the latest table version, if the operation needs to, to find "
        "the files it must rewrite; (2) write new data files; (3) validate and commit: check whether the "
        "proposed change conflicts with anything committed since the snapshot it read; if not, commit as a "
        "new version; if so, fail with a concurrent-modification exception. A conflict never corrupts the "
        "table."
    ),
    "C9": (
        "Append-only writes (blind INSERT / DataFrame append) do not read table state before committing, as "
        "long as they contain no subquery or condition that references the target table. They still validate "
        "against the log's metadata (e.g. schema)."
    ),
    "C10": "There are no locks on reads or writes, so there are no deadlocks.",
    "C11": (
        "Multiple writers on multiple clusters (or workspaces) may modify the same table, even the same "
        "partition, concurrently; each sees a consistent snapshot and the writes get a serial order. Some may"
        " fail with conflicts, but the table is never corrupted, and readers elsewhere keep a consistent "
        "view."
    ),
    "C12": (
        "Reads always use snapshot isolation: a reader sees the table as of one committed version for the "
        "whole query/job, even if the table is modified meanwhile."
    ),
    "C13": (
        "The write isolation level is a table property: `ALTER TABLE t SET TBLPROPERTIES "
        "('delta.isolationLevel' = 'Serializable' | 'WriteSerializable')`. Databricks' default is "
        "WriteSerializable. (Engines differ in their default and in which spellings they accept; the harness "
        "records the level that the table actually carries and, where the engine writes it, the level "
        "recorded in each commit's `commitInfo.isolationLevel`.)"
    ),
    "C14": (
        "Serializable: committed writes and all reads are serializable; there exists a serial order of one-"
        "at-a-time execution producing the observed table, and for writes that order is exactly the order in "
        "the table history."
    ),
    "C15": (
        "WriteSerializable: only the writes are serializable; the serial order may differ from the history "
        "order. It is stronger than snapshot isolation. A reader may see a table state that a history-ordered"
        " execution would never have produced."
    ),
    "C16": (
        "The canonical example: a long DELETE (deleteTxn) and an INSERT (insertTxn) both start from version "
        "v0; insertTxn commits v1; deleteTxn then tries to commit v2. Under Serializable, deleteTxn must fail"
        " with a conflict. Under WriteSerializable, deleteTxn commits; the rows inserted by insertTxn survive"
        " (as if insertTxn ran after deleteTxn), while the history shows insertTxn at v1 before deleteTxn at "
        "v2."
    ),
    "C17": (
        "A metadata change (table properties, schema, protocol/features) makes every concurrent write fail. "
        "Examples: setting a table property, enabling deletion vectors, dropping a table feature, adding "
        "columns, changing column mapping."
    ),
    "C18": "A streaming read fails when it reaches a commit that changes metadata.",
    "C19": "Tables with identity columns do not support concurrent transactions.",
    "M1": "INSERT vs INSERT: cannot conflict",
    "M2": ("UPDATE / DELETE / MERGE vs INSERT: cannot conflict in WriteSerializable; can conflict in Serializable"),
    "M3": "UPDATE / DELETE / MERGE vs UPDATE / DELETE / MERGE: can conflict in both levels",
    "M4": "OPTIMIZE vs INSERT: cannot conflict",
    "M5": (
        "OPTIMIZE vs UPDATE / DELETE / MERGE: with deletion vectors enabled: cannot conflict unless ZORDER BY"
        " is used; otherwise can conflict (both levels)"
    ),
    "M6": "OPTIMIZE vs OPTIMIZE: as M5",
    "R1": "INSERT vs INSERT: cannot conflict",
    "R2": (
        "UPDATE / DELETE / MERGE vs INSERT: cannot conflict in WriteSerializable; in Serializable can "
        "conflict when modifying the same row"
    ),
    "R3": "UPDATE / DELETE / MERGE vs UPDATE / DELETE / MERGE: can conflict only when modifying the same row",
    "R4": "OPTIMIZE vs INSERT: cannot conflict",
    "R5": "OPTIMIZE vs UPDATE / DELETE / MERGE: can conflict only when ZORDER BY is used",
    "R6": "OPTIMIZE vs OPTIMIZE: as R5",
    "R7": (
        "Row-level detection falls back to file-level (M-table) for conditions on complex types "
        "(struct/array/map), non-deterministic expressions, subqueries and correlated subqueries. Under many "
        "concurrent transactions the writer may prefer latency and report a conflict anyway."
    ),
    "R8": (
        "REORG that rewrites files to apply deletion vectors behaves like OPTIMIZE; REORG ... APPLY (UPGRADE "
        "...) changes the protocol and conflicts with every concurrent operation."
    ),
    "P1": (
        'Two operations marked "can conflict" conflict only if they touch the same set of files. Partitioning'
        " the table by the columns used in the operations' conditions makes the file sets disjoint. Example: "
        "`UPDATE t WHERE date > '2010-01-01'` and `DELETE t WHERE date < '2010-01-01'` conflict on a table "
        "not partitioned by `date`, and do not conflict on a table partitioned by `date`."
    ),
    "P2": (
        "A MERGE whose condition only joins on the partition columns (`s.date = t.date AND s.country = "
        "t.country`) may scan the whole table and conflict with concurrent writes to other partitions; adding"
        " literal partition predicates (`t.date = '<d>' AND t.country = '<c>'`) makes concurrent merges on "
        "different partitions safe."
    ),
    "E1": (
        "ConcurrentAppendException: a concurrent operation added files in a partition (or anywhere in an "
        "unpartitioned table) that this operation read. The added files may come from INSERT, DELETE, UPDATE "
        "or MERGE. Under WriteSerializable, files added by blind INSERTs do not conflict with any operation; "
        "under Serializable they may. Caveat: under WriteSerializable, blind appends can still conflict when "
        "several concurrent DELETE/UPDATE/MERGE operations could reference the values they inserted."
    ),
    "E2": ("ConcurrentDeleteReadException: a concurrent operation deleted (rewrote) a file that this operation read."),
    "E3": (
        "ConcurrentDeleteDeleteException: a concurrent operation deleted a file that this operation also "
        "deletes, e.g. two compactions of the same files."
    ),
    "E4": (
        "MetadataChangedException: a concurrent transaction updated the table's metadata (ALTER TABLE, a "
        "write that changes the schema)."
    ),
    "E5": (
        "ConcurrentTransactionException: two writers using the same transaction identity (streaming "
        "checkpoint / application id, `txnAppId`) write concurrently."
    ),
    "E6": (
        "ProtocolChangedException: the table was upgraded to a new protocol version; or several writers "
        "create or replace the same table at once; or several writers write to an empty path at once."
    ),
    "T1": (
        "A read of version v (`VERSION AS OF v`, or a timestamp that resolves to v) returns the table at "
        "version v as C4 defines it; a version whose log entries or data files are no longer kept fails with"
        " an error, never with another state."
    ),
    "T2": (
        "VACUUM deletes only data files that no version within the retention period references (the files "
        "a commit removed longer ago than `delta.deletedFileRetentionDuration`, 7 days by default), and "
        "untracked files older than that period; the table's current version always reads whole. A "
        "retention below the default is refused unless the retention check is turned off, because readers "
        "of older versions and writers not yet committed may still need the files it would delete."
    ),
    "T3": (
        "RESTORE TABLE t TO VERSION AS OF v commits a new version whose table is version v's: it adds back "
        "the files of v that are no longer live and removes the live files v did not have; its commitInfo "
        "names the operation RESTORE and the version restored."
    ),
    "T4": (
        "An identity column (GENERATED ALWAYS AS IDENTITY) gets a value no other row of the table has held, "
        "in the direction of its step; the commit that writes new values records the largest of them (the "
        "smallest, for a negative step) as the column's `delta.identity.highWaterMark` (the Delta protocol's "
        "identity columns)."
    ),
    "T5": (
        "A Structured Streaming query that writes a Delta table as its sink, with a checkpoint, writes each "
        "row of its source exactly once, also when it is stopped or its driver dies mid-batch and it restarts "
        "from the checkpoint: the sink's commits record the query id and batch id (a `txn` action) and a "
        "batch already committed is not written again."
    ),
}

# Claims the project adds beyond the spec's concurrency contract.
PROJECT_CLAIM_PREFIXES = ("T",)


def claim_text(claim: str | None) -> str:
    """The claim's text, or "" for an id the spec does not have.

    A range ("E1-E6", cited by a conflict that carries none of the classes)
    names each claim in it by its first words."""
    if claim and "-" in claim:
        first, _, last = claim.partition("-")
        prefix = first.rstrip("0123456789")
        if last.startswith(prefix) and first[len(prefix) :].isdigit() and last[len(prefix) :].isdigit():
            ids = [f"{prefix}{n}" for n in range(int(first[len(prefix) :]), int(last[len(prefix) :]) + 1)]
            if all(i in CLAIMS for i in ids):
                return "One of " + "; ".join(f"{i} {CLAIMS[i].split(':')[0]}" for i in ids) + "."
    return CLAIMS.get(claim or "", "")
