"""delta-rs through the `deltalake` Python package: a non-Spark Delta engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import Any

from harness.core.storage import Storage
from harness.core.table import Column, TableSpec
from harness.engines.base import (
    Capabilities,
    ClientConfig,
    Engine,
    EngineClient,
    Node,
    OpResult,
    multi_table_sql,
    split_by_table,
)
from harness.engines.deltars_api import DeltaRsApi
from harness.engines.envs import ReleaseEnv, ensure
from harness.engines.errors import Classified, classify_deltars
from harness.engines.releases import EngineRelease, env_request

DELTARS_CAPABILITIES = Capabilities(
    ops=frozenset(
        {
            "create-table",
            "append",
            "read",
            "update",
            "delete",
            "optimize",
            "merge",
            "insert_select",
            "add-columns",
            "append-idempotent",
            "create-table-at",
            "overwrite",
            "read-as-of",
            "read-as-of-time",
            "restore",
            "vacuum",
            "checkpoint",
            "cleanup",
            "read-tables",
        }
    ),
    read_version_known=True,
    commit_version_known=True,
    row_level_concurrency=False,
    # delta-rs applies Serializable checks unless told otherwise; see README.
    default_isolation="Serializable",
    notes="every conflict is CommitFailedError, the kind only in its message; "
    "appends are not marked isBlindAppend; ALTER TABLE SET TBLPROPERTIES takes only known delta.* keys",
)

# The op id rides in commitInfo, so the log names the op of every commit.
OP_ID_KEY = "dj.op"


def capabilities_of(api: DeltaRsApi) -> Capabilities:
    """The pinned release's capabilities, narrowed to what `api`'s release has."""
    exact = api.has("exact-commit-version")
    notes = DELTARS_CAPABILITIES.notes
    if not api.has("custom-metadata"):
        notes += "; this release writes no custom commit metadata: the log does not name each commit's op"
    if not exact:
        notes += "; before 1.0 a write's table object moves to the newest version, not its own: no commit version"
    return dataclasses.replace(
        DELTARS_CAPABILITIES, ops=DELTARS_CAPABILITIES.ops & api.ops, commit_version_known=exact, notes=notes
    )


def installed_release() -> str:
    from importlib.metadata import version

    return version("deltalake")


_ARROW_TYPES = {
    "BIGINT": "int64",
    "INT": "int32",
    "STRING": "string",
    "DOUBLE": "float64",
    "BOOLEAN": "bool_",
    "DATE": "date32",
}
_DELTA_TYPES = {
    "BIGINT": "long",
    "INT": "integer",
    "STRING": "string",
    "DOUBLE": "double",
    "BOOLEAN": "boolean",
    "DATE": "date",
}


def arrow_schema(table: TableSpec) -> Any:
    import pyarrow as pa

    return pa.schema([(c.name, getattr(pa, _ARROW_TYPES[c.type.upper()])()) for c in table.columns])


def query(dt: Any, name: str, sql: str) -> Any:
    """`sql` over the table object's snapshot, registered as `name`, as a
    pyarrow table (QueryBuilder, from 0.22; what it returns changed twice)."""
    return query_tables({name: dt}, sql)


def query_tables(tables: dict[str, Any], sql: str) -> Any:
    """`sql` over table objects' snapshots, each registered under its name."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    qb = QueryBuilder()
    for name, one in tables.items():
        qb = qb.register(name, one)
    dt = next(iter(tables.values()))
    res = qb.execute(sql)
    if hasattr(res, "read_all"):  # 1.x: a RecordBatchReader
        return res.read_all()
    if hasattr(res, "fetchall"):  # 0.23-0.25: a QueryResult
        res = res.fetchall()
    if not res:  # no batch, so no schema: the table's, empty (a read of an empty table)
        return table_arrow_schema(dt).empty_table()
    return pa.Table.from_batches(res)  # 0.22: a list of batches


