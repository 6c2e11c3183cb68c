"""Coordinated-commits tables: what a commit coordinator ratified, beside
what the file system holds.

A table whose metadata names a commit coordinator
(``delta.coordinatedCommits.commitCoordinator-preview``) commits version v
in three steps: the writer stages its actions as
``_delta_log/_staged_commits/<v>.<uuid>.json``, the coordinator ratifies
that file for v (delta-spark's DynamoDB coordinator: a conditional update of
the table's item, which records the file name in the item's ``commits``
list), and the writer then backfills it to ``_delta_log/<v>.json`` and
clears the list. Version 0 goes through the file system.

So the log is: the backfilled commits, plus the ratified commits not yet
backfilled (the coordinator's list names their staged files). A staged file
the coordinator never ratified is a loser's and no part of the table. Which
versions exist is the coordinator's word (its ``tableVersion``), not the
listing's.

The coordinator's state is a DynamoDB item; a run keeps a dump of its
table (``coordinator.json`` in the run folder), so a stored run is judged
with no server running. Without that state, staged files past the last
backfilled version cannot be told ratified from orphaned: they are named,
and the verdicts that depend on them say unknown.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.deltalog.names import STAGED_DIR

# Where a run folder keeps the coordinator's state.
COORDINATOR_FILE = "coordinator.json"
COORDINATOR_KEY = "delta.coordinatedCommits.commitCoordinator-preview"
TABLE_CONF_KEY = "delta.coordinatedCommits.tableConf-preview"
STAGED_RE = re.compile(r"^(\d{20})\.([0-9A-Za-z-]+)\.json$")


def _plain(value: Any) -> Any:
    """A DynamoDB typed attribute value ({"N": "5"}, {"L": [...]}, ...) as
    plain Python."""
    if not isinstance(value, dict) or len(value) != 1:
        return value
    (kind, v), *_ = value.items()
    if kind == "N":
        try:
            return int(v)
        except (TypeError, ValueError):
            return v
    if kind == "L":
        return [_plain(x) for x in v] if isinstance(v, list) else v
    if kind == "M":
        return {k: _plain(x) for k, x in v.items()} if isinstance(v, dict) else v
    return v


@dataclass(frozen=True)
class RatifiedCommit:
    version: int
    file_name: str  # under _delta_log/_staged_commits/
    timestamp: int | None  # the commit's in-commit timestamp


@dataclass
class CoordinatorState:
    """One table's entry in the coordinator."""

    table_id: str
    path: str | None
    latest_version: int | None  # the coordinator's tableVersion
    has_accepted_commits: bool
    accepting_commits: bool | None
    commits: list[RatifiedCommit]  # ratified, not yet known to be backfilled

    @property
    def ratified_version(self) -> int | None:
        """The newest version the coordinator ratified; None before its
        first commit (the entry then holds the version it was registered
        at, which the file system committed)."""
        return self.latest_version if self.has_accepted_commits else None

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> CoordinatorState:
        d = {k: _plain(v) for k, v in item.items()}
        commits = []
        for c in d.get("commits") or []:
            if isinstance(c, dict) and isinstance(c.get("version"), int) and isinstance(c.get("fsName"), str):
                ts = c.get("timestamp")
                commits.append(RatifiedCommit(c["version"], c["fsName"], ts if isinstance(ts, int) else None))
        latest = d.get("tableVersion")
        return cls(
            table_id=str(d.get("tableId")),
            path=d.get("path") if isinstance(d.get("path"), str) else None,
            latest_version=latest if isinstance(latest, int) else None,
            has_accepted_commits=d.get("hasAcceptedCommits") is True,
            accepting_commits=d.get("acceptingCommits") if isinstance(d.get("acceptingCommits"), bool) else None,
            commits=sorted(commits, key=lambda c: c.version),
        )


def states_by_table_id(doc: dict[str, Any] | None) -> dict[str, CoordinatorState]:
    """The coordinator dump a run keeps ({"items": [DynamoDB items]}) by
    tableId."""
    out: dict[str, CoordinatorState] = {}
    for item in (doc or {}).get("items") or []:
        if isinstance(item, dict) and "tableId" in item:
            state = CoordinatorState.from_item(item)
            out[state.table_id] = state
    return out


def table_id(configuration: dict[str, str]) -> str | None:
    """The table's id in its coordinator, from the table's configuration."""
    raw = configuration.get(TABLE_CONF_KEY)
    if not raw:
        return None
    try:
        conf = json.loads(raw)
    except ValueError:
        return None
    tid = conf.get("tableId") if isinstance(conf, dict) else None
    return tid if isinstance(tid, str) else None


@dataclass
class Coordination:
    """What the reader found of a coordinated-commits table (TransactionLog.coordination)."""

    coordinator: str  # the coordinator's name in the table's metadata, e.g. "dynamodb"
    table_id: str | None
    state: CoordinatorState | None  # None: the run kept no state for this table
    # Ratified commits read from their staged files (not backfilled).
    unbackfilled: list[int] = field(default_factory=list)
    # Staged files of losers: never ratified, no part of the table.
    orphans: list[str] = field(default_factory=list)
    # Staged files past the last backfilled version that no coordinator state
    # decides (ratified or orphaned: unknown).
    undecided: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "coordinator": self.coordinator,
            "table_id": self.table_id,
            "state_kept": self.state is not None,
            "ratified_version": self.state.ratified_version if self.state else None,
            "unbackfilled": list(self.unbackfilled),
            "orphans": len(self.orphans),
            "undecided": list(self.undecided),
        }


_TIMEOUT_S = 10.0
_MAX_PAGES = 1000


def dump_coordinator(options: dict[str, str], dynamodb_table: str) -> dict[str, Any]:
    """Every item of the coordinator's DynamoDB table, as DynamoDB types
    them: the state a run keeps (`COORDINATOR_FILE`). `options`: boto3's
    endpoint_url, credentials and region_name, never written anywhere."""
    import boto3  # lazy: reading a stored run needs no AWS stack
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        config=Config(connect_timeout=_TIMEOUT_S, read_timeout=_TIMEOUT_S, retries={"max_attempts": 3}),
        **options,
    )
    items: list[dict[str, Any]] = []
    start: dict[str, Any] = {}
    for _ in range(_MAX_PAGES):
        page = client.scan(TableName=dynamodb_table, ConsistentRead=True, **start)
        items.extend(page.get("Items", []))
        if "LastEvaluatedKey" not in page:
            break
        start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
    return {"dynamodb_table": dynamodb_table, "items": items}


def load_coordinator(run_dir: Path) -> dict[str, Any] | None:
    """The state a run folder kept, or None (no file, or unreadable)."""
    try:
        doc = json.loads((Path(run_dir) / COORDINATOR_FILE).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


__all__ = [
    "COORDINATOR_FILE",
    "COORDINATOR_KEY",
    "STAGED_DIR",
    "STAGED_RE",
    "TABLE_CONF_KEY",
    "Coordination",
    "CoordinatorState",
    "RatifiedCommit",
    "dump_coordinator",
    "load_coordinator",
    "states_by_table_id",
    "table_id",
]
