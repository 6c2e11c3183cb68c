"""Tests for harness.deltalog: the log reader must agree with delta-rs on every
version of real tables, and must survive broken logs without raising."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core.procs import venv_bin
from harness.deltalog import Commit, TransactionLog, copy_table, read_log

MOTO = venv_bin("moto_server")
BUCKET = "dj-test"


def _key(row: dict) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def sorted_rows(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=_key)


def kinds(log: TransactionLog) -> list[tuple[str, int | None]]:
    return [(p.kind, p.version) for p in log.problems]


def expected_at(loc: str, version: int, so: dict | None = None) -> tuple[list[dict], set[str]]:
    """(sorted rows, decoded relative file paths) of `version` per delta-rs."""
    dt_ = DeltaTable(loc, version=version, storage_options=so)
    root = dt_.table_uri.rstrip("/")
    uris = dt_.file_uris()
    rels = set()
    for u in uris:
        # file_uris gives local paths without a scheme, S3 ones with it.
        u = u.removeprefix("file://")
        r = root.removeprefix("file://")
        assert u.startswith(r + "/"), (u, r)
        rels.add(u[len(r) + 1 :])
    return sorted_rows(dt_.to_pyarrow_table()), rels


def assert_agrees(log: TransactionLog, expected: dict[int, tuple[list[dict], set[str]]]) -> None:
    for v, (rows, files) in expected.items():
        assert sorted_rows(log.rows_at(v)) == rows, f"rows differ at version {v}"
        assert {unquote(p) for p in log.live_files(v)} == files, f"files differ at version {v}"


def log_file(root: Path, version: int) -> Path:
    return root / "_delta_log" / f"{version:020d}.json"


def batch(ids: list[int], writer: str, part: list[str] | None = None) -> pa.Table:
    cols: dict = {"id": pa.array(ids, pa.int64()), "writer": [writer] * len(ids)}
    if part is not None:
        cols["part"] = part
    return pa.table(cols)


def history_table(p: str, so: dict | None = None) -> int:
    """appends, a delete, an overwrite, an append: versions 0..5."""
    write_deltalake(p, batch([0, 1, 2, 3, 4], "op0"), storage_options=so)
    write_deltalake(p, batch([5, 6, 7], "op1"), mode="append", storage_options=so)
    write_deltalake(p, batch([8, 9], "op2"), mode="append", storage_options=so)
    DeltaTable(p, storage_options=so).delete("id < 3")
    write_deltalake(p, batch([100, 101, 102], "op4"), mode="overwrite", storage_options=so)
    write_deltalake(p, batch([103], "op5"), mode="append", storage_options=so)
    return 5


# ---------------------------------------------------------------- real tables


def test_history_agrees_with_delta_rs(tmp_path: Path) -> None:
    p = str(tmp_path / "t")
    latest = history_table(p)
    log = read_log(p)
    assert log.problems == []
    assert log.versions == list(range(latest + 1))
    assert log.latest_version == latest
    assert log.checkpoint_versions == []
    assert log.last_checkpoint is None  # delta-rs writes none without a checkpoint
    assert_agrees(log, {v: expected_at(p, v) for v in range(latest + 1)})

    assert [log.commit(v).operation for v in log.versions] == [
        "WRITE", "WRITE", "WRITE", "DELETE", "WRITE", "WRITE",
    ]  # fmt: skip
    delete = log.commit(3)
    assert delete.read_version == 2
    assert delete.operation_parameters["predicate"] == "id < 3"
    assert len(delete.removes) >= 1 and all(r["path"] for r in delete.removes)
    stamps = [log.commit(v).timestamp for v in log.versions]
    assert all(isinstance(s, int) for s in stamps) and stamps == sorted(stamps)
    assert log.protocol_at(latest)["minReaderVersion"] >= 1
    assert log.metadata_at(latest)["id"] == log.commit(0).metadata["id"]
    assert log.configuration_at(latest) == {}

    seen = []
    for v, c, adds, removes in log.replay():
        assert c is log.commit(v) and adds == c.adds and removes == c.removes
        seen.append(v)
    assert seen == log.versions
    with pytest.raises(KeyError):
        log.live_files(latest + 1)
    assert log.live_files(-1) == {}


def test_partitioned_table_with_awkward_values(tmp_path: Path) -> None:
    p = str(tmp_path / "t")
    t = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "s": ["a b", None, "é/x", "x%y=z"],
            "n": pa.array([1, None, 3, -4], pa.int64()),
            "d": pa.array([dt.date(2024, 1, 1), None, dt.date(2024, 2, 29), dt.date(1970, 1, 1)]),
            "ts": pa.array(
                [
                    dt.datetime(2024, 1, 1, 1, 2, 3, 456789),
                    None,
                    dt.datetime(2024, 1, 1),
                    dt.datetime(2000, 5, 5, 5, 5, 5),
                ],
                pa.timestamp("us", "UTC"),
            ),  # fmt: skip
        }
    )
    parts = ["s", "n", "d", "ts"]
    write_deltalake(p, t, partition_by=parts)
    write_deltalake(p, t.slice(0, 2), mode="append", partition_by=parts)
    DeltaTable(p).delete("id = 3")
    log = read_log(p)
    assert log.problems == []
    assert_agrees(log, {v: expected_at(p, v) for v in log.versions})
    # Partition columns come back typed as the schema says, not as strings.
    assert log.rows_at(2).schema == DeltaTable(p).to_pyarrow_table().schema
    assert log.rows_at(2, ["n", "id"]).column_names == ["n", "id"]
    # The log double-encodes: directory "s=a%20b" is "s=a%2520b" in the log.
    paths = list(log.live_files(0))
    assert any(p.startswith("s=a%2520b/") for p in paths)


def test_checkpoint_then_cleanup_of_early_commits(tmp_path: Path) -> None:
    p = str(tmp_path / "t")
    write_deltalake(p, batch([0, 1, 2], "op0", ["a", "b", "a"]), partition_by=["part"])
    write_deltalake(p, batch([3, 4], "op1", ["b", "c"]), mode="append", partition_by=["part"])
    DeltaTable(p).delete("id < 2")
    DeltaTable(p).alter.set_table_properties({"delta.appendOnly": "false"})
    write_deltalake(p, batch([5], "op4", ["a"]), mode="append", partition_by=["part"])
    DeltaTable(p).create_checkpoint()  # at version 4
    write_deltalake(p, batch([6], "op5", ["d"]), mode="append", partition_by=["part"])
    write_deltalake(p, batch([7], "op6", ["a"]), mode="append", partition_by=["part"])
    expected = {v: expected_at(p, v) for v in range(7)}

    full = read_log(p)
    assert full.problems == [] and full.checkpoint_versions == [4]
    assert full.last_checkpoint["version"] == 4
    assert full.check_checkpoints() == []  # checkpoint agrees with JSON replay
    assert_agrees(full, expected)
    meta = full.metadata_at(6)

    for v in range(5):  # what log cleanup would do: the checkpoint covers 0..4
        log_file(Path(p), v).unlink()
    log = read_log(p)
    assert log.problems == []  # a cleaned-up prefix is not a gap
    assert log.versions == [5, 6] and log.checkpoint_versions == [4]
    assert log.latest_version == 6
    assert_agrees(log, {v: expected[v] for v in (4, 5, 6)})
    assert all(log.is_reconstructible(v) for v in (4, 5, 6))
    assert not log.is_reconstructible(3)
    # metaData and protocol now come from the checkpoint.
    assert log.metadata_at(6)["id"] == meta["id"]
    assert log.configuration_at(6) == {"delta.appendOnly": "false"}
    assert log.protocol_at(4) == {k: v for k, v in full.protocol_at(4).items() if v is not None}


def test_multipart_checkpoint(tmp_path: Path) -> None:
    p = tmp_path / "t"
    for i in range(4):
        write_deltalake(str(p), batch([i], f"op{i}"), mode="append")
    DeltaTable(str(p)).create_checkpoint()  # at 3
    write_deltalake(str(p), batch([9], "op4"), mode="append")
    expected = {v: expected_at(str(p), v) for v in (3, 4)}
    logdir = p / "_delta_log"
    single = logdir / f"{3:020d}.checkpoint.parquet"
    whole = pq.read_table(single)
    half = whole.num_rows // 2
    names = [logdir / f"{3:020d}.checkpoint.{i:010d}.{2:010d}.parquet" for i in (1, 2)]
    pq.write_table(whole.slice(0, half), names[0])
    pq.write_table(whole.slice(half), names[1])
    single.unlink()
    (logdir / "_last_checkpoint").unlink()  # optional; must not be needed
    for v in range(4):
        log_file(p, v).unlink()

    log = read_log(str(p))
    assert log.problems == [] and log.checkpoint_versions == [3]
    assert_agrees(log, expected)

    names[1].unlink()  # an incomplete multi-part checkpoint is no checkpoint
    log = read_log(str(p))
    assert ("checkpoint-unreadable", 3) in kinds(log)
    assert ("gap", 0) in kinds(log)
    assert log.checkpoint_versions == [] and log.versions == [4]


def test_v2_checkpoint_with_sidecar(tmp_path: Path) -> None:
    # delta-rs does not write v2 checkpoints; build one from its classic one:
    # a JSON top-level file naming a parquet sidecar that holds the adds.
    p = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(p), batch([i], f"op{i}"), mode="append")
    DeltaTable(str(p)).create_checkpoint()  # at 2
    write_deltalake(str(p), batch([3], "op3"), mode="append")
    expected = {v: expected_at(str(p), v) for v in (2, 3)}
    logdir = p / "_delta_log"
    classic = logdir / f"{2:020d}.checkpoint.parquet"
    whole = pq.read_table(classic)
    (logdir / "_sidecars").mkdir()
    adds = whole.filter(whole["add"].is_valid()).select(["add"])
    pq.write_table(adds, logdir / "_sidecars" / "s1.parquet")
    lines = [
        {"checkpointMetadata": {"version": 2}},
        {"sidecar": {"path": "s1.parquet", "sizeInBytes": 1, "modificationTime": 0}},
    ]
    for row in whole.select(["protocol", "metaData"]).to_pylist(maps_as_pydicts="strict"):
        lines += [{k: v} for k, v in row.items() if v is not None]
    v2 = logdir / f"{2:020d}.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"
    v2.write_text("\n".join(json.dumps(line) for line in lines))
    classic.unlink()
    (logdir / "_last_checkpoint").unlink()
    for v in range(3):
        log_file(p, v).unlink()
    log = read_log(str(p))
    assert log.problems == [] and log.checkpoint_versions == [2]
    assert_agrees(log, expected)
    assert log.metadata_at(3)["schemaString"]


def test_corrupt_checkpoint_standing_in_for_commits(tmp_path: Path) -> None:
    p = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(p), batch([i], f"op{i}"), mode="append")
    DeltaTable(str(p)).create_checkpoint()
    for v in range(2):
        log_file(p, v).unlink()
    (p / "_delta_log" / f"{2:020d}.checkpoint.parquet").write_bytes(b"PAR1 not really")
    log = read_log(str(p))
    assert ("checkpoint-broken", 2) in kinds(log)  # no parquet footer: written in part
    assert ("gap", 0) in kinds(log)  # nothing readable covers versions 0..1
    assert log.checkpoint_versions == []
    assert not log.is_reconstructible(2)
    assert sorted_rows(log.rows_at(2)) == [{"id": 2, "writer": "op2"}]  # best effort


def test_listing_sorted_into_commits_in_version_order() -> None:
    # Names listed in no order; a version in digits other than ASCII is a
    # commit too (as the commit pattern's \\d says), and two names of one
    # version come in name order.
    from harness.deltalog.read import _classify

    arabic = "".join(chr(0x660 + int(c)) for c in f"{2:020d}")
    names = [f"{3:020d}.json", f"{1:020d}.json", f"{2:020d}.json", f"{2:020d}.json\n", arabic + ".json",
             f"{1:020d}.json.tmp", f"{10:020d}.checkpoint.parquet"]  # fmt: skip
    got = _classify(TransactionLog(), names)
    assert got == sorted(got) and [v for v, _ in got] == [1, 2, 2, 2, 3]
    assert {n for _, n in got} == set(names[:5])
    assert _classify(TransactionLog(), names[:3]) == [(1, names[1]), (2, names[2]), (3, names[0])]


def test_side_files_are_not_commits(tmp_path: Path) -> None:
    p = tmp_path / "t"
    history_table(str(p))
    logdir = p / "_delta_log"
    (logdir / f"{0:020d}.crc").write_text("{}")
    (logdir / "_commit_0a1b.json.tmp").write_text("{not a commit")
    (logdir / "_commits").mkdir()
    (logdir / "_commits" / f"{9:020d}.abc.json").write_text("{}")
    log = read_log(str(p))
    assert log.problems == []
    assert log.versions == list(range(6))
    assert log.ignored_files == ["_commit_0a1b.json.tmp"]


def test_absolute_file_uris_in_adds(tmp_path: Path) -> None:
    p = tmp_path / "t"
    write_deltalake(str(p), batch([1, 2], "op0", ["a b", "c"]), partition_by=["part"])
    expected = {0: expected_at(str(p), 0)}
    f = log_file(p, 0)
    lines = []
    for line in f.read_text().splitlines():
        a = json.loads(line)
        if "add" in a:  # relative paths are already percent-encoded
            a["add"]["path"] = "file://" + quote(str(p)) + "/" + a["add"]["path"]
        lines.append(json.dumps(a))
    f.write_text("\n".join(lines))
    log = read_log("file://" + str(p))
    assert log.problems == []
    assert sorted_rows(log.rows_at(0)) == expected[0][0]


def test_missing_data_file_is_a_problem_not_an_error(tmp_path: Path) -> None:
    p = tmp_path / "t"
    write_deltalake(str(p), batch([1], "op0"))
    write_deltalake(str(p), batch([2], "op1"), mode="append")
    log = read_log(str(p))
    lost = log.commit(1).adds[0]["path"]
    (p / unquote(lost)).unlink()
    assert sorted_rows(log.rows_at(1)) == [{"id": 1, "writer": "op0"}]
    assert ("data-file-missing", 1) in kinds(log)
    assert log.file_rows(lost).num_rows == 0


def test_missing_location_is_an_empty_log(tmp_path: Path) -> None:
    log = read_log(str(tmp_path / "nothing-here"))
    assert kinds(log) == [("empty-log", None)]
    assert log.latest_version is None and log.versions == []


# ---------------------------------------------------------------- broken logs


def test_gap_in_versions(tmp_path: Path) -> None:
    p = tmp_path / "t"
    history_table(str(p))
    log_file(p, 2).unlink()
    log_file(p, 3).unlink()
    log = read_log(str(p))
    assert kinds(log) == [("gap", 2)]
    assert log.versions == [0, 1, 4, 5]
    assert not log.is_reconstructible(4) and log.is_reconstructible(1)
    log.rows_at(5)  # best effort, no exception


def test_corrupt_json_line(tmp_path: Path) -> None:
    p = tmp_path / "t"
    history_table(str(p))
    with log_file(p, 1).open("ab") as f:
        f.write(b'\n{"add": {"path": "x.parquet", }}\n')
    log = read_log(str(p))
    assert kinds(log) == [("unparseable", 1)]  # broken, not missing: no "gap"
    assert 1 not in log.versions and log.latest_version == 5
    with pytest.raises(KeyError, match="unparseable"):
        log.commit(1)
    assert not log.is_reconstructible(1)
    log.rows_at(2)  # v1 is skipped, nothing raises


def test_truncated_last_commit(tmp_path: Path) -> None:
    p = tmp_path / "t"
    history_table(str(p))
    f = log_file(p, 5)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    log = read_log(str(p))
    assert kinds(log) == [("unparseable", 5)]
    assert log.latest_version == 4
    assert sorted_rows(log.rows_at(4)) == expected_at(str(p), 4)[0]


def test_empty_and_garbage_commit_files(tmp_path: Path) -> None:
    p = tmp_path / "t"
    history_table(str(p))
    log_file(p, 6).write_bytes(b"")
    log_file(p, 7).write_bytes(b"\xff\xfe\x00garbage")
    log_file(p, 8).write_text('{"add": {"path": "a"}, "remove": {"path": "a"}}')  # two keys
    log_file(p, 9).write_text("[1, 2]")
    log = read_log(str(p))
    assert kinds(log) == [("unparseable", v) for v in (6, 7, 8, 9)]
    assert log.latest_version == 5


# ---------------------------------------------------------------- synthetic


def _add(path: str, **kw) -> dict:
    return {"add": {"path": path, "partitionValues": {}, "size": 1, "dataChange": True, **kw}}


def _remove(path: str) -> dict:
    return {"remove": {"path": path, "dataChange": True}}


def _meta(partitions: list[str] | None = None, conf: dict | None = None) -> dict:
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "k", "type": "integer", "nullable": True, "metadata": {}},
        ],
    }
    return {
        "metaData": {
            "id": "tbl",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": partitions or [],
            "configuration": conf or {},
        }
    }


PROTO = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def test_from_commits_tombstones_and_readd() -> None:
    tables = {
        "a": pa.table({"id": pa.array([1, 2], pa.int64())}),
        "b": pa.table({"id": pa.array([3], pa.int64())}),
    }
    log = TransactionLog.from_commits(
        [
            [{"commitInfo": {"operation": "CREATE TABLE"}}, PROTO, _meta()],
            [_add("a", partitionValues={"k": "7"})],
            [_add("b", partitionValues={"k": "8"})],
            [_remove("a")],
            [_add("a", partitionValues={"k": "7"})],
        ],
        file_tables=tables,
    )
    assert log.problems == []
    assert [sorted(log.live_files(v)) for v in range(5)] == [
        [], ["a"], ["a", "b"], ["b"], ["a", "b"],
    ]  # fmt: skip
    # Out-of-order queries must not be confused by the roll-forward cache.
    assert sorted(log.live_files(1)) == ["a"] and sorted(log.live_files(3)) == ["b"]
    # No partitionColumns in the metadata: partitionValues are not columns.
    assert sorted_rows(log.rows_at(4)) == [{"id": 1, "k": None}, {"id": 2, "k": None},
                                           {"id": 3, "k": None}]  # fmt: skip
    assert log.rows_at(0).num_rows == 0 and log.rows_at(0).column_names == ["id", "k"]
    assert [v for v, *_ in log.replay()] == [0, 1, 2, 3, 4]


def test_from_commits_partition_values_typed() -> None:
    tables = {"a": pa.table({"id": pa.array([1], pa.int64())})}
    log = TransactionLog.from_commits(
        [[PROTO, _meta(["k"]), _add("a", partitionValues={"k": "7"})]], file_tables=tables
    )
    assert log.file_rows("a").to_pylist() == [{"id": 1, "k": 7}]
    assert log.rows_at(0).schema.field("k").type == pa.int32()
    # Without metadata the values are appended as strings.
    bare = TransactionLog.from_commits([[_add("a", partitionValues={"k": "7"})]], file_tables=tables)
    assert bare.file_rows("a").to_pylist() == [{"id": 1, "k": "7"}]


def test_column_mapping_uses_logical_names() -> None:
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True,
         "metadata": {"delta.columnMapping.physicalName": "col-1"}},
        {"name": "k", "type": "string", "nullable": True,
         "metadata": {"delta.columnMapping.physicalName": "col-2"}}]}  # fmt: skip
    meta = {"metaData": {"id": "m", "schemaString": json.dumps(schema),
                         "partitionColumns": ["k"],
                         "configuration": {"delta.columnMapping.mode": "name"}}}  # fmt: skip
    tables = {"a": pa.table({"col-1": pa.array([1], pa.int64())})}
    log = TransactionLog.from_commits([[PROTO, meta, _add("a", partitionValues={"col-2": "x"})]], file_tables=tables)
    assert log.rows_at(0).to_pylist() == [{"id": 1, "k": "x"}]


def test_from_commits_gap_and_problems() -> None:
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4,
          "sizeInBytes": 40, "cardinality": 1}  # fmt: skip
    tables = {"a": pa.table({"id": pa.array([1, 2], pa.int64())})}
    log = TransactionLog.from_commits(
        [
            Commit(0, [PROTO, _meta()]),
            Commit(1, [_meta(), _meta(conf={"x": "1"}), PROTO, PROTO]),
            Commit(3, [_add("a", deletionVector=dv)]),
            Commit(4, [{"add": {"path": "b"}, "extra": 1}]),
            Commit(5, [{"add": {"size": 3}}]),
            Commit(6, [_add("c"), _add("c")]),
        ],
        file_tables=tables,
    )
    assert kinds(log) == [
        ("multiple-metadata", 1), ("multiple-protocol", 1), ("gap", 2),
        ("unparseable", 4), ("unparseable", 5), ("duplicate-file-action", 6),
    ]  # fmt: skip
    assert log.versions == [0, 1, 3, 6]
    assert log.configuration_at(2) == {"x": "1"}  # last metaData of commit 1 wins
    # An in-memory log has no DV file to read: the add's rows are not
    # reconstructible, so none are reported, and that is a problem.
    assert log.rows_at(3).num_rows == 0
    assert ("deletion-vector-unreadable", 3) in kinds(log)
    assert log.file_rows("a").num_rows == 2  # the physical rows stay readable


def test_deletion_vector_update_in_one_commit() -> None:
    # remove(path, oldDV) + add(path, newDV) in either order keeps the file.
    dv1 = {"storageType": "u", "pathOrInlineDv": "one", "sizeInBytes": 1, "cardinality": 1}
    dv2 = {"storageType": "u", "pathOrInlineDv": "two", "sizeInBytes": 1, "cardinality": 2}
    rm = {"remove": {"path": "a", "dataChange": True, "deletionVector": dv1}}
    log = TransactionLog.from_commits([[_add("a", deletionVector=dv1)], [_add("a", deletionVector=dv2), rm]])
    assert log.live_files(1)["a"]["deletionVector"]["pathOrInlineDv"] == "two"


def test_metadata_and_protocol_history() -> None:
    p3 = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7}}
    log = TransactionLog.from_commits(
        [
            [PROTO, _meta(conf={"delta.isolationLevel": "Serializable"})],
            [_add("a")],
            [_meta(conf={"delta.isolationLevel": "WriteSerializable"}), p3],
            [_add("b")],
        ]
    )
    assert log.configuration_at(1) == {"delta.isolationLevel": "Serializable"}
    assert log.configuration_at(3) == {"delta.isolationLevel": "WriteSerializable"}
    assert log.protocol_at(1)["minReaderVersion"] == 1
    assert log.protocol_at(3)["minReaderVersion"] == 3
    assert log.metadata_at(-1) is None
    # property_at remembers the versions an answer holds for: asked in
    # version order, backwards, and past the last version, it agrees.
    key = "delta.isolationLevel"
    want = ["Serializable", "Serializable", "WriteSerializable", "WriteSerializable"]
    assert [log.property_at(v, key) for v in [0, 1, 2, 3]] == want
    assert [log.property_at(v, key) for v in [3, 2, 1, 0]] == want[::-1]
    assert [log.property_at(v, key) for v in [1, 3, 0, 2]] == [want[v] for v in [1, 3, 0, 2]]
    assert log.property_at(-1, key) is None and log.property_at(9, key) == "WriteSerializable"
    assert log.property_at(1, "absent") is None and log.property_at(3, "absent") is None


def test_in_memory_checkpoint_covers_missing_commits() -> None:
    ck = [PROTO, _meta(conf={"c": "1"}), _add("a"), _add("b"), _remove("old")]
    log = TransactionLog.from_commits([Commit(3, [_remove("a")]), Commit(4, [_add("c")])], checkpoints={2: ck})
    assert log.problems == []
    assert log.checkpoint_versions == [2] and log.latest_version == 4
    assert sorted(log.live_files(2)) == ["a", "b"]
    assert sorted(log.live_files(4)) == ["b", "c"]
    assert log.configuration_at(4) == {"c": "1"}


def test_commit_properties_tolerate_bad_types() -> None:
    good = Commit(0, [{"commitInfo": {
        "timestamp": 5, "operation": "WRITE", "readVersion": 3,
        "isolationLevel": "Serializable", "isBlindAppend": True}},
        {"txn": {"appId": "w1", "version": 2, "lastUpdated": 9}}])  # fmt: skip
    assert (good.timestamp, good.operation, good.read_version) == (5, "WRITE", 3)
    assert (good.isolation_level, good.is_blind_append) == ("Serializable", True)
    assert good.txns == [{"appId": "w1", "version": 2, "lastUpdated": 9}]
    bad = Commit(1, [{"commitInfo": {"timestamp": "x", "readVersion": True, "operation": 3}}])
    assert (bad.timestamp, bad.read_version, bad.operation) == (None, None, None)
    assert Commit(2, []).commit_info is None and Commit(2, []).is_blind_append is None
    # has(kind), whether the actions are one-key objects or not (kept as given).
    assert good.has("txn") and not good.has("metaData") and not Commit(2, []).has("commitInfo")
    odd = Commit(3, [{"metaData": {"id": "m"}, "x": 1}, 7])
    assert odd.has("metaData") and not odd.has("add") and odd.commit_info is None
    # file_actions: the kinds in file order and the file actions, either way.
    mixed = [_add("a"), {"commitInfo": {}}, _remove("b"), _add("c")]
    want = (("add", "commitInfo", "remove", "add"), [mixed[0]["add"], mixed[3]["add"]], [mixed[2]["remove"]])
    assert Commit(4, mixed).file_actions() == want
    assert Commit(5, [*mixed, 7]).file_actions() == want and Commit(6, []).file_actions() == ((), [], [])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=4), max_size=12),
       st.lists(st.integers(0, 11), max_size=12))  # fmt: skip
def test_live_files_matches_a_model(ops: list[list[tuple[bool, int]]], queries: list[int]) -> None:
    commits, model, states = [], set(), []
    for version_ops in ops:
        actions = []
        for is_add, n in version_ops:
            path = f"f{n}"
            actions.append(_add(path) if is_add else _remove(path))
            (model.add if is_add else model.discard)(path)
        commits.append(actions or [{"commitInfo": {}}])
        states.append(set(model))
    log = TransactionLog.from_commits(commits)
    for q in queries:  # arbitrary order exercises the roll-forward cache
        if q < len(states):
            assert set(log.live_files(q)) == states[q]


# ---------------------------------------------------------------- S3 (moto)


@dataclass
class S3:
    endpoint: str
    boto: dict  # read_log's storage_options (boto3 names)
    delta: dict  # delta-rs storage_options


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory):
    out_path = tmp_path_factory.mktemp("moto") / "moto.log"
    # Output to a file, not a pipe: moto logs every request, and a pipe
    # nobody drains would fill up and stall the server.
    with out_path.open("wb") as out:
        proc = subprocess.Popen([MOTO, "-H", "127.0.0.1", "-p", "0"], stdout=out,
                                stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            m = re.search(rb" \* Running on http://127\.0\.0\.1:(\d+)", out_path.read_bytes())
            if m:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto_server did not start: {out_path.read_text()[-500:]}")
            time.sleep(0.05)
        ep = f"http://127.0.0.1:{int(m[1])}"
        boto = {"endpoint_url": ep, "aws_access_key_id": "x", "aws_secret_access_key": "x",
                "region_name": "us-east-1"}  # fmt: skip
        import boto3

        boto3.client("s3", **boto).create_bucket(Bucket=BUCKET)
        delta = {"AWS_ENDPOINT_URL": ep, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
                 "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}  # fmt: skip
        yield S3(ep, boto, delta)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_s3_read_and_copy(s3: S3, tmp_path: Path) -> None:
    loc = f"s3://{BUCKET}/t"
    so = s3.delta
    write_deltalake(loc, batch([0, 1, 2], "op0", ["a b", "c", "a b"]), partition_by=["part"],
                    storage_options=so)  # fmt: skip
    write_deltalake(loc, batch([3, 4], "op1", ["c", "d/e"]), mode="append",
                    partition_by=["part"], storage_options=so)  # fmt: skip
    DeltaTable(loc, storage_options=so).delete("id < 2")
    DeltaTable(loc, storage_options=so).create_checkpoint()
    write_deltalake(loc, batch([5], "op3", ["c"]), mode="append", partition_by=["part"],
                    storage_options=so)  # fmt: skip
    # A sibling table whose name extends ours must stay out of listings.
    write_deltalake(f"s3://{BUCKET}/t2", batch([99], "x"), storage_options=so)
    expected = {v: expected_at(loc, v, so) for v in range(4)}

    log = read_log(loc, s3.boto)
    assert log.problems == [] and log.versions == [0, 1, 2, 3]
    assert log.checkpoint_versions == [2] and log.check_checkpoints() == []
    assert_agrees(log, expected)
    # delta-rs' own option names are understood too.
    assert sorted_rows(read_log(loc + "/", s3.delta).rows_at(3)) == expected[3][0]

    import boto3

    keys = [o["Key"] for o in boto3.client("s3", **s3.boto).list_objects_v2(
        Bucket=BUCKET, Prefix="t/")["Contents"]]  # fmt: skip
    dest = tmp_path / "copy"
    assert copy_table(loc, dest, s3.boto) == len(keys)
    copied = read_log(str(dest))
    assert copied.problems == [] and copied.versions == log.versions
    assert_agrees(copied, expected)
    # The copy is a real table: delta-rs reads it too.
    assert sorted_rows(DeltaTable(str(dest)).to_pyarrow_table()) == expected[3][0]


def test_s3_checkpoint_cleanup_and_missing_table(s3: S3, tmp_path: Path) -> None:
    import boto3

    loc, so = f"s3://{BUCKET}/cp", s3.delta
    for i in range(3):
        write_deltalake(loc, batch([i], f"op{i}"), mode="append", storage_options=so)
    DeltaTable(loc, storage_options=so).create_checkpoint()
    write_deltalake(loc, batch([3], "op3"), mode="append", storage_options=so)
    expected = {v: expected_at(loc, v, so) for v in (2, 3)}
    client = boto3.client("s3", **s3.boto)
    for v in range(2):
        client.delete_object(Bucket=BUCKET, Key=f"cp/_delta_log/{v:020d}.json")
    log = read_log(loc, s3.boto)
    assert log.problems == [] and log.versions == [2, 3]
    assert_agrees(log, expected)
    assert kinds(read_log(f"s3://{BUCKET}/nope", s3.boto)) == [("empty-log", None)]
    # Local copies work for local tables too.
    assert copy_table(str(tmp_path / "none"), tmp_path / "c") == 0


def test_s3_replay_reads_data_files_ahead(s3: S3, tmp_path: Path) -> None:
    """file_rows in log order on S3 starts reading the next files in threads;
    what it returns, and the problems it records, are those of a local copy
    read file by file."""
    import boto3

    loc, so = f"s3://{BUCKET}/ahead", s3.delta
    for i in range(12):
        write_deltalake(loc, batch([i, i + 100], f"op{i}"), mode="append", storage_options=so)
    DeltaTable(loc, storage_options=so).delete("id < 3")
    copy_table(loc, tmp_path / "copy", s3.boto)
    log, local = read_log(loc, s3.boto), read_log(str(tmp_path / "copy"))
    paths = [a["path"] for _v, _c, adds, _r in local.replay() for a in adds]
    # One data file goes missing, from S3 and from the copy alike.
    boto3.client("s3", **s3.boto).delete_object(Bucket=BUCKET, Key=f"ahead/{unquote(paths[5])}")
    (tmp_path / "copy" / unquote(paths[5])).unlink()
    for p in paths:
        assert log.file_rows(p).to_pylist() == local.file_rows(p).to_pylist()
    assert [(x.kind, x.version) for x in log.problems] == [(x.kind, x.version) for x in local.problems]
    assert [x.kind for x in log.problems] == ["data-file-missing"]  # a 404 from S3, as a missing local file
    assert sorted_rows(log.rows_at(log.latest_version)) == sorted_rows(local.rows_at(local.latest_version))
