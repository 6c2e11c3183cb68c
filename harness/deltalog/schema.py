"""The table schema in Arrow terms: Delta's JSON types as Arrow types, the
logical and physical (column-mapped) column names, partition values as
typed columns, and a data file's rows given the table's column order and
types; also the parquet decoding every data file goes through."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

try:  # what pq.ParquetFile wraps (see _read_parquet)
    from pyarrow._parquet import ParquetReader as _ParquetReader
except ImportError:
    _ParquetReader = None

_PRIMITIVES = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def _arrow_type(t: Any) -> pa.DataType | None:
    """None for a type we do not know; callers then leave the column as read."""
    try:
        if isinstance(t, str):
            if t in _PRIMITIVES:
                return _PRIMITIVES[t]
            m = _DECIMAL_RE.match(t)
            return pa.decimal128(int(m[1]), int(m[2])) if m else None
        if isinstance(t, dict):
            kind = t.get("type")
            if kind == "struct":
                fs = []
                for f in t.get("fields", []):
                    ft = _arrow_type(f.get("type"))
                    if ft is None:
                        return None
                    fs.append(pa.field(f["name"], ft))
                return pa.struct(fs)
            if kind == "array":
                et = _arrow_type(t.get("elementType"))
                return pa.list_(et) if et is not None else None
            if kind == "map":
                kt, vt = _arrow_type(t.get("keyType")), _arrow_type(t.get("valueType"))
                return pa.map_(kt, vt) if kt is not None and vt is not None else None
    except (KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    return None


@dataclass(frozen=True)
class _Field:
    name: str  # logical
    physical: str  # name in data files and partitionValues (column mapping)
    type: pa.DataType | None


@dataclass(frozen=True)
class _Schema:
    fields: tuple[_Field, ...]
    partition_columns: tuple[str, ...]

    def field(self, name: str) -> _Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def arrow(self) -> pa.Schema:
        return pa.schema([(f.name, f.type if f.type is not None else pa.null()) for f in self.fields])


def _schema_of(meta: dict | None) -> _Schema | None:
    if not isinstance(meta, dict):
        return None
    try:
        raw = json.loads(meta.get("schemaString") or "{}")
    except (ValueError, TypeError):
        return None
    conf = meta.get("configuration") or {}
    mapped = isinstance(conf, dict) and conf.get("delta.columnMapping.mode") in ("name", "id")
    fields = []
    for f in raw.get("fields", []) if isinstance(raw, dict) else []:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            continue
        md = f.get("metadata") or {}
        phys = md.get("delta.columnMapping.physicalName") if mapped else None
        fields.append(_Field(f["name"], phys or f["name"], _arrow_type(f.get("type"))))
    pcols = meta.get("partitionColumns") or []
    return _Schema(tuple(fields), tuple(c for c in pcols if isinstance(c, str)))


def _partition_array(raw: Any, typ: pa.DataType | None, n: int) -> tuple[pa.Array, bool]:
    """A column of n copies of one partition value; (array, parsed_ok)."""
    typ = typ or pa.string()
    if raw is None:
        return pa.nulls(n, typ), True
    s = pa.array([str(raw)], pa.string())
    try:
        try:
            one = s.cast(typ)
        except pa.ArrowInvalid:
            # Delta writes UTC timestamps as "2024-01-01 00:00:00.123456"
            # without a zone; Arrow refuses that for a zoned type.
            if not pa.types.is_timestamp(typ) or typ.tz is None:
                raise
            one = s.cast(pa.timestamp(typ.unit)).cast(typ)
        return pa.repeat(one[0], n), True
    except (pa.ArrowException, ValueError):
        return pa.repeat(s[0], n), False


def _conform(table: pa.Table, schema: _Schema | None) -> pa.Table:
    """Give a file's rows the table schema: its column order and types, nulls
    for columns the file predates. Extra columns are kept at the end."""
    if schema is None or not schema.fields:
        return table
    arrays, names = [], []
    for f in schema.fields:
        if f.name in table.column_names:
            col = table[f.name]
            if f.type is not None and col.type != f.type:
                try:
                    col = col.cast(f.type)
                except (pa.ArrowException, ValueError):
                    pass  # keep as read; concat_tables will unify or complain
        else:
            col = pa.chunked_array([pa.nulls(table.num_rows, f.type or pa.null())])
        arrays.append(col)
        names.append(f.name)
    for name in table.column_names:
        if name not in names:
            arrays.append(table[name])
            names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


# Files at least this big are decoded with Arrow's thread pool; for the
# usual small data file the pool's hand-offs cost more than they save.
_THREADED_READ_BYTES = 1 << 20


def _read_parquet(data: bytes) -> pa.Table:
    """The rows of one parquet file (as pq.read_table would give them).

    pq.read_table goes through the dataset layer, which costs several times
    what decoding a small file does; ParquetFile is what read_table itself
    falls back to for one file, and for a small file its own setup is a
    fifth of the cost: the reader it wraps decodes it with ParquetFile's
    defaults. Should that fail, read_table decides (so an unreadable file
    is reported in read_table's words)."""
    try:
        big = len(data) >= _THREADED_READ_BYTES
        if _ParquetReader is not None and not big:
            reader = _ParquetReader()
            reader.open(pa.BufferReader(data), pre_buffer=False, arrow_extensions_enabled=True)
            return reader.read_all(use_threads=False)
        return pq.ParquetFile(pa.BufferReader(data), pre_buffer=big).read(use_threads=big)
    except Exception:  # noqa: BLE001 - the reference reader decides, and raises its own error
        return pq.read_table(pa.BufferReader(data))
