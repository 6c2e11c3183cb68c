"""Write serializability (spec C14-C16): the committed writes, recovered from
the history and the table's own data, must have an acyclic dependency graph
(WriteSerializable), and at Serializable commits also follow the history order.

Recovering transactions (Elle's recoverability, on rows): every row version
is identified by (key, writer): ``k`` (falling back to ``id``) and the
``writer`` op id. A commit's new row versions are those whose writer is the
committing op; copies that a copy-on-write rewrite carries over keep their
old writer and are not new. ``prev_writer`` on a new version names the
version it replaced, which is also what the transaction read. A version alive
before a commit and gone after it, with no new version of its key, was
deleted. Predicates and explicit reads come from the op's invocation (e.g.
``{"predicate": [lo, hi]}``, ``{"reads": [[k, writer], ...]}``, and
``{"read_keys": [k, ...]}``: keys it read, so inserting one read it absent); the read
version from ``commitInfo.readVersion`` or, where the engine reports it, the op.
"""

from __future__ import annotations

from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id
from checkers.row_versions import fresh, keep, settle, take
from checkers.txn_columns import ColumnsBuilder
from checkers.txn_graph import TxnAnalysis, analyze
from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory, Write
from harness.core.history import FAIL, History, Op
from harness.core.isolation import LEVELS, SERIALIZABLE, WRITE_SERIALIZABLE
from harness.deltalog import TransactionLog

NAME = "serializability"


def default_isolation(history: History) -> str:
    level = history.table_declaration().default_isolation
    return level if level in LEVELS else WRITE_SERIALIZABLE  # Databricks' documented default (spec C13)


def _default_by_node(history: History) -> dict[str, str]:
    """Mixed-engine runs: each node's engine default, for commits by its clients."""
    declared = history.table_declaration()
    by_engine = declared.default_isolation_by_engine
    return {node: by_engine[eng] for node, eng in declared.node_engines.items() if by_engine.get(eng) in LEVELS}


