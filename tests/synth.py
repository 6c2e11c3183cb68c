"""Synthetic (History, TransactionLog) pairs for checker tests.

A :class:`SynthRun` records history events with explicit times and builds the
history by serialising them to JSON lines and loading them with the real
:func:`harness.core.history.parse_lines`, so the loader is exercised too. It also
records commits: version 0 creates the table (protocol + metaData, no rows),
and each later commit that adds rows adds one data file ``f<v>.parquet`` whose
pyarrow table has columns ``id`` (int64) and ``writer`` (string). The log is
built with :meth:`TransactionLog.from_commits`, so ``file_rows(path)`` returns
those tables.

Example::

    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)        # invoke + ok
    run.commit_op("0.1", [1, 2])                      # version 1
    run.read("1.1", [1, 2], start=30, end=40)
    history, log = run.build()
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from harness.core.history import FAIL, INFO, INVOKE, OK, History, parse_lines
from harness.deltalog import Commit, TransactionLog

SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.string())])
SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "writer", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)
OP_ID_KEY = "dj.op"

_DEFAULT_ERRORS = {
    FAIL: {"class": "ConcurrentAppendException", "raw": "synthetic conflict"},
    INFO: {"class": "timeout", "raw": "synthetic timeout"},
}


def rows_table(rows: Iterable[tuple[int, str | None]]) -> pa.Table:
    rows = list(rows)
    return pa.table(
        {"id": pa.array([r[0] for r in rows], pa.int64()), "writer": pa.array([r[1] for r in rows], pa.string())},
        schema=SCHEMA,
    )


def create_actions() -> list[dict]:
    return [
        {"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000000",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": SCHEMA_STRING,
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 0,
            }
        },
    ]


def add_action(path: str, num_records: int) -> dict:
    return {
        "add": {
            "path": path,
            "partitionValues": {},
            "size": 100,
            "modificationTime": 0,
            "dataChange": True,
            "stats": json.dumps({"numRecords": num_records}),
        }
    }


def remove_action(path: str) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": 0, "dataChange": True}}


@dataclass
class SynthRun:
    """Builder for one synthetic run: history events plus log commits."""

    create: bool = True  # version 0 creates the table
    events: list[dict] = field(default_factory=list)
    commits: dict[int, Any] = field(default_factory=dict)  # version -> actions
    file_tables: dict[str, pa.Table] = field(default_factory=dict)
    _procs: dict[str, int | str] = field(default_factory=dict)
    _f: dict[str, str] = field(default_factory=dict)
    _invoke_values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.create:
            self.commits[0] = create_actions()

    # ---- history

    def event(
        self,
        *,
        time: int,
        process: int | str,
        type: str,
        f: str,
        id: str,
        value: Any = None,
        version: int | None = None,
        error: dict | None = None,
    ) -> dict:
        ev = {
            "index": None,
            "time": time,
            "wall": 1.7e9 + time / 1e9,
            "process": process,
            "node": "n1",
            "type": type,
            "f": f,
            "id": id,
            "value": value,
            "version": version,
            "error": error,
        }
        self.events.append(ev)
        return ev

    def invoke(self, op_id: str, f: str, value: Any = None, *, time: int, process: int | str = 0) -> None:
        self._procs[op_id] = process
        self._f[op_id] = f
        self._invoke_values[op_id] = value
        self.event(time=time, process=process, type=INVOKE, f=f, id=op_id, value=value)

    def complete(
        self,
        op_id: str,
        type: str,
        *,
        time: int,
        value: Any = None,
        version: int | None = None,
        error: dict | None = None,
    ) -> None:
        """Completion of an invoked op; value defaults to the invoke value (as
        the runner records it) and error to a typical one for fail/info."""
        if value is None:
            value = self._invoke_values.get(op_id)
        if error is None and type in _DEFAULT_ERRORS:
            error = dict(_DEFAULT_ERRORS[type])
        self.event(
            time=time,
            process=self._procs[op_id],
            type=type,
            f=self._f[op_id],
            id=op_id,
            value=value,
            version=version,
            error=error,
        )

    def append(
        self,
        op_id: str,
        ids: Sequence[int],
        *,
        start: int,
        end: int | None,
        type: str = OK,
        process: int | str = 0,
        version: int | None = None,
        via: str = "sql",
        error: dict | None = None,
    ) -> None:
        """An append op: invoke at `start`, completion `type` at `end` (none
        if `end` is None: the op never completed)."""
        self.invoke(op_id, "append", {"ids": list(ids), "via": via}, time=start, process=process)
        if end is not None:
            self.complete(op_id, type, time=end, version=version, error=error)

    def read(
        self,
        op_id: str,
        ids: Iterable[int] | None,
        *,
        start: int,
        end: int,
        type: str = OK,
        process: int | str = 0,
        version: int | None = None,
        final: bool = False,
        via: str = "dataframe",
    ) -> None:
        """A read op; an ok read's value is {"ids": sorted ids, "via", ["final"]}."""
        value: dict[str, Any] = {"via": via}
        if final:
            value["final"] = True
        self.invoke(op_id, "read", value, time=start, process=process)
        if type == OK:
            done = {**value, "ids": sorted(ids or [])}
            self.complete(op_id, OK, time=end, value=done, version=version)
        else:
            self.complete(op_id, type, time=end)

    def history_lines(self) -> list[str]:
        """JSON lines as the HistoryWriter writes them: ordered by time
        (stable), indices from 0, one newline-terminated line each."""
        ordered = sorted(self.events, key=lambda e: e["time"])
        out = []
        for i, ev in enumerate(ordered):
            out.append(json.dumps({**ev, "index": i}, separators=(",", ":")) + "\n")
        return out

    def history(self) -> History:
        return parse_lines(self.history_lines())

    # ---- log

    @property
    def latest(self) -> int:
        return max(self.commits, default=-1)

    def raw_commit(self, version: int, actions: Any) -> None:
        """Put arbitrary (possibly invalid) actions at `version`."""
        self.commits[version] = actions

    def commit(
        self,
        rows: Iterable[tuple[int, str | None]] = (),
        *,
        op: str | None = None,
        removes: Iterable[str] = (),
        version: int | None = None,
        extra_actions: Iterable[dict] = (),
    ) -> int:
        """A commit at `version` (default: the next one) that removes the
        given paths and, if there are rows, adds one file f<v>.parquet holding
        them; `op` puts {"dj.op": op} in its commitInfo. Returns the version."""
        v = self.latest + 1 if version is None else version
        rows = list(rows)
        info: dict[str, Any] = {"timestamp": v, "operation": "WRITE"}
        if op is not None:
            info[OP_ID_KEY] = op
        actions: list[dict] = [{"commitInfo": info}]
        actions += [remove_action(p) for p in removes]
        if rows:
            path = f"f{v}.parquet"
            self.file_tables[path] = rows_table(rows)
            actions.append(add_action(path, len(rows)))
        actions += list(extra_actions)
        self.commits[v] = actions
        return v

    def commit_op(self, op_id: str, ids: Iterable[int], *, tag: bool = False, version: int | None = None) -> int:
        """Commit op `op_id`'s rows (id, writer=op_id); `tag` adds dj.op."""
        return self.commit([(i, op_id) for i in ids], op=op_id if tag else None, version=version)

    def log(self) -> TransactionLog:
        return TransactionLog.from_commits([Commit(v, a) for v, a in sorted(self.commits.items())], self.file_tables)

    def build(self) -> tuple[History, TransactionLog]:
        return self.history(), self.log()
