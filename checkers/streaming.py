"""Structured Streaming from the table into a sink table (spec C18, T5).

The sink's log comes in ``log.related`` (the workload's `stream/sink`);
its rows carry the source row's `id` and `writer`.
- T5, exactly once: a source row written to the sink more than once is
  `stream-duplicate-row`; after the final drain (a `stream` op with
  `final`) completed, a row of the table's final state that is not in the
  sink is `stream-lost-row`. Without a completed drain, lost rows are not
  judged.
- C18: a query stops at a metadata change. A `stream` op that completed
  (its query never failed) although a batch of it read past a commit that
  changed the table's metadata, a commit whose op was invoked only after
  the stream op started (so the query's schema predates it), is
  `stream-crossed-metadata-change`. Stream ops that failed are counted by
  what they failed with.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id, fmt_ids, table_facts
from harness.core.history import OK, History, Op
from harness.deltalog import TransactionLog

NAME = "streaming"
SINK = "stream/sink"


def _metadata_changes(log: TransactionLog) -> list[tuple[int, str | None]]:
    """(version, op id) of each commit after the first that carries metaData."""
    return [
        (v, commit_op_id(log.commit(v).commit_info))
        for v in log.versions
        if v > 0 and log.commit(v).metadata is not None
    ]


def _past(batch: dict[str, Any], version: int) -> bool:
    """Whether a batch read any of `version`'s files or beyond."""
    end, index = batch.get("end"), batch.get("end_index")
    if not isinstance(end, int):
        return False
    return end > version or (end == version and isinstance(index, int) and index >= 0)


def _batches(op: Op) -> list[dict[str, Any]]:
    v = op.value
    return [b for b in (v.get("batches") or []) if isinstance(b, dict)] if isinstance(v, dict) else []


def _why(op: Op) -> str:
    """What a stream op that did not complete ended with."""
    raw = op.error.raw if op.error is not None else ""
    if "DELTA_SCHEMA_CHANGED" in raw:
        return "stopped at a metadata change"
    return op.error.cls.value if op.error is not None else "no completion"


def check(history: History, log: TransactionLog) -> CheckResult:
    if log.latest_version is None:
        return no_versions(NAME, "the stream")
    sink = log.related.get(SINK)
    streams = [op for op in history.client_ops() if op.f == "stream"]
    if sink is None or sink.latest_version is None:
        return CheckResult(NAME, Verdict.UNKNOWN, "The sink table has no readable log: nothing to judge.", [], {})
    source, out = table_facts(log), table_facts(sink)
    anomalies: list[Anomaly] = []
    copies: dict[Any, list[int]] = {}
    for life in out.lives:
        copies.setdefault(life.id, []).append(life.added)
    for rid, versions in copies.items():
        if len(versions) > 1:
            anomalies.append(
                Anomaly(
                    "stream-duplicate-row",
                    "T5",
                    f"Source row {rid} is in the sink {len(versions)} times (sink versions {fmt_ids(versions)}).",
                    versions=versions[:10],
                    rows=[rid],
                )
            )
    drains = [op for op in streams if isinstance(op.invoke.value, dict) and op.invoke.value.get("final")]
    drained = any(op.type == OK for op in drains)
    lost: list[Any] = []
    if drained and source.latest is not None and out.latest is not None:
        lost = sorted(source.state(source.latest) - out.state(out.latest), key=str)
        if lost:
            anomalies.append(
                Anomaly(
                    "stream-lost-row",
                    "T5",
                    f"After the final drain, {len(lost)} row(s) of the table (version {source.latest}) are not in "
                    f"the sink: {fmt_ids(lost)}.",
                    ops=[op.id for op in drains],
                    versions=[source.latest, out.latest],
                    rows=lost[:50],
                )
            )
    starts = {op.id: op.start for op in history.client_ops()}
    changes = _metadata_changes(log)
    crossings = 0
    for op in streams:
        if op.type != OK:
            continue
        for version, changer in changes:
            if changer is None or starts.get(changer, -1) <= op.start:
                continue  # the query may have started on the new schema
            batch = next((b for b in _batches(op) if _past(b, version)), None)
            if batch is None:
                continue
            crossings += 1
            anomalies.append(
                Anomaly(
                    "stream-crossed-metadata-change",
                    "C18",
                    f"Stream op {op.id} completed, yet its batch {batch.get('batch')} read the table up to version "
                    f"{batch.get('end')}, past version {version}, whose metadata change (op {changer}) came after "
                    "the query started: the query did not stop at it.",
                    ops=[op.id, changer],
                    versions=[version],
                )
            )
    failed = Counter(_why(op) for op in streams if op.type != OK)
    stats = {
        "stream_ops": len(streams),
        "completed": sum(op.type == OK for op in streams),
        "not_completed": dict(failed),
        "metadata_changes": len(changes),
        "batches": sum(len(_batches(op)) for op in streams),
        "sink_rows": len(copies),
        "drained": drained,
        "lost": len(lost),
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} streaming anomal{'y' if len(anomalies) == 1 else 'ies'}, "
            f"e.g. {anomalies[0].explanation}",
            anomalies[:1000],
            stats,
        )
    if not drained:
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"No row reached the sink twice ({len(copies)} rows), but the final drain did not complete, so whether "
            "every row reached it is not known.",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each of the table's {len(copies)} row(s) reached the sink exactly once over {stats['batches']} batch(es) "
        f"of {len(streams)} stream op(s); no completed query read past any of the {len(changes)} metadata "
        f"change(s) made after it started ({sum(failed.values())} stream op(s) did not complete: "
        f"{', '.join(f'{k} x{n}' for k, n in sorted(failed.items())) or 'none'}).",
        [],
        stats,
    )
