"""Application transactions (spec E5): idempotent writes tagged with an
app id and a version (the log's ``txn`` actions) apply at most once, and
writers sharing an app id do not both commit.

Judged from the log's ``txn`` actions, the data (row ids and their
``writer``) and the history of ``write`` ops (value: ``app_id``,
``txn_version``, ``ids``, optionally ``retry_of``; completion: ``skipped``
where the engine tells):

- ``duplicate-application`` (E5): the rows of one (app id, version) were
  committed at more than one version, e.g. a retry applied again, or two
  concurrent writers of one app id both committed;
- ``txn-version-regression`` (E5): a commit added rows under a txn version
  <= the newest version its app had already committed (it must be skipped);
- ``lost-write`` (C7): an ok write that reports it applied, but no commit
  holds its rows; or an ok write whose rows are absent while no version >= its
  own had been committed for its app (by an op begun before it ended), so
  nothing justified skipping it;
- ``lost-rows`` (C7): rows of an applied write missing from the final state.

Conflict classes: a write that failed with a conflict while another write of
its app committed in its real-time window should say
ConcurrentTransactionException (E5); blind appends of different apps cannot
conflict (spec M1). Classes are counted; other classes are findings in the
stats, not safety violations.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import pairwise
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict, no_versions
from checkers.facts import commit_op_id, fmt_ids, table_facts
from harness.core.history import FAIL, OK, ErrorClass, History, Op
from harness.deltalog import TransactionLog

NAME = "app-txn"


def _pair(op: Op) -> tuple[str, int] | None:
    v = op.invoke.value
    if not isinstance(v, dict) or "app_id" not in v or not isinstance(v.get("txn_version"), int):
        return None
    return str(v["app_id"]), int(v["txn_version"])


def _ids(op: Op) -> list[Any]:
    v = op.invoke.value
    return list(v.get("ids", [])) if isinstance(v, dict) else []


def _starts_before(owner: Op | None, op: Op) -> bool:
    """Could `owner`'s commit have been visible to `op`? Unknown owners count."""
    return owner is None or op.end is None or owner.start < op.end


def _overlaps(a: Op, b: Op) -> bool:
    a_end = a.end if a.end is not None else float("inf")
    b_end = b.end if b.end is not None else float("inf")
    return a.start < b_end and b.start < a_end


