"""The log reader on coordinated-commits tables: backfilled commits, ratified
commits still staged, losers' staged files, and what the coordinator's kept
state decides (harness.deltalog.coordinated). Tables written here in the
layout delta-spark's DynamoDB commit coordinator leaves (as seen in real runs:
`_delta_log/_staged_commits/<v>.<uuid>.json`, the table's id in its
configuration, the DynamoDB item of the table)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from checkers import CHECKERS
from checkers.base import Verdict
from harness.core.history import History
from harness.deltalog import read_log
from harness.deltalog.coordinated import COORDINATOR_KEY, TABLE_CONF_KEY, CoordinatorState

TABLE_ID = "8fc31ac5-3db1-40af-882b-50d8b80a2fc4"
SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})


def _actions(version: int, ts: int, op: str) -> list[dict]:
    out: list[dict] = [
        {
            "commitInfo": {
                "inCommitTimestamp": ts,
                "timestamp": ts,
                "operation": "WRITE" if version else "CREATE TABLE",
                "readVersion": version - 1 if version else None,
                "userMetadata": op,
            }
        }
    ]
    if version == 0:
        out.append(
            {
                "metaData": {
                    "id": "t",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": SCHEMA,
                    "partitionColumns": [],
                    "configuration": {
                        COORDINATOR_KEY: "dynamodb",
                        TABLE_CONF_KEY: json.dumps({"tableId": TABLE_ID}),
                        "delta.enableInCommitTimestamps": "true",
                    },
                }
            }
        )
        out.append(
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["vacuumProtocolCheck"],
                    "writerFeatures": ["coordinatedCommits-preview", "inCommitTimestamp", "vacuumProtocolCheck"],
                }
            }
        )
    else:
        out.append({"add": {"path": f"part-{version}.parquet", "partitionValues": {}, "size": 1, "dataChange": True}})
    return out


def _write(path: Path, actions: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _table(tmp: Path, backfilled: int, staged: dict[int, int] | None = None) -> tuple[Path, dict[int, list[str]]]:
    """Versions 0..backfilled as _delta_log/<v>.json (each also staged, as the
    coordinator leaves them), and `staged`: {version: how many more staged
    files}. Returns the table and the staged names by version."""
    table = tmp / "table"
    names: dict[int, list[str]] = {}
    for v in range(backfilled + 1):
        _write(table / "_delta_log" / f"{v:020d}.json", _actions(v, 1000 + v, f"0.{v}"))
    for v in range(1, backfilled + 1 + max(staged or {0: 0})):
        pq.write_table(pa.table({"id": pa.array([v], pa.int64())}), table / f"part-{v}.parquet")
    for v, n in (staged or {}).items():
        for i in range(n):
            name = f"{v:020d}.{uuid.uuid4()}.json"
            _write(table / "_delta_log" / "_staged_commits" / name, _actions(v, 1000 + v, f"{i}.{v}"))
            names.setdefault(v, []).append(name)
    return table, names


def _state(latest: int, commits: list[tuple[int, str]], accepted: bool = True) -> dict:
    item = {
        "tableId": {"S": TABLE_ID},
        "path": {"S": "s3a://bucket/table"},
        "tableVersion": {"N": str(latest)},
        "hasAcceptedCommits": {"BOOL": accepted},
        "acceptingCommits": {"BOOL": True},
        "schemaVersion": {"N": "1"},
        "commits": {
            "L": [
                {"M": {"version": {"N": str(v)}, "fsName": {"S": n}, "timestamp": {"N": str(1000 + v)}}}
                for v, n in commits
            ]
        },
    }
    return {"dynamodb_table": "delta_coordinated_commits", "items": [item]}


def test_the_dynamodb_item_parses_to_the_coordinators_state():
    state = CoordinatorState.from_item(_state(5, [(5, "x.json")])["items"][0])
    assert (state.table_id, state.latest_version, state.ratified_version) == (TABLE_ID, 5, 5)
    assert [(c.version, c.file_name, c.timestamp) for c in state.commits] == [(5, "x.json", 1005)]
    registered = CoordinatorState.from_item(_state(0, [], accepted=False)["items"][0])
    assert registered.ratified_version is None  # registered at 0 by the file system, nothing ratified yet


def test_a_backfilled_table_reads_as_its_commits_and_ignores_losers_staged_files(tmp_path):
    table, _ = _table(tmp_path, backfilled=3, staged={2: 2, 3: 3})
    log = read_log(str(table), coordinator=_state(3, []))
    assert log.versions == [0, 1, 2, 3]
    assert log.problems == []
    assert log.coordination is not None
    assert (log.coordination.table_id, log.coordination.unbackfilled) == (TABLE_ID, [])


def test_a_ratified_commit_not_backfilled_is_read_from_its_staged_file(tmp_path):
    # The writer was killed between the coordinator's ratification and the
    # backfill: version 4 exists only as its staged file, which the
    # coordinator's list names; the other staged file of 4 is a loser's.
    table, names = _table(tmp_path, backfilled=3, staged={4: 2})
    winner, loser = names[4]
    log = read_log(str(table), coordinator=_state(4, [(4, winner)]))
    assert log.versions == [0, 1, 2, 3, 4]
    assert log.commit(4).commit_info["userMetadata"] == "0.4"  # the winner's file, not the loser's
    assert log.coordination.unbackfilled == [4]
    assert log.coordination.orphans == [loser]
    assert log.problems == []


def test_a_ratified_version_with_no_file_is_a_missing_commit(tmp_path):
    table, _ = _table(tmp_path, backfilled=3)
    log = read_log(str(table), coordinator=_state(5, [(5, f"{5:020d}.{uuid.uuid4()}.json")]))
    kinds = [(p.kind, p.version) for p in log.problems]
    assert ("missing-commit", 5) in kinds  # ratified, but neither backfilled nor staged
    assert ("gap", 4) in kinds  # ratified (the coordinator is at 5), and nowhere
    result = CHECKERS["log-sanity"](History([]), log)
    assert result.verdict is Verdict.INVALID


def test_without_the_coordinators_state_staged_commits_past_the_backfill_are_undecided(tmp_path):
    table, names = _table(tmp_path, backfilled=3, staged={4: 1})
    log = read_log(str(table))
    assert log.versions == [0, 1, 2, 3]
    assert log.coordination.undecided == names[4]
    assert [p.kind for p in log.problems] == ["coordinator-state-missing"]
    # No evidence of a broken log, and none that the log is whole: unknown, never valid.
    assert CHECKERS["log-sanity"](History([]), log).verdict is Verdict.UNKNOWN


def test_in_commit_timestamps_must_grow_with_the_version(tmp_path):
    table, _ = _table(tmp_path, backfilled=2)
    _write(table / "_delta_log" / f"{3:020d}.json", _actions(3, 1001, "0.3"))  # version 1's timestamp again
    log = read_log(str(table), coordinator=_state(3, []))
    assert [(p.kind, p.version) for p in log.problems] == [("in-commit-timestamp", 3)]


def test_a_table_without_a_coordinator_has_no_coordination(tmp_path):
    table = tmp_path / "plain"
    actions = _actions(0, 1000, "0.0")
    actions[1]["metaData"]["configuration"] = {}
    _write(table / "_delta_log" / f"{0:020d}.json", actions)
    log = read_log(str(table))
    assert log.coordination is None and log.versions == [0]