def table_arrow_schema(dt: Any) -> Any:
    """The table's schema as a pyarrow schema (to_pyarrow() before 1.0)."""
    import pyarrow as pa

    schema = dt.schema()
    return pa.schema(schema.to_arrow() if hasattr(schema, "to_arrow") else schema.to_pyarrow())


def _as_target_types(source: Any, dt: Any) -> Any:
    """Source columns cast to the target's types (a NULL-only column, or
    DataFusion's string views, would otherwise not merge)."""
    import pyarrow as pa

    target = table_arrow_schema(dt)
    fields = [target.field(n) if n in target.names else source.schema.field(n) for n in source.column_names]
    return source.cast(pa.schema([pa.field(f.name, f.type) for f in fields]))


def _with_added_columns(data: Any, dt: Any) -> Any:
    """`data` with NULLs for columns the table gained since (ALTER TABLE ADD
    COLUMNS): delta-rs rejects an append that lacks a column ("number of
    fields does not match"), where Spark's INSERT fills in NULL."""
    import pyarrow as pa

    target = table_arrow_schema(dt)
    if all(n in data.column_names for n in target.names):
        return data
    cols = [
        data.column(n) if n in data.column_names else pa.nulls(len(data), f.type)
        for n, f in zip(target.names, target, strict=True)
    ]
    return pa.Table.from_arrays(cols, schema=pa.schema([pa.field(f.name, f.type) for f in target]))


