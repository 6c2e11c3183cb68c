"""The table under test as a workload declares it, and the ids its rows carry."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Column", "TableSpec", "row_id"]


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Spark SQL type name: BIGINT, INT, STRING, DOUBLE, DATE, BOOLEAN


@dataclass(frozen=True)
class TableSpec:
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()

    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": [[c.name, c.type] for c in self.columns],
            "partition_by": list(self.partition_by),
            "properties": dict(self.properties),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableSpec:
        return cls(
            columns=tuple(Column(n, t) for n, t in d["columns"]),
            partition_by=tuple(d.get("partition_by", ())),
            properties=tuple(sorted(d.get("properties", {}).items())),
        )


# Row ids are unique across the run: slot-major, then op sequence, then row.
_SLOT_STRIDE = 10**12
_SEQ_STRIDE = 1000


def row_id(slot: int, seq: int, j: int) -> int:
    return slot * _SLOT_STRIDE + seq * _SEQ_STRIDE + j