def extract(history: History, log: TransactionLog, columns: ColumnsBuilder | None = None) -> TxnHistory:
    """The committed write transactions of a run, from its log and data;
    also added to `columns` as they come, in commit order (while the data
    files still decode, where the analysis would wait for them all)."""
    ops: dict[str, Op] = {op.id: op for op in history.ops()}
    failed = {op.id for op in ops.values() if op.type == FAIL}
    default = default_isolation(history)
    node_default = _default_by_node(history)
    assumed_levels: set[str] = set()
    # Which column identifies a row and which one predicates read, as the
    # workload declared them when it created the table.
    declared = history.table_declaration()
    key_col = declared.row_key
    attr_col = declared.predicate_column
    level_assumed = False
    alive: dict[str, list[tuple[Any, str, Any]]] = {}  # path -> row versions (key, writer, prev)
    attrs: dict[Any, Any] = {}  # row key -> predicate attribute, where it differs
    live_versions: dict[tuple[Any, str], int] = {}  # (key, writer) -> copies alive
    dropped: set[tuple[Any, str]] = set()  # (key, writer) alive before, no copy now
    txns: list[Txn] = []
    unknown: dict[str, str] = {}
    last_delete: dict[Any, str] = {}  # key -> txn that last deleted it, so far in commit order
    # Row versions whose writer is no op of the history, named after the
    # commit that brought them in: a replay's setup rows carry the writers
    # of the run it replays (harness.repro), which were all committed by then.
    strays: dict[tuple[Any, Any], str] = {}
    for version, commit, adds, removes in log.replay():
        if version == 0 and commit.metadata is not None and not adds:
            continue  # the table's creation
        before_removed = take(alive, removes)
        added: list[tuple[Any, str, Any]] = []
        for add in adds:
            rows = log.add_values(add)
            keys = (rows.column(key_col) if key_col else None) or rows.column("k") or rows.column("id") or []
            if attr_col and attr_col != key_col:
                attr = rows.column(attr_col)
                if attr is not None:
                    # strict=False: a file without a key column has no keys, and so
                    # no attributes and no row versions.
                    attrs.update(zip(keys, attr, strict=False))
            writers = rows.column("writer") or None
            prevs = rows.column("prev_writer") or None
            if strays:
                writers = [strays.get((k, w), w) for k, w in zip(keys, writers or [None] * len(keys), strict=False)]
                prevs = [strays.get((k, p), p) for k, p in zip(keys, prevs or [None] * len(keys), strict=False)]
            keep(alive, add["path"], keys, writers, prevs, added)
        # New iff no copy of (key, writer) was alive before this commit;
        # rewritten files carry unchanged versions over under the old writer,
        # and so does a deletion-vector update, remove(F) + add(F, DV): the
        # rows its DV deletes are in before_removed only, so deleted.
        added_ids, new = fresh(live_versions, added)
        op_id = commit_op_id(commit.commit_info or {})
        if op_id is None:
            new_writers = {w for _, w, _ in new}
            if len(new_writers) > 1:
                new_writers = {w for w in new_writers if w in ops} or new_writers
            if len(new_writers) > 1:
                # Versions never alive before are a commit's own writes; the
                # others among its new ones are dropped versions come back
                # (delta-rs 0.8.1 re-adding rows an earlier overwrite replaced).
                new_writers = {w for k, w, _ in new if (k, w) not in live_versions and (k, w) not in dropped}
            if len(new_writers) == 1:
                op_id = next(iter(new_writers))
        tid = f"v{version}" if op_id is None else str(op_id)
        stray = {(k, w) for k, w, _ in new if w is not None and w != tid and w not in ops}
        if stray:
            strays.update(dict.fromkeys(stray, tid))
            for add in adds:
                alive[add["path"]] = _renamed(alive[add["path"]], strays)
            added, new = _renamed(added, strays), _renamed(new, strays)
            added_ids = [(k, w) for k, w, _ in added]
        removed_now = settle(live_versions, dropped, before_removed, added_ids)
        if op_id is None and removed_now:
            # No new rows and no op id in the log (e.g. a DELETE by an engine
            # that does not tag commits): whose commit this is stays unknown.
            unknown[tid] = (
                f"commit {version} deleted {len(removed_now)} row version(s) but names no op, "
                "and no new row says which op wrote it"
            )
        writes = tuple([Write(k, p, attrs.get(k)) for k, _, p in new])
        if removed_now:
            new_keys = {k for k, _, _ in new}
            deletes = tuple([RowRef(k, w) for k, w in sorted(removed_now, key=repr) if k not in new_keys])
        else:
            deletes = ()
        op = ops.get(tid)
        reads, preds = _declared_reads(op)
        reads += _absent_reads(op, writes, last_delete)
        read_version = commit.read_version
        if read_version is None and op is not None and isinstance(op.value, dict):
            rv = op.value.get("read_version")
            read_version = rv if isinstance(rv, int) else None
        level = log.property_at(version - 1, "delta.isolationLevel") if version > 0 else None
        if level not in LEVELS:
            level_assumed = True
            node = op.invoke.node if op is not None else None
            level = node_default.get(node, default) if node is not None else default
            assumed_levels.add(level)
        txn = Txn(tid, version, read_version, reads, writes, deletes, preds, level, commit.operation or "")
        txns.append(txn)
        if columns is not None:
            columns.add_txn(txn)
        if deletes:
            last_delete.update((d.key, tid) for d in deletes)
    assumed = "/".join(sorted(assumed_levels)) if node_default else default
    return TxnHistory(txns, failed, unknown, assumed if level_assumed else None)


def _renamed(versions: list[tuple[Any, Any, Any]], strays: dict[tuple[Any, Any], str]) -> list[tuple[Any, Any, Any]]:
    """Row versions (key, writer, prev) with each stray writer replaced by
    the commit that brought its version in."""
    return [(k, strays.get((k, w), w), p) for k, w, p in versions]


def _declared_reads(op: Op | None) -> tuple[tuple[RowRef, ...], tuple[Predicate, ...]]:
    if op is None or not isinstance(op.invoke.value, dict):
        return (), ()
    v = op.invoke.value
    reads = tuple([RowRef(k, w if w is not None else INITIAL) for k, w in (op.value or {}).get("reads", []) or []])
    pred = v.get("predicate")
    preds = (Predicate(pred[0], pred[1]),) if isinstance(pred, (list, tuple)) and len(pred) == 2 else ()
    return reads, preds


