"""Which commit replaced a lost one: evidence from the engines' own logs.

A lost write (an acknowledged op no commit holds) says what is missing, not
how. Where the engine logs its commits (delta-spark's JVMs: "Committed
delta #v" with the transaction's id), the op's node logged committing some
version v during the op, and the log's version v now holds another
transaction: another writer's commit of the same version replaced it. That
names the culprit commit, its op and its node, from the run folder alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from checkers.base import CheckResult
from checkers.facts import commit_op_id
from harness.core.history import History

# "26/11/25 10:32:45.206 INFO OptimisticTransaction: [tableId=083b4e3a,txnId=e31775ac]
#  Committed delta #1 to s3a://bucket/run/table/_delta_log"
_COMMITTED = re.compile(
    r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}) INFO OptimisticTransaction: "
    r"\[tableId=\w+,txnId=(\w+)\] Committed delta #(\d+) to (\S+)/_delta_log\s*$",
    re.M,
)
# A JVM's log time is its own clock's; an op's window is the harness's.
SLACK_S = 0.5


@dataclass(frozen=True)
class JvmCommit:
    node: str  # the node whose JVM logged it (a restart's log counts as the node's)
    log: str  # the log file's name
    wall: float
    txn: str  # the transaction id's prefix as Delta logs it
    version: int


def jvm_commits(logs_dir: Path, table_suffix: str = "/table") -> list[JvmCommit]:
    """Every "Committed delta #v" line of delta-spark's node logs for the
    run's own table (not the warm-up's scratch tables)."""
    out = []
    for path in sorted(logs_dir.glob("delta-spark-n*.log")):
        if ".warmup." in path.name:
            continue  # the warm-up client's log, not the JVM's
        node = path.name[len("delta-spark-") : -len(".log")].split(".")[0]  # n1.r1 is a restart of n1
        for m in _COMMITTED.finditer(path.read_text(errors="replace")):
            if not m[4].endswith(table_suffix):
                continue
            try:
                wall = datetime.strptime(m[1], "%y/%m/%d %H:%M:%S.%f").timestamp()
            except ValueError:
                continue
            out.append(JvmCommit(node, path.name, wall, m[2], int(m[3])))
    return out


def replaced_commits(history: History, log: Any, commits: list[JvmCommit], op_id: str) -> list[dict[str, Any]]:
    """The versions op `op_id`'s node logged committing while the op ran,
    whose file now holds another transaction: the commits that replaced
    it, each with the op and node the log names."""
    ops = {op.id: op for op in history.ops()}
    op = ops.get(op_id)
    if op is None or op.invoke.wall is None or op.completion is None or op.completion.wall is None:
        return []
    lo, hi = op.invoke.wall - SLACK_S, op.completion.wall + SLACK_S
    found = []
    for c in commits:
        if c.node != op.invoke.node or not lo <= c.wall <= hi or c.version not in log.commits:
            continue
        info = log.commits[c.version].commit_info or {}
        now_txn = str(info.get("txnId") or "")
        if now_txn.startswith(c.txn):
            continue  # this JVM's commit is the one in the log
        holder = commit_op_id(info)
        holder_op = ops.get(holder) if holder else None
        found.append(
            {
                "version": c.version,
                "logged_by": c.node,
                "logged_txn": c.txn,
                "now_op": holder,
                "now_node": holder_op.invoke.node if holder_op is not None else None,
                "now_txn": now_txn[:8] or None,
            }
        )
    return found


def name_replacing_commits(run_dir: Path, history: History, log: Any, results: list[CheckResult]) -> int:
    """Add to each lost-write anomaly the commit that replaced it, where the
    engine's logs show one. Returns how many were so explained."""
    lost = [a for r in results for a in r.anomalies if a.kind == "lost-write" and a.ops]
    if not lost:
        return 0
    commits = jvm_commits(run_dir / "logs")
    if not commits:
        return 0
    named = 0
    for a in lost:
        found = replaced_commits(history, log, commits, a.ops[0])
        if not found:
            continue
        named += 1
        a.details["replaced_by"] = found
        parts = []
        for f in found:
            holder = f"op {f['now_op']}" if f["now_op"] else "a commit naming no op"
            where = f" of node {f['now_node']}" if f["now_node"] else ""
            parts.append(
                f"node {f['logged_by']}'s engine logged committing version {f['version']} (transaction "
                f"{f['logged_txn']}) while the op ran, and version {f['version']} now holds {holder}{where} "
                f"(transaction {f['now_txn'] or '?'}): that commit replaced it"
            )
        a.explanation += " Evidence: " + "; ".join(parts) + "."
    return named


__all__ = ["JvmCommit", "jvm_commits", "name_replacing_commits", "replaced_commits"]
