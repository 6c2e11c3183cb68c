"""A run's kept copies of its data files: a file the store no longer has
is read from them, and named among the files deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from harness.deltalog import DataFileKeeper, read_log


def _table(root: Path) -> DeltaTable:
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": [i, i + 10]}), mode="append")
    return DeltaTable(str(root))


def test_a_vacuumed_file_is_read_from_its_kept_copy_and_named_deleted(tmp_path: Path) -> None:
    table, kept = tmp_path / "table", tmp_path / "kept"
    dt = _table(table)
    keeper = DataFileKeeper(str(table), kept)
    assert keeper.sweep() == 3 and keeper.sweep() == 0
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
    assert not (kept / "_delta_log").exists()