class DeltaRsClient(EngineClient):
    name = "delta-rs"
    capabilities = DELTARS_CAPABILITIES

    def __init__(self, config: ClientConfig):
        super().__init__(config)
        # The release installed where this client runs: the harness's own
        # environment, or the release's own (harness.engines.envs).
        self.api = DeltaRsApi.of(installed_release())
        self.capabilities = capabilities_of(self.api)
        self.dt: Any = None
        self.options = {**config.storage_options, "timeout": f"{int(config.timeout)}s", "connect_timeout": "5s"}
        if not config.storage_options:
            self.options = {}  # local paths take no object-store options

    def open(self) -> None:
        import deltalake  # noqa: F401  (fail fast if the package is missing)

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if self.dt is None:
            self.dt = DeltaTable(self.config.table_uri, storage_options=self.options or None)
        else:
            self.dt.update_incremental()
        self.last_read_version = self.dt.version()  # the snapshot the op's commit reads
        return self.dt

    def _meta(self, op_id: str) -> dict[str, Any]:
        return self.api.metadata_kwargs(op_id, OP_ID_KEY)

    def _committed(self, dt: Any) -> int | None:
        """The version the op's commit made, where the release tells it."""
        return dt.version() if self.api.has("exact-commit-version") else None

    def _create(self, uri: str, table: TableSpec, op_id: str) -> Any:
        from deltalake import DeltaTable

        kwargs: dict[str, Any] = {
            "partition_by": list(table.partition_by) or None,
            "configuration": dict(table.properties) or None,
            "storage_options": self.options or None,
        }
        if not self.api.has("create"):
            # Before DeltaTable.create, a table was made by writing no rows.
            import pyarrow as pa
            from deltalake import write_deltalake

            schema = arrow_schema(table)
            write_deltalake(uri, pa.Table.from_pylist([], schema=schema), mode="error", **kwargs)
            return DeltaTable(uri, storage_options=self.options or None)
        if self.api.has("create-commit-properties"):
            kwargs.update(self._meta(op_id))
        elif self.api.has("custom-metadata"):
            kwargs["custom_metadata"] = {OP_ID_KEY: op_id}
        return DeltaTable.create(uri, arrow_schema(table), mode="error", **kwargs)

    def create_table(self, table: TableSpec) -> OpResult:
        self.dt = self._create(self.config.table_uri, table, "setup")
        return OpResult(version=self.dt.version())

    def create_table_at(self, uri: str, table: TableSpec, op_id: str) -> OpResult:
        dt = self._create(uri, table, op_id)
        # What delta-rs reports; after a create race it can be a newer version
        # than the one this op committed (the log's dj.op tells which).
        return OpResult(version=dt.version())

    def at(self, table_uri: str) -> DeltaRsClient:
        other = super().at(table_uri)
        assert isinstance(other, DeltaRsClient)
        other.dt = None  # the cached table object is the old table's
        return other

    def append(self, rows: list[tuple], table: TableSpec, via: str, op_id: str) -> OpResult:
        import pyarrow as pa

        schema = arrow_schema(table)
        data = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        dt = self._table()
        data = _with_added_columns(data, dt)
        self._write(dt, data, "append", self._meta(op_id))
        # From 1.0 the table object sits at the snapshot its own commit produced.
        return OpResult(version=self._committed(dt))

    def overwrite(self, columns: list[str], transform: Any, table: TableSpec, op_id: str) -> OpResult:
        import pyarrow as pa

        # One transaction: the rows are read from this table object's
        # snapshot and the overwrite commits from that same snapshot, so the
        # engine's conflict check covers what the read saw (every file).
        dt = self._table()
        read_version = dt.version()
        rows = self._rows(dt, columns)
        new_rows, value = transform(rows)
        schema = arrow_schema(table)
        data = _with_added_columns(
            pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in new_rows], schema=schema), dt
        )
        self._write(dt, data, "overwrite", self._meta(op_id))
        return OpResult(value={**value, "read_version": read_version}, version=self._committed(dt))

    def _write(self, dt: Any, data: Any, mode: str, kwargs: dict[str, Any]) -> None:
        """write_deltalake through `dt`, committed from dt's snapshot on every
        release: 0.9 to 1.0 would first move dt to the newest version, which
        makes a read through dt and the write two transactions; held at its
        snapshot, the engine's conflict check runs against what was read, as
        from 1.1 on."""
        from deltalake import write_deltalake

        if self.api.write_refreshes:
            dt.update_incremental = lambda: None
        try:
            write_deltalake(dt, data, mode=mode, **kwargs)
        finally:
            dt.__dict__.pop("update_incremental", None)

    def update(self, where: str, assignments: dict[str, str], op_id: str, via: str = "sql") -> OpResult:
        dt = self._table()
        metrics = dt.update(predicate=where, updates=assignments, **self._meta(op_id))
        return OpResult(value={"updated": (metrics or {}).get("num_updated_rows")}, version=self._committed(dt))

    def delete(self, where: str | None, op_id: str, via: str = "sql") -> OpResult:
        dt = self._table()
        metrics = dt.delete(predicate=where, **self._meta(op_id))
        return OpResult(value={"deleted": (metrics or {}).get("num_deleted_rows")}, version=self._committed(dt))

    def merge(
        self,
        source_rows: list[tuple],
        source_columns: list[str],
        on: str,
        when_matched_set: dict[str, str] | None,
        insert_values: dict[str, str] | None,
        op_id: str,
    ) -> OpResult:
        import pyarrow as pa

        dt = self._table()
        source = _as_target_types(
            pa.Table.from_pylist([dict(zip(source_columns, r, strict=True)) for r in source_rows]), dt
        )
        metrics = self._merge(dt, source, on, when_matched_set, insert_values, op_id)
        return OpResult(
            value={
                "inserted": metrics.get("num_target_rows_inserted"),
                "updated": metrics.get("num_target_rows_updated"),
            },
            version=self._committed(dt),
        )

    def insert_select(self, columns: list[str], select_sql: str, match_on: list[str], op_id: str) -> OpResult:
        import pyarrow as pa

        # The Python API has no INSERT ... SELECT. The SELECT runs on this
        # table object's snapshot and the MERGE commits from that same
        # snapshot, so the engine's conflict check covers what the SELECT read.
        dt = self._table()
        read_version = dt.version()
        rows = query(dt, "dj_table", select_sql.format(table="dj_table"))
        source = _as_target_types(pa.table(rows).select(columns), dt)
        on = " AND ".join(f"t.{c} = s.{c}" for c in match_on)
        metrics = self._merge(dt, source, on, None, {c: f"s.{c}" for c in columns}, op_id)
        return OpResult(
            value={
                "inserted": metrics.get("num_target_rows_inserted"),
                "read_version": read_version,
                "rows": source.to_pylist(),
            },
            version=self._committed(dt),
        )

    def _merge(
        self,
        dt: Any,
        source: Any,
        on: str,
        when_matched_set: dict[str, str] | None,
        insert_values: dict[str, str] | None,
        op_id: str,
    ) -> dict[str, Any]:
        merger = dt.merge(source=source, predicate=on, source_alias="s", target_alias="t", **self._meta(op_id))
        if when_matched_set:
            merger = merger.when_matched_update(when_matched_set)
        if insert_values:
            merger = merger.when_not_matched_insert(insert_values)
        return merger.execute() or {}

    def optimize(self, op_id: str, zorder_by: list[str] | None = None) -> OpResult:
        dt = self._table()
        if not self.api.has("optimize"):
            if zorder_by:
                raise NotImplementedError("deltalake 0.9 has no z-order (from 0.10)")
            metrics = dt.optimize()  # 0.9: a method; an object with compact() from 0.10
        elif zorder_by:
            metrics = dt.optimize.z_order(list(zorder_by), **self._meta(op_id))
        else:
            metrics = dt.optimize.compact(**self._meta(op_id))
        metrics = metrics or {}
        return OpResult(
            value={"files_added": metrics.get("numFilesAdded"), "files_removed": metrics.get("numFilesRemoved")},
            version=self._committed(dt),
        )

    def set_properties(self, props: dict[str, str], op_id: str) -> OpResult:
        # delta-rs 1.6 accepts only the delta.* keys it knows ("Error parsing
        # property" otherwise): "set-properties" is not in its capabilities.
        dt = self._table()
        dt.alter.set_table_properties(dict(props), **self._meta(op_id))
        return OpResult(version=self._committed(dt))

    def add_columns(self, columns: list[Column], op_id: str) -> OpResult:
        from deltalake.schema import Field, PrimitiveType

        dt = self._table()
        fields = [Field(c.name, PrimitiveType(_DELTA_TYPES[c.type.upper()]), nullable=True) for c in columns]
        dt.alter.add_columns(fields, **self._meta(op_id))
        return OpResult(version=self._committed(dt))

    def append_idempotent(
        self, rows: list[tuple], table: TableSpec, app_id: str, txn_version: int, op_id: str
    ) -> OpResult:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction

        dt = self._table()
        # delta-rs records the txn action but skips nothing itself: the
        # writer checks the app's committed version (the documented protocol);
        # a concurrent commit of the same app_id is the engine's E5 conflict.
        if self.api.has("transaction-version"):
            done = dt.transaction_version(app_id)
        else:
            txn = dt.transaction_versions().get(app_id)
            done = getattr(txn, "version", None) if txn is not None else None
        if done is not None and done >= txn_version:
            return OpResult(value={"skipped": True, "committed_txn_version": done}, version=self._committed(dt))
        schema = arrow_schema(table)
        data = _with_added_columns(
            pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema), dt
        )
        props = CommitProperties(
            custom_metadata={OP_ID_KEY: op_id}, app_transactions=[Transaction(app_id, int(txn_version))]
        )
        self._write(dt, data, "append", {"commit_properties": props})
        return OpResult(value={"skipped": False}, version=self._committed(dt))

    def latest_version(self) -> int:
        return int(self._table().version())

    def read_as_of(self, columns: list[str], version: int, via: str = "dataframe") -> OpResult:
        from deltalake import DeltaTable

        # A table object of its own: the client's stays at the newest version.
        dt = DeltaTable(self.config.table_uri, storage_options=self.options or None)
        dt.load_as_version(int(version))
        return OpResult(value=self._rows(dt, columns))

    def read_as_of_time(self, columns: list[str], timestamp_ms: int, via: str = "dataframe") -> OpResult:
        from datetime import datetime

        from deltalake import DeltaTable

        dt = DeltaTable(self.config.table_uri, storage_options=self.options or None)
        dt.load_as_version(datetime.fromtimestamp(int(timestamp_ms) / 1000, tz=UTC))
        return OpResult(value=self._rows(dt, columns), version=int(dt.version()))

    def restore(self, version: int, op_id: str) -> OpResult:
        dt = self._table()
        metrics = dt.restore(int(version), **self._meta(op_id)) or {}
        return OpResult(
            value={"restored_files": metrics.get("numRestoredFile"), "removed_files": metrics.get("numRemovedFile")},
            version=self._committed(dt),
        )

    def vacuum(self, retention_hours: int, full: bool, op_id: str) -> OpResult:
        dt = self._table()
        deleted = dt.vacuum(
            retention_hours=int(retention_hours),
            dry_run=False,
            enforce_retention_duration=False,
            full=full,
            **self._meta(op_id),
        )
        return OpResult(value={"deleted": sorted(deleted)})

    def checkpoint(self, op_id: str) -> OpResult:
        dt = self._table()
        dt.create_checkpoint()
        return OpResult(value={"checkpoint_version": dt.version()})

    def cleanup_log(self, op_id: str) -> OpResult:
        dt = self._table()
        dt.cleanup_metadata()
        return OpResult(value={"version": dt.version()})

    def _rows(self, dt: Any, columns: list[str]) -> list[tuple]:
        if self.api.has("query-builder"):
            # QueryBuilder, not to_pyarrow_table(): the latter intermittently
            # aborts the interpreter at exit (seen with deltalake 1.6.6).
            t = query(dt, "t", f"SELECT {', '.join(columns)} FROM t")
        else:
            t = dt.to_pyarrow_table(columns=list(columns))
        return list(zip(*(t.column(c).to_pylist() for c in columns), strict=True))

    def read_tables(self, uris: list[str], columns: list[str]) -> OpResult:
        from deltalake import DeltaTable

        # Each table object loads its latest version as it is opened (C2: no
        # snapshot across tables); the query reads those snapshots.
        tables = {f"t{i}": DeltaTable(uri, storage_options=self.options or None) for i, uri in enumerate(uris)}
        versions = [dt.version() for dt in tables.values()]
        t = query_tables(tables, multi_table_sql(list(tables), columns))
        return OpResult(value={"rows": split_by_table(t, len(uris), columns), "versions": versions})

    def read(self, columns: list[str], via: str = "dataframe") -> OpResult:
        dt = self._table()
        version = dt.version()
        return OpResult(value=self._rows(dt, columns), version=version)

    def classify(self, exc: BaseException) -> Classified:
        return classify_deltars(exc)


