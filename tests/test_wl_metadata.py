"""The `metadata` workload and the `metadata-conflicts` checker (spec C17, E4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers import metadata
from harness.core.history import FAIL, OK
from tests.conftest import load_results, only_run_dir, run_cli
from tests.synth import SCHEMA_STRING, SynthRun, add_action, rows_table


def meta_action(config: dict[str, str], extra_columns: tuple[str, ...] = ()) -> dict:
    schema = json.loads(SCHEMA_STRING)
    schema["fields"] += [{"name": c, "type": "string", "nullable": True, "metadata": {}} for c in extra_columns]
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000000",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": [],
            "configuration": config,
            "createdTime": 0,
        }
    }


def info(op: str | None, read_version: int | None, operation: str = "WRITE") -> dict:
    ci: dict = {"timestamp": 0, "operation": operation}
    if op is not None:
        ci["dj.op"] = op
    if read_version is not None:
        ci["readVersion"] = read_version
    return {"commitInfo": ci}


def data_commit(run: SynthRun, v: int, op: str, ids: list[int], read_version: int | None) -> None:
    path = f"f{v}.parquet"
    run.file_tables[path] = rows_table([(i, op) for i in ids])
    run.raw_commit(v, [info(op, read_version), add_action(path, len(ids))])


def set_property_run(
    b_read_version: int | None, *, b_start: int = 10, m_type: str = OK, m_in_log: bool = True
) -> SynthRun:
    """Append A commits v1; set-property M commits v2; append B commits v3,
    having read `b_read_version`."""
    run = SynthRun()
    run.append("1.1", [1], start=1, end=5, process=1)
    data_commit(run, 1, "1.1", [1], 0)
    run.invoke("2.1", "set-property", {"properties": {"dj.prop.2_1": "2.1"}}, time=6, process=2)
    run.complete("2.1", m_type, time=20)
    if m_in_log:
        run.raw_commit(2, [info("2.1", 1, "SET TBLPROPERTIES"), meta_action({"dj.prop.2_1": "2.1"})])
    run.append("3.1", [2], start=b_start, end=30, process=3)
    data_commit(run, 3 if m_in_log else 2, "3.1", [2], b_read_version)
    return run


def test_catches_a_write_that_committed_over_a_concurrent_metadata_change() -> None:
    res = metadata.check(*set_property_run(b_read_version=1).build())
    assert res.verdict.value == "invalid"
    [a] = res.anomalies
    assert a.kind == "commit-after-metadata-change" and a.claim == "C17"
    assert a.versions == [1, 2, 3] and set(a.ops) == {"3.1", "2.1"}


def test_passes_a_write_that_read_the_metadata_change() -> None:
    res = metadata.check(*set_property_run(b_read_version=2).build())
    assert res.verdict.value == "valid", res.explanation
    assert res.stats["metadata_commits"] == 1


def test_read_version_recorded_by_the_op_counts_when_the_log_has_none() -> None:
    run = set_property_run(b_read_version=None)
    for ev in run.events:  # delta-rs: the client records its snapshot in the op's value
        if ev["id"] == "3.1" and ev["type"] == OK:
            ev["value"] = {**ev["value"], "read_version": 1}
    res = metadata.check(*run.build())
    assert [a.kind for a in res.anomalies] == ["commit-after-metadata-change"]


def test_unknown_read_version_is_unknown_when_the_write_overlapped_the_change() -> None:
    res = metadata.check(*set_property_run(b_read_version=None, b_start=10).build())
    assert res.verdict.value == "unknown"
    assert 3 in res.stats["unknown"]


def test_unknown_read_version_after_the_change_ended_is_not_concurrent() -> None:
    res = metadata.check(*set_property_run(b_read_version=None, b_start=25).build())
    assert res.verdict.value == "valid", res.explanation


def test_catches_a_lost_acknowledged_property_set() -> None:
    res = metadata.check(*set_property_run(b_read_version=2, m_in_log=False).build())
    assert res.verdict.value == "invalid"
    assert [a.kind for a in res.anomalies] == ["lost-metadata-update"]
    assert res.anomalies[0].ops == ["2.1"] and "dj.prop.2_1=2.1" in res.anomalies[0].explanation


def test_catches_a_failed_property_set_that_committed() -> None:
    res = metadata.check(*set_property_run(b_read_version=2, m_type=FAIL).build())
    assert [a.kind for a in res.anomalies] == ["failed-but-committed"]


def test_column_add_without_op_id_is_attributed_from_the_new_column() -> None:
    """Sail-like: no op id and no readVersion in commitInfo. The metadata
    commit's op comes from the column it added; a lost column is found."""
    run = SynthRun()
    run.invoke("1.1", "add-column", {"columns": [["c_1_1", "STRING"]]}, time=1, process=1)
    run.complete("1.1", OK, time=5)
    run.raw_commit(1, [info(None, None, "ADD COLUMNS"), meta_action({}, ("c_1_1",))])
    run.invoke("2.1", "add-column", {"columns": [["c_2_1", "STRING"]]}, time=6, process=2)
    run.complete("2.1", OK, time=8)  # acknowledged, but never in the log
    res = metadata.check(*run.build())
    assert [a.kind for a in res.anomalies] == ["lost-metadata-update"]
    assert res.anomalies[0].ops == ["2.1"]
    commits = metadata._commits(*run.build())
    assert commits[1].op is not None and commits[1].op.id == "1.1" and commits[1].is_metadata


