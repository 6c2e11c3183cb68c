"""Synthetic runs whose data files carry whole rows (id, k, writer,
prev_writer, ...), for checkers that read more than `id` and `writer`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from harness.core.history import OK
from tests.synth import SynthRun, add_action, remove_action

TYPES = {
    "id": pa.int64(),
    "k": pa.int64(),
    "pos": pa.int64(),
    "v": pa.int64(),
    "writer": pa.string(),
    "prev_writer": pa.string(),
}


class KeyedRun(SynthRun):
    """A SynthRun whose commits add files of full rows (dicts), and whose
    history starts with the runner's create-table (row key, default level)."""

    def __init__(self, row_key: str = "k", default_isolation: str = "WriteSerializable") -> None:
        super().__init__()
        self.invoke(
            "setup.1",
            "create-table",
            {"row_key": row_key, "predicate_column": "k", "default_isolation": default_isolation},
            time=0,
            process="setup",
        )
        self.complete("setup.1", OK, time=1)

    def commit_rows(
        self,
        rows: Iterable[dict[str, Any]],
        *,
        op: str | None = None,
        removes: Iterable[str] = (),
        read_version: int | None = None,
    ) -> int:
        """One commit removing `removes` and adding file f<v>.parquet with `rows`."""
        v = self.latest + 1
        rows = list(rows)
        info: dict[str, Any] = {"timestamp": v, "operation": "MERGE"}
        if op is not None:
            info["dj.op"] = op
        if read_version is not None:
            info["readVersion"] = read_version
        actions: list[dict] = [{"commitInfo": info}, *(remove_action(p) for p in removes)]
        if rows:
            path = f"f{v}.parquet"
            names = list(rows[0])
            self.file_tables[path] = pa.table({n: pa.array([r.get(n) for r in rows], TYPES[n]) for n in names})
            actions.append(add_action(path, len(rows)))
        self.commits[v] = actions
        return v

    def op(
        self,
        op_id: str,
        f: str,
        value: dict[str, Any],
        *,
        start: int,
        end: int,
        type: str = OK,
        process: int | str = 0,
        result: dict[str, Any] | None = None,
    ) -> None:
        self.invoke(op_id, f, value, time=start, process=process)
        self.complete(op_id, type, time=end, value={**value, **(result or {})} if type == OK else None)
