"""A run's kept copies of its data files and commits: a file the store no
longer has is read from them, and named among the files deleted; a commit
log cleanup deleted is replayed from its copy."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from harness.deltalog import DataFileKeeper, read_log


def _table(root: Path, **config: str) -> DeltaTable:
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": [i, i + 10]}), mode="append", configuration=config or None)
    return DeltaTable(str(root))


def test_a_vacuumed_file_is_read_from_its_kept_copy_and_named_deleted(tmp_path: Path) -> None:
    table, kept = tmp_path / "table", tmp_path / "kept"
    dt = _table(table)
    keeper = DataFileKeeper(str(table), kept)
    assert keeper.sweep() == 6 and keeper.sweep() == 0  # 3 data files, 3 commits
    dt.delete("id = 1")
    dt.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)

    log = read_log(str(table), kept=kept)
    assert log.deleted_files is not None and len(log.deleted_files) == 1
    (gone,) = log.deleted_files
    assert not (table / gone).exists() and (kept / gone).exists()
    assert sorted(log.rows_at(1, ["id"]).column("id").to_pylist()) == [0, 1, 10, 11]
    assert not log.unreadable_files and not [p for p in log.problems if p.kind.startswith("data-file")]


def test_without_kept_copies_a_vacuumed_file_is_missing(tmp_path: Path) -> None:
    table = tmp_path / "table"
    dt = _table(table)
    dt.delete("id = 1")
    dt.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False)
    log = read_log(str(table))
    assert log.deleted_files is None
    log.rows_at(1, ["id"])
    assert [p.kind for p in log.problems if p.kind.startswith("data-file")] == ["data-file-missing"]


def test_local_files_are_kept_by_hard_link(tmp_path: Path) -> None:
    table, kept = tmp_path / "table", tmp_path / "kept"
    _table(table)
    DataFileKeeper(str(table), kept).sweep()
    name = next(p.name for p in table.glob("*.parquet"))
    assert os.stat(kept / name).st_ino == os.stat(table / name).st_ino
    # Of the log, the commits only (a checkpoint is rebuilt from them).
    assert sorted(p.name for p in (kept / "_delta_log").iterdir()) == [f"{v:020d}.json" for v in range(3)]


def test_commits_log_cleanup_deleted_are_replayed_from_their_kept_copies(tmp_path: Path) -> None:
    table, kept = tmp_path / "table", tmp_path / "kept"
    dt = _table(table, **{"delta.logRetentionDuration": "interval 0 seconds"})
    DataFileKeeper(str(table), kept).sweep()
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (table / "_delta_log" / f"{0:020d}.json").exists()

    log = read_log(str(table), kept=kept)
    assert log.versions == [0, 1, 2] and log.expired_commits == {0, 1}
    assert sorted(log.rows_at(1, ["id"]).column("id").to_pylist()) == [0, 1, 10, 11]
    assert read_log(str(table)).versions == [2]  # without the copies: from the checkpoint on
