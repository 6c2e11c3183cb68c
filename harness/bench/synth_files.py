"""The bytes of a synthetic run's table: its schema, its Parquet data files,
its checkpoint and its JSON commits, and the error a simulated conflict
records."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from harness.bench.simulate import E1, E1_CAVEAT, E2

SCHEMA = pa.schema([("k", pa.int64()), ("writer", pa.string()), ("prev_writer", pa.string())])


SCHEMA_STRING = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "k", "type": "long", "nullable": True, "metadata": {}},
            {"name": "writer", "type": "string", "nullable": True, "metadata": {}},
            {"name": "prev_writer", "type": "string", "nullable": True, "metadata": {}},
        ],
    },
    separators=(",", ":"),
)


PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}


def metadata(table_id: str, isolation: str, created_ms: int) -> dict:
    """The simulated table's metaData action."""
    return {
        "id": table_id,
        "name": None,
        "description": None,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": SCHEMA_STRING,
        "partitionColumns": [],
        "configuration": {"delta.isolationLevel": isolation},
        "createdTime": created_ms,
    }


ERRORS = {
    E1: ("ConcurrentAppendException", "E1"),
    E1_CAVEAT: ("ConcurrentAppendException", "E1"),
    E2: ("ConcurrentDeleteReadException", "E2"),
}


def _parquet_bytes(rows: list[tuple[int, str, str | None]]) -> bytes:
    ks, ws, ps = zip(*rows, strict=True) if rows else ((), (), ())
    table = pa.Table.from_arrays(
        [pa.array(ks, pa.int64()), pa.array(ws, pa.string()), pa.array(ps, pa.string())], schema=SCHEMA
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue().to_pybytes()


def _checkpoint_table(live: dict[str, dict], meta: dict, protocol: dict) -> pa.Table:
    """A classic Delta checkpoint: one action per row in struct columns
    txn / add / remove / metaData / protocol (only live adds; no tombstones)."""
    n = 2 + len(live)
    adds = list(live.values())
    str_map = pa.map_(pa.string(), pa.string())
    add_type = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", str_map),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats", pa.string()),
        ]
    )
    mask_add = pa.array([True, True] + [False] * len(adds))
    pad = [None, None]
    add = pa.StructArray.from_arrays(
        [
            pa.array(pad + [a["path"] for a in adds], pa.string()),
            pa.array(pad + [[] for _ in adds], str_map),
            pa.array(pad + [a["size"] for a in adds], pa.int64()),
            pa.array(pad + [a["modificationTime"] for a in adds], pa.int64()),
            pa.array(pad + [False] * len(adds), pa.bool_()),  # checkpoints record dataChange=false
            pa.array(pad + [a["stats"] for a in adds], pa.string()),
        ],
        fields=list(add_type),
        mask=mask_add,
    )
    remove_type = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())])
    txn_type = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
    fmt_type = pa.struct([("provider", pa.string()), ("options", str_map)])
    meta_type = pa.struct(
        [
            ("id", pa.string()),
            ("name", pa.string()),
            ("description", pa.string()),
            ("format", fmt_type),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("configuration", str_map),
            ("createdTime", pa.int64()),
        ]
    )
    proto_type = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
    rest = [None] * (n - 1)
    meta_row = {
        "id": meta["id"],
        "name": meta.get("name"),
        "description": meta.get("description"),
        "format": {"provider": meta["format"]["provider"], "options": list(meta["format"]["options"].items())},
        "schemaString": meta["schemaString"],
        "partitionColumns": meta["partitionColumns"],
        "configuration": list(meta["configuration"].items()),
        "createdTime": meta["createdTime"],
    }
    return pa.table(
        {
            "txn": pa.nulls(n, txn_type),
            "add": add,
            "remove": pa.nulls(n, remove_type),
            "metaData": pa.array([meta_row] + rest, meta_type),
            "protocol": pa.array([None, protocol] + rest[:-1], proto_type),
        }
    )


def _jsonl(actions: list[dict]) -> bytes:
    return ("\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n").encode()


def _err(reason: str | None) -> dict:
    cls, claim = ERRORS.get(reason or "", ("commit-conflict-unclassified", None))
    return {"class": cls, "claim": claim, "raw": f"simulated conflict ({reason}): a concurrent commit won"}
