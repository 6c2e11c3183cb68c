"""copy_table: archive a table (its log and data files, byte for byte) into a
local directory, so a run's table can be re-checked after its S3 server is
gone."""

from __future__ import annotations

import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.deltalog.names import _COMMIT_RE
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


# Where a run folder keeps its copies of the data files (DataFileKeeper).
KEPT_DIR = "kept"


def _in_log(rel: str) -> bool:
    return rel.startswith(("_delta_log/", "_delta_log" + os.sep))


class DataFileKeeper:
    """Keeps a copy of every data file of a table as it appears, and of
    every commit file of its log, in a local directory, names unchanged: the
    rows of files VACUUM later deletes stay readable as evidence, so do the
    commits log cleanup deletes, and the files missing from the table but
    kept are the ones deleted (read_log's `kept`). Call `sweep` often while the
    table is written; a file written and deleted between two sweeps is not
    kept. Local tables are kept by hard link (no bytes copied), S3 tables
    by one GET per new object."""

    def __init__(self, location: str, dest: str | os.PathLike, storage_options: dict | None = None) -> None:
        self.store, _ = _open_store(location, storage_options)
        self.dest = Path(dest)
        self.kept: set[str] = set()
        self._lock = threading.Lock()

    def sweep(self) -> int:
        """Keep the data files that appeared since the last sweep; returns how
        many. Safe to call from several threads."""
        with self._lock:
            return self._sweep()

    def _sweep(self) -> int:
        new = 0
        try:
            rels = self.store.list_all()
        except FileNotFoundError:
            return 0
        for rel in rels:
            if rel in self.kept or (_in_log(rel) and not _COMMIT_RE.match(os.path.basename(rel))):
                continue
            target = self.dest / rel
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                if isinstance(self.store, _LocalStore):
                    try:
                        os.link(self.store.root / rel, target)
                    except OSError:
                        shutil.copy2(self.store.root / rel, target)
                else:
                    target.write_bytes(self.store.read_rel(rel))
            except FileExistsError:
                pass
            except Exception:  # noqa: BLE001 - deleted between list and read: not kept
                continue
            self.kept.add(rel)
            new += 1
        return new
