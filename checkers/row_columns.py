"""Column values of every row version ever added, by row id.

`checkers.facts.table_facts` tracks each row's lifetime by its unique `id`;
checkers that reason about other columns (a row key, a list position) look
them up here instead of replaying the log a second time.
"""

from __future__ import annotations

from typing import Any

from harness.deltalog import TransactionLog, column_values


def row_columns(log: TransactionLog, columns: list[str]) -> dict[Any, tuple]:
    """id -> the row's values of `columns` (None where a file lacks one), from
    the first file that added the id. Files come from the log's cache."""
    out: dict[Any, tuple] = {}
    for _, _, adds, _ in log.replay():
        for add in adds:
            rows = log.add_rows(add)
            ids = column_values(rows, "id")
            if not ids:
                continue
            cols = [column_values(rows, c) or [None] * len(ids) for c in columns]
            for rid, *vals in zip(ids, *cols, strict=True):
                out.setdefault(rid, tuple(vals))
    return out