class DeltaRsEngine(Engine):
    name = "delta-rs"
    capabilities = DELTARS_CAPABILITIES
    client_modules = ("deltalake", "pyarrow")

    def __init__(self, release: str | None = None, progress: Callable[[str], None] | None = None):
        """`release`: a deltalake release other than the pinned one, run in an
        environment of its own (built on first use, harness.engines.envs)."""
        self.release = release
        self.progress = progress
        self.env: ReleaseEnv | None = None
        if release is not None:
            self.capabilities = capabilities_of(DeltaRsApi.of(release))

    def prepare(self) -> None:
        """Build (or find) the release's environment: before any node starts."""
        if self.release is not None and self.env is None:
            self.env = ensure(env_request(EngineRelease(self.name, self.release)), self.progress)

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        self.prepare()
        return super().start_nodes(n, storage, logs_dir, timeout, first)

    def client_config(
        self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float
    ) -> ClientConfig:
        return ClientConfig(
            engine=self.name,
            node=node.name,
            process=process,
            table_uri=table_uri,
            # The node rides in the access key id (dj-<node>-<process>), so the
            # S3 fault proxy can target a node's clients.
            storage_options=storage.deltars_options(str(process) if isinstance(process, int) else process, node.name),
            timeout=timeout,
            python=self.env.python if self.env is not None else None,
        )

    def versions(self) -> dict[str, str]:
        if self.env is not None:
            return {k: v for k, v in self.env.resolved.items() if k in ("deltalake", "pyarrow", "numpy")}
        return {"deltalake": self.release or installed_release()}