def check(history: History, log: TransactionLog) -> CheckResult:
    facts = table_facts(log)
    if facts.latest is None:
        return no_versions(NAME, "app transactions")
    by_id = {op.id: op for op in history.ops()}
    writes = [op for op in history.client_ops() if _pair(op) is not None]

    # The log: which op committed each version, and each app's txn versions in log order.
    owner: dict[int, Op | None] = {}
    for v in facts.versions:
        op_id = commit_op_id(log.commits[v].commit_info) if v in log.commits else None
        if op_id not in by_id:
            ws = [w for w in facts.writers_at(v) if w in by_id]
            op_id = ws[0] if len(ws) == 1 else None
        owner[v] = by_id.get(op_id) if op_id else None
    added_at: dict[int, list[Any]] = defaultdict(list)
    for life in facts.lives:
        added_at[life.added].append(life.id)
    txn_commits: list[tuple[int, str, int]] = []  # (log version, app, txn version)
    for v in facts.versions:
        if v not in log.commits:
            continue
        for t in log.commits[v].txns:
            if isinstance(t, dict) and isinstance(t.get("version"), int):
                txn_commits.append((v, str(t.get("appId")), int(t["version"])))

    anomalies: list[Anomaly] = []
    # The rows of one (app, version): every write of the pair (original and
    # retries) carries the same ids.
    pair_ids: dict[tuple[str, int], set[Any]] = defaultdict(set)
    for op in writes:
        pair_ids[_pair(op)].update(_ids(op))  # type: ignore[index]
    versions_of_id: dict[Any, list[int]] = defaultdict(list)
    for life in facts.lives:
        versions_of_id[life.id].append(life.added)
    duplicated: set[tuple[str, int]] = set()
    for pair, ids in sorted(pair_ids.items()):
        vs = sorted({v for i in ids for v in versions_of_id.get(i, [])})
        if len(vs) < 2:
            continue
        duplicated.add(pair)
        ops = [owner.get(v) for v in vs]
        concurrent = any(a and b and _overlaps(a, b) for a, b in pairwise(ops))
        anomalies.append(
            Anomaly(
                "duplicate-application",
                "E5",
                f"The rows of app {pair[0]!r} txn version {pair[1]} ({fmt_ids(sorted(ids))}) were committed at "
                f"{len(vs)} versions ({', '.join(map(str, vs))}) by op(s) "
                f"{', '.join(o.id if o else '?' for o in ops)}: an idempotent write applied more than once"
                + (
                    " by writers running concurrently with one app id (they must conflict, spec E5)."
                    if concurrent
                    else " (a write whose version the app had already committed must be skipped)."
                ),
                ops=[o.id for o in ops if o],
                versions=vs,
                rows=sorted(ids),
            )
        )
    newest: dict[str, tuple[int, int]] = {}  # app -> (txn version, log version)
    for v, app, ver in txn_commits:
        prev = newest.get(app)
        if prev is not None and ver <= prev[0] and added_at.get(v) and (app, ver) not in duplicated:
            o = owner.get(v)
            anomalies.append(
                Anomaly(
                    "txn-version-regression",
                    "E5",
                    f"Version {v}{' (op ' + o.id + ')' if o else ''} added {len(added_at[v])} row(s) under app "
                    f"{app!r} txn version {ver}, but the app had already committed txn version {prev[0]} at version "
                    f"{prev[1]}: a write whose version is not newer must be skipped.",
                    ops=[o.id] if o else [],
                    versions=[prev[1], v],
                    rows=added_at[v],
                )
            )
        if prev is None or ver > prev[0]:
            newest[app] = (ver, v)

    final = facts.state(facts.latest)
    skipped = applied = 0
    for op in writes:
        if op.type != OK:
            continue
        app, ver = _pair(op)  # type: ignore[misc]
        mine = facts.writer_rows.get(op.id)
        said = op.value.get("skipped") if isinstance(op.value, dict) else None
        if mine:
            applied += 1
            gone = [i for i in _ids(op) if i not in final]
            if gone:
                anomalies.append(
                    Anomaly(
                        "lost-rows",
                        "C7",
                        f"Write {op.id} (app {app!r}, txn {ver}) committed at version {min(mine)}, but "
                        f"{len(gone)} of its "
                        f"rows ({fmt_ids(gone)}) are not in the final state (version {facts.latest}).",
                        ops=[op.id],
                        versions=[min(mine), facts.latest],
                        rows=gone,
                    )
                )
            continue
        if said is False:
            anomalies.append(
                Anomaly(
                    "lost-write",
                    "C7",
                    f"Write {op.id} (app {app!r}, txn {ver}) was acknowledged as applied, but no commit holds its rows "
                    f"({fmt_ids(_ids(op))}).",
                    ops=[op.id],
                    rows=_ids(op),
                )
            )
            continue
        justified = [(v, a, x) for v, a, x in txn_commits if a == app and x >= ver and _starts_before(owner.get(v), op)]
        if justified:
            skipped += 1
            continue
        anomalies.append(
            Anomaly(
                "lost-write",
                "C7",
                f"Write {op.id} (app {app!r}, txn {ver}) was acknowledged ok, but none of its rows "
                f"({fmt_ids(_ids(op))}) "
                f"were committed, and no txn version >= {ver} of app {app!r} had been committed by an op begun "
                "before it "
                f"ended, so nothing justified skipping it.",
                ops=[op.id],
                rows=_ids(op),
            )
        )

    classes, findings = _conflict_classes(writes, owner)
    unsupported = sum(1 for op in writes if op.error is not None and op.error.cls is ErrorClass.UNSUPPORTED)
    outcomes = Counter(op.type for op in writes)
    stats: dict[str, Any] = {
        "writes": len(writes),
        "retries": sum(1 for op in writes if isinstance(op.invoke.value, dict) and "retry_of" in op.invoke.value),
        "outcomes": dict(outcomes),
        "ok_applied": applied,
        "ok_skipped": skipped,
        "txn_commits": len(txn_commits),
        "apps": sorted({a for _, a, _ in txn_commits}),
        "conflict_classes_same_app": classes,
        "e5_class_findings": findings,
        "unsupported": unsupported,
    }
    cls_text = ", ".join(f"{k} x{n}" for k, n in sorted(classes.items())) or "none"
    tail = f" Conflicts between writers of one app: {cls_text}; {len(findings)} conflict(s) without the E5 class."
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"{len(anomalies)} app-transaction anomaly(ies) among {len(writes)} idempotent write(s). Spec E5: an "
            f"(app id, version) applies at most once. First: {anomalies[0].explanation}" + tail,
            anomalies,
            stats,
        )
    if writes and unsupported == len(writes):
        return CheckResult(
            NAME,
            Verdict.UNKNOWN,
            f"All {len(writes)} idempotent write(s) were reported unsupported by the engine: app transactions "
            "were not exercised.",
            [],
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"Each (app id, txn version) was applied at most once and every app's txn versions increase in log order "
        f"({len(txn_commits)} txn commit(s)); {applied} acknowledged write(s) applied, {skipped} were rightly "
        f"skipped, none lost." + tail,
        [],
        stats,
    )


def _conflict_classes(writes: list[Op], owner: dict[int, Op | None]) -> tuple[dict[str, int], list[dict[str, Any]]]:
    committed = [o for o in owner.values() if o is not None and _pair(o) is not None]
    classes: Counter[str] = Counter()
    findings: list[dict[str, Any]] = []
    for op in writes:
        if op.type != FAIL or op.error is None or not op.error.cls.is_conflict:
            continue
        app = _pair(op)[0]  # type: ignore[index]
        same_app = [o.id for o in committed if o.id != op.id and _pair(o)[0] == app and _overlaps(o, op)]  # type: ignore[index]
        classes[op.error.cls.value] += 1
        if op.error.cls is not ErrorClass.CONCURRENT_TRANSACTION:
            findings.append(
                {
                    "op": op.id,
                    "class": op.error.cls.value,
                    "same_app_commits": same_app,
                    "why": "conflict between writers of one app id without the E5 class"
                    if same_app
                    else "a blind append conflicted though no write of its app raced it (spec M1)",
                    "raw": op.error.raw[:300],
                }
            )
    return dict(classes), findings