def _absent_reads(op: Op | None, writes: tuple[Write, ...], last_delete: dict[Any, str]) -> tuple[RowRef, ...]:
    """A transaction that read a key (its invocation's ``read_keys``, e.g. a
    MERGE's source keys) and inserted it (no ``prev_writer``) read the key
    as absent. Which absence is unknown; the latest one before its commit
    (after the key's last delete, else before any version) is the charitable
    choice: a version installed since then, which it did not see, still gives
    the anti-dependency that exposes two inserts of one absent key."""
    if op is None or not isinstance(op.invoke.value, dict) or not op.invoke.value.get("read_keys"):
        return ()
    read_keys = set(op.invoke.value["read_keys"])
    return tuple(
        RowRef(w.key, last_delete.get(w.key, INITIAL)) for w in writes if w.prev is None and w.key in read_keys
    )


def _to_anomaly(a: Any, versions: dict[str, int], levels: dict[str, str]) -> Anomaly:
    # A cycle breaks WriteSerializable and so Serializable too: cite the
    # claim of the level its transactions' table actually carried.
    all_serializable = bool(a.txns) and all(levels.get(t) == SERIALIZABLE for t in a.txns)
    claim = {"history-order": "C14", "snapshot-mismatch": "C12"}.get(
        a.kind, "C15" if a.level == WRITE_SERIALIZABLE and not all_serializable else "C14"
    )
    return Anomaly(
        a.kind,
        claim,
        a.explanation,
        ops=a.txns,
        versions=[versions[t] for t in a.txns if t in versions],
        details={"level": a.level, "edges": [e.to_json() for e in a.edges], "dot": a.dot},
    )


def check(history: History, log: TransactionLog) -> CheckResult:
    if not log.versions:  # what table_facts(log).latest would say, without replaying for it
        return no_versions(NAME, "the order of transactions")
    built = ColumnsBuilder()
    h = extract(history, log, built)
    rw = built.read_write_count()
    stats: dict[str, Any] = {"transactions": len(h.txns), "read_write_transactions": rw}
    if h.assumed_default_level:
        stats["assumed_isolation_level"] = h.assumed_default_level
    levels = sorted({t.isolation for t in h.txns})
    stats["levels"] = levels
    if not rw:
        return CheckResult(
            NAME,
            Verdict.VALID,
            f"No read-write transactions: all {len(h.txns)} committed write(s) are blind inserts that read nothing "
            "(spec C9), so any order of them is serializable; atomicity, durability and read validity cover them.",
            [],
            stats,
        )
    res: TxnAnalysis = analyze(built.finish(h.failed, h.unknown))
    stats.update(res.stats)
    stats["reorderings"] = res.reorderings_total
    anomalies: list[Anomaly] = []
    if res.anomalies:  # a million transactions make no anomaly: the maps only for one that does
        versions = {t.id: t.version for t in h.txns}
        levels_by_txn = {t.id: t.isolation for t in h.txns}
        anomalies = [_to_anomaly(a, versions, levels_by_txn) for a in res.anomalies]
    whose = "each committing engine's default" if "/" in (h.assumed_default_level or "") else "the engine's default"
    assumed = (
        f" The table carried no delta.isolationLevel; {whose} ({h.assumed_default_level}) was assumed."
        if h.assumed_default_level
        else ""
    )
    if anomalies:
        kinds = sorted({a.kind for a in anomalies})
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} serializability anomal{'y' if len(anomalies) == 1 else 'ies'} ({', '.join(kinds)}) "
            f"among {rw} read-write transactions at level(s) {', '.join(levels)}.{assumed} "
            f"First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if res.unknown:
        first = next(iter(res.unknown.items()))
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"No cycle among {rw} read-write transactions, but {len(res.unknown)} transaction(s) could not be "
            f"fully recovered, e.g. {first[0]}: {first[1]}.{assumed}",
            [],
            {**stats, "unknown": res.unknown},
        )
    note = (
        f" {res.reorderings_total} transaction(s) serialize in a different order than they committed, which "
        "WriteSerializable allows (spec C15, C16)."
        if res.reorderings_total
        else ""
    )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"The {rw} read-write transactions' dependency graph has no cycle at level(s) "
        f"{', '.join(levels)}.{note}{assumed}",
        [],
        stats,
    )
