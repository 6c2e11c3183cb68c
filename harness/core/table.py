"""The table under test as a workload declares it, and the ids its rows carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Column", "TableDeclaration", "TableSpec", "row_id"]


@dataclass(frozen=True)
class Column:
    """One column of the table: its name and Spark SQL type."""

    name: str
    type: str  # Spark SQL type name: BIGINT, INT, STRING, DOUBLE, DATE, BOOLEAN


@dataclass(frozen=True)
class TableSpec:
    """The table a workload declares: columns, partition columns, properties."""

    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()
    properties: tuple[tuple[str, str], ...] = ()
    # A column the engine fills (GENERATED ALWAYS AS IDENTITY, spec C19):
    # writes name every column but this one.
    identity: str | None = None

    def column_names(self) -> list[str]:
        """The columns' names, in order."""
        return [c.name for c in self.columns]

    def written_columns(self) -> tuple[Column, ...]:
        """The columns a write gives values for: all but the identity column."""
        return tuple(c for c in self.columns if c.name != self.identity)

    def to_json(self) -> dict[str, Any]:
        """As recorded in the create-table op and spec.json."""
        out: dict[str, Any] = {
            "columns": [[c.name, c.type] for c in self.columns],
            "partition_by": list(self.partition_by),
            "properties": dict(self.properties),
        }
        if self.identity is not None:
            out["identity"] = self.identity
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableSpec:
        return cls(
            columns=tuple(Column(n, t) for n, t in d["columns"]),
            partition_by=tuple(d.get("partition_by", ())),
            properties=tuple(sorted(d.get("properties", {}).items())),
            identity=d["identity"] if isinstance(d.get("identity"), str) else None,
        )


# Row ids are unique across the run: slot-major, then op sequence, then row.
_SLOT_STRIDE = 10**12
_SEQ_STRIDE = 1000


def row_id(slot: int, seq: int, j: int) -> int:
    """A row id unique across the run: row `j` of op `seq` of slot `slot`
    (slots from 1; a slot's rows stay below the next slot's)."""
    return slot * _SLOT_STRIDE + seq * _SEQ_STRIDE + j


@dataclass(frozen=True)
class TableDeclaration:
    """What the runner records as the value of the run's create-table op: the
    table, and the facts checkers need that the log does not carry."""

    table: TableSpec | None = None
    engine: str | None = None
    default_isolation: str | None = None  # the creating engine's, where the table carries none (C13)
    row_key: str | None = None  # the column naming a row
    predicate_column: str | None = None  # the column predicates read
    strict_exceptions: bool = False
    # Mixed-engine runs: each node's engine, and each engine's default level.
    node_engines: dict[str, str] = field(default_factory=dict)
    default_isolation_by_engine: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The op value, key for key as runs have always recorded it."""
        out: dict[str, Any] = {
            **(self.table.to_json() if self.table is not None else {}),
            "engine": self.engine,
            "default_isolation": self.default_isolation,
            "row_key": self.row_key,
            "predicate_column": self.predicate_column,
            "strict_exceptions": self.strict_exceptions,
        }
        if self.node_engines:
            out["node_engines"] = dict(self.node_engines)
            out["default_isolation_by_engine"] = dict(self.default_isolation_by_engine)
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TableDeclaration:
        """Tolerant of old and partial records: what is missing stays None."""
        table = TableSpec.from_json(d) if isinstance(d.get("columns"), list) else None

        def text(key: str) -> str | None:
            v = d.get(key)
            return v if isinstance(v, str) else None

        def names(key: str) -> dict[str, str]:
            v = d.get(key)
            return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else {}

        return cls(
            table=table,
            engine=text("engine"),
            default_isolation=text("default_isolation"),
            row_key=text("row_key"),
            predicate_column=text("predicate_column"),
            strict_exceptions=bool(d.get("strict_exceptions")),
            node_engines=names("node_engines"),
            default_isolation_by_engine=names("default_isolation_by_engine"),
        )