def test_conflict_classes_near_metadata_changes_are_counted_and_wrong_ones_reported() -> None:
    run = set_property_run(b_read_version=2)
    # A write that failed while only the metadata change committed: must be E4.
    run.append(
        "4.1",
        [9],
        start=7,
        end=9,
        type=FAIL,
        process=4,
        error={"class": "commit-conflict-unclassified", "raw": "Failed to commit transaction: 0"},
    )
    run.append(
        "5.1",
        [8],
        start=7,
        end=9,
        type=FAIL,
        process=5,
        error={"class": "MetadataChangedException", "raw": "Metadata changed since last commit."},
    )
    res = metadata.check(*run.build())
    assert res.verdict.value == "valid"  # a class finding is no safety violation
    assert res.stats["conflict_classes_near_metadata_changes"] == {
        "commit-conflict-unclassified": 1,
        "MetadataChangedException": 1,
    }
    assert [f["op"] for f in res.stats["e4_class_findings"]] == ["4.1"]


# ---- real engines


def test_deltars_client_pads_appends_and_rejects_user_properties(tmp_path: Path) -> None:
    """delta-rs 1.6: an append lacking an added column fails unless the client
    fills it with NULL; SET TBLPROPERTIES takes only delta.* keys it knows,
    which is why "set-properties" is not in its capabilities."""
    deltalake = pytest.importorskip("deltalake")
    from harness.core.table import Column
    from harness.engines.base import ClientConfig
    from harness.engines.deltars import DELTARS_CAPABILITIES, DeltaRsClient
    from workloads.metadata import MetadataWorkload

    table = MetadataWorkload(1).table()
    c = DeltaRsClient(ClientConfig("delta-rs", "n1", 1, str(tmp_path / "t")))
    c.open()
    c.create_table(table)
    c.add_columns([Column("c_1_1", "STRING")], "1.1")
    res = c.append([(1, 1, 1, "1.2", None)], table, "dataframe", "1.2")
    assert res.version == 2 and c.last_read_version == 1
    assert deltalake.DeltaTable(str(tmp_path / "t")).schema().fields[-1].name == "c_1_1"
    c.set_properties({"delta.deletedFileRetentionDuration": "interval 9 days"}, "1.3")
    with pytest.raises(Exception, match="Error parsing property"):
        c.set_properties({"dj.prop.1_4": "1.4"}, "1.4")
    assert "set-properties" not in DELTARS_CAPABILITIES.ops
    assert {"add-columns", "append-idempotent"} <= DELTARS_CAPABILITIES.ops


@pytest.mark.integration
def test_metadata_on_delta_rs(results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--workload",
        "metadata",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    doc = load_results(only_run_dir(results_dir))
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), doc["checkers"]
    m = next(c for c in doc["checkers"] if c["checker"] == "metadata-conflicts")
    assert m["stats"]["metadata_commits"] > 0 and m["stats"]["commits_after_a_metadata_change"] > 0
    assert m["stats"]["read_version_unknown"] == 0  # the client records every write's snapshot
    # delta-rs reports a write beaten by a metadata change as E4.
    assert m["stats"]["conflict_classes_near_metadata_changes"].get("MetadataChangedException", 0) > 0
    assert m["stats"]["e4_class_findings"] == []
    # User table properties: reported unsupported, never skipped silently.
    by_f = doc["history"]["by_f"]
    assert by_f.get("set-property", 0) > 0
    assert m["stats"]["unsupported"] == {"set-property": by_f["set-property"]}
    assert m["stats"]["metadata_ops"].get("add-column:ok", 0) > 0


@pytest.mark.integration
def test_metadata_on_sail(results_dir: Path) -> None:
    """Sail 0.7.2: SET TBLPROPERTIES works, ADD COLUMNS is unsupported, and no
    commit carries a readVersion: writes racing a metadata change are judged
    unknown, never passed."""
    res = run_cli(
        "run",
        "--workload",
        "metadata",
        "--engine",
        "sail",
        "--storage",
        "seaweedfs",  # every workload on SeaweedFS in CI
        "--nodes",
        "1",
        "--concurrency",
        "4",
        "--time-limit",
        "8",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    )
    doc = load_results(only_run_dir(results_dir))
    assert not any(c["verdict"] == "invalid" for c in doc["checkers"]), res.stdout
    m = next(c for c in doc["checkers"] if c["checker"] == "metadata-conflicts")
    by_f = doc["history"]["by_f"]
    assert by_f.get("add-column", 0) > 0 and m["stats"]["unsupported"] == {"add-column": by_f["add-column"]}
    assert m["stats"]["metadata_ops"].get("set-property:ok", 0) > 0 and m["stats"]["metadata_commits"] > 0
    if m["stats"]["read_version_unknown"]:
        assert m["verdict"] == "unknown" and res.returncode == 3, res.stdout + res.stderr
    else:
        assert m["verdict"] == "valid" and res.returncode == 0, res.stdout + res.stderr
