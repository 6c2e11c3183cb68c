"""copy_table: archive a table (its log and data files, byte for byte) into a
local directory, so a run's table can be re-checked after its S3 server is
gone."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.deltalog.store import _S3_WORKERS, _LocalStore, _open_store


def copy_table(location: str, dest: str | os.PathLike, storage_options: dict | None = None) -> int:
    """Copy every object under `location` (log and data files, byte for byte,
    names unchanged) into the local directory `dest`; returns the count.

    Used to keep a table with a run's results, so it can be re-checked with
    read_log(dest) after the S3 server is gone.
    """
    store, _ = _open_store(location, storage_options)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    rels = store.list_all()
    if isinstance(store, _LocalStore):
        for rel in rels:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(store.root / rel, target)
        return len(rels)

    def copy(rel: str) -> None:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(store.read_rel(rel))

    with ThreadPoolExecutor(max(1, min(_S3_WORKERS, len(rels)))) as pool:
        list(pool.map(copy, rels))  # list() re-raises any failure
    return len(rels)
