"""Compaction (spec C8, M5, M6, E3): OPTIMIZE rewrites files, never data.

A compaction commit (operation OPTIMIZE, or every add/remove with
``dataChange=false``) must add exactly the row versions it removes from the
table: the multiset of full rows (id, writer and every other column) in the
files it removed that were live before it equals the multiset in the files it
added. Two ways this breaks when conflict detection misses a concurrent
commit:

- the compaction removes files that were no longer live (a concurrent
  compaction, spec M6/E3, or UPDATE/DELETE, spec M5, removed them first) and
  re-adds their rows: rows duplicated or resurrected;
- an UPDATE/DELETE/MERGE removes files a concurrent compaction had already
  replaced: its remove is a no-op, and the rows it meant to change survive
  unchanged in the compacted file (spec M5), kind ``write-on-compacted-files``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.facts import commit_op_id, table_facts
from harness.core.history import History
from harness.deltalog import Commit, TransactionLog

NAME = "compaction"

Row = tuple[tuple[str, Any], ...]


def is_compaction(commit: Commit) -> bool:
    op = (commit.operation or "").upper()
    if op.startswith("OPTIMIZE") or "ZORDER" in op:
        return True
    files = commit.adds + commit.removes
    return bool(files) and all(f.get("dataChange") is False for f in files)


def _rows(log: TransactionLog, action: dict, columns: set[str] | None) -> Counter[Row]:
    """The rows an add (or remove) action names: its file's rows less those
    its deletion vector deletes, in the table schema's `columns` (None: all
    the file has)."""
    t = log.add_rows(action)
    if columns is not None:
        t = t.select([c for c in t.column_names if c in columns])
    return Counter(tuple(sorted(r.items())) for r in t.to_pylist())


def _schema_columns(log: TransactionLog, version: int) -> set[str] | None:
    """The table's columns at `version`. A column a data file holds that the
    schema lacks is no data of the table, which no reader sees (deltalake
    0.19 to 0.25 leave an internal `__delta_rs_update_predicate` column in
    the files an UPDATE writes, and drop it when they compact them)."""
    meta = log.metadata_at(version) or {}
    try:
        fields = json.loads(meta.get("schemaString") or "{}").get("fields") or []
        return {str(f["name"]) for f in fields} or None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _fmt_rows(rows: Counter[Row], limit: int = 3) -> str:
    out = []
    for row, n in list(rows.items())[:limit]:
        d = dict(row)
        out.append(f"id {d.get('id')} (writer {d.get('writer')}){' x' + str(n) if n > 1 else ''}")
    total = sum(rows.values())
    return ", ".join(out) + (f", ... ({total} in all)" if total > limit else "")


def _ids(rows: Counter[Row]) -> list[Any]:
    return sorted({dict(r).get("id") for r in rows}, key=repr)


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)  # also reads every data file once (problems recorded)
    live: dict[str, dict] = {}
    removed_by: dict[str, tuple[int, bool]] = {}  # path -> (version, by a compaction)
    anomalies: list[Anomaly] = []
    compactions = rewritten = stale_removes = 0
    for version, commit, adds, removes in log.replay():
        compacting = is_compaction(commit)
        op = commit_op_id(commit.commit_info) or next(iter(sorted(facts.writers_at(version))), None)
        live_removed = [rm["path"] for rm in removes if rm["path"] in live]
        dead_removed = [rm["path"] for rm in removes if rm["path"] not in live and rm["path"] in removed_by]
        if compacting:
            compactions += 1
            columns = _schema_columns(log, version)
            before: Counter[Row] = Counter()
            for p in live_removed:
                before += _rows(log, live[p], columns)  # as it was live, its DV applied
            after: Counter[Row] = Counter()
            for a in adds:
                after += _rows(log, a, columns)
            rewritten += sum(before.values())
            lost, extra = before - after, after - before
            if lost or extra:
                earlier = sorted({removed_by[p] for p in dead_removed})
                by_compaction = [v for v, c in earlier if c]
                by_write = [v for v, c in earlier if not c]
                if by_compaction:
                    claim, why = (
                        "M6",
                        (
                            f"it rewrote {len(dead_removed)} file(s) that the compaction at version(s) "
                            f"{', '.join(map(str, by_compaction))} had already replaced: two compactions "
                            "of the same files both committed, where the later must fail with "
                            "ConcurrentDeleteDeleteException (spec M6, E3)"
                        ),
                    )
                elif by_write:
                    claim, why = (
                        "M5",
                        (
                            f"it rewrote {len(dead_removed)} file(s) that the write(s) at version(s) "
                            f"{', '.join(map(str, by_write))} had already removed, bringing their old "
                            "rows back (spec M5: the compaction must conflict)"
                        ),
                    )
                else:
                    claim, why = "C8", "a compaction must rewrite files without changing the data (spec C8)"
                parts = []
                if extra:
                    parts.append(
                        f"added {sum(extra.values())} row version(s) not in the files it removed from the "
                        f"table ({_fmt_rows(extra)})"
                    )
                if lost:
                    parts.append(f"dropped {sum(lost.values())} row version(s) ({_fmt_rows(lost)})")
                kind = "compaction-duplicated-rows" if extra else "compaction-lost-rows"
                anomalies.append(
                    Anomaly(
                        kind,
                        claim,
                        f"Compaction commit {version} ({commit.operation or 'dataChange=false'}, op {op}) "
                        f"{' and '.join(parts)}: {why}. Files removed: {', '.join(live_removed + dead_removed)[:600]}; "
                        f"added: {', '.join(a['path'] for a in adds)[:600]}.",
                        ops=[op] if op else [],
                        versions=[version, *sorted({v for v, _ in earlier})],
                        rows=_ids(extra) + _ids(lost),
                        details={
                            "removed_live": live_removed,
                            "removed_stale": dead_removed,
                            "added": [a["path"] for a in adds],
                        },
                    )
                )
        stale = [p for p in dead_removed if removed_by[p][1]]
        stale_removes += len(stale)
        for rm in removes:
            if rm["path"] in live:
                removed_by[rm["path"]] = (version, compacting)
            live.pop(rm["path"], None)
        for a in adds:
            live[a["path"]] = a
        if stale and not compacting:
            # The write's removes hit files a compaction had already replaced;
            # what it meant to delete or overwrite lives on in the new file.
            columns = _schema_columns(log, version)
            meant: Counter[Row] = Counter()
            for rm in removes:
                if rm["path"] in stale:
                    meant += _rows(log, rm, columns)  # what the write saw in that file
            now: Counter[Row] = Counter()
            for a in live.values():
                now += _rows(log, a, columns)
            survivors = meant & now
            if survivors:
                by = sorted({removed_by[p][0] for p in stale})
                anomalies.append(
                    Anomaly(
                        "write-on-compacted-files",
                        "M5",
                        f"Commit {version} ({commit.operation or 'write'}, op {op}) removed {len(stale)} file(s) that "
                        f"the compaction at version(s) {', '.join(map(str, by))} had already replaced, so its change "
                        f"did not apply: {sum(survivors.values())} row version(s) it rewrote or deleted are still live "
                        f"after it ({_fmt_rows(survivors)}). Spec M5: without deletion vectors, a write concurrent "
                        f"with OPTIMIZE must conflict (C8). Stale files: {', '.join(stale)[:600]}.",
                        ops=[op] if op else [],
                        versions=[*by, version],
                        rows=_ids(survivors),
                        details={"removed_stale": stale},
                    )
                )
    unreadable = [p for p in log.problems if p.kind in ("data-file-unreadable", "deletion-vector-unreadable")]
    stats = {
        "compaction_commits": compactions,
        "rows_rewritten": rewritten,
        "stale_removes_after_compaction": stale_removes,
    }
    if anomalies:
        kinds = sorted({a.kind for a in anomalies})
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} compaction anomal{'y' if len(anomalies) == 1 else 'ies'} ({', '.join(kinds)}) among "
            f"{compactions} compaction commit(s). First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    if unreadable:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"{len(unreadable)} data file(s) or deletion vector(s) could not be read, so compactions cannot be "
            "compared row by row, "
            f"e.g. {unreadable[0].detail}",
            [],
            stats,
        )
    if not compactions:
        # Nothing this checker exists for happened: no evidence, not "valid".
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            "Not exercised: no compaction committed (none ran, or the engine does not support "
            "OPTIMIZE), so M5/M6 were not tested.",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the {compactions} compaction commit(s) added exactly the {rewritten} row version(s) it removed "
        "from the table, and no write removed files a compaction had already replaced.",
        [],
        stats,
    )
