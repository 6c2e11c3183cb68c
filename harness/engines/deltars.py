"""delta-rs through the `deltalake` Python package: a non-Spark Delta engine."""

from __future__ import annotations

from typing import Any

from harness.core.storage import Storage
from harness.core.table import Column, TableSpec
from harness.engines.base import Capabilities, ClientConfig, Engine, EngineClient, Node, OpResult
from harness.engines.errors import Classified, classify_deltars

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


def _as_target_types(source: Any, dt: Any) -> Any:
    """Source columns cast to the target's types (a NULL-only column, or
    DataFusion's string views, would otherwise not merge)."""
    import pyarrow as pa

    target = pa.schema(dt.schema().to_arrow())
    fields = [target.field(n) if n in target.names else source.schema.field(n) for n in source.column_names]
    return source.cast(pa.schema([pa.field(f.name, f.type) for f in fields]))


def _with_added_columns(data: Any, dt: Any) -> Any:
    """`data` with NULLs for columns the table gained since (ALTER TABLE ADD
    COLUMNS): delta-rs rejects an append that lacks a column ("number of
    fields does not match"), where Spark's INSERT fills in NULL."""
    import pyarrow as pa

    target = pa.schema(dt.schema().to_arrow())
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

    def create_table(self, table: TableSpec) -> OpResult:
        from deltalake import CommitProperties, DeltaTable

        self.dt = DeltaTable.create(
            self.config.table_uri,
            arrow_schema(table),
            mode="error",
            partition_by=list(table.partition_by) or None,
            configuration=dict(table.properties) or None,
            storage_options=self.options or None,
            commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: "setup"}),
        )
        return OpResult(version=self.dt.version())

    def create_table_at(self, uri: str, table: TableSpec, op_id: str) -> OpResult:
        from deltalake import CommitProperties, DeltaTable

        dt = DeltaTable.create(
            uri,
            arrow_schema(table),
            mode="error",
            partition_by=list(table.partition_by) or None,
            configuration=dict(table.properties) or None,
            storage_options=self.options or None,
            commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}),
        )
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
        from deltalake import CommitProperties, write_deltalake

        schema = arrow_schema(table)
        data = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        dt = self._table()
        data = _with_added_columns(data, dt)
        write_deltalake(dt, data, mode="append", commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        # The table object now sits at the snapshot its own commit produced.
        return OpResult(version=dt.version())

    def update(self, where: str, assignments: dict[str, str], op_id: str, via: str = "sql") -> OpResult:
        from deltalake import CommitProperties

        dt = self._table()
        metrics = dt.update(
            predicate=where, updates=assignments, commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id})
        )
        return OpResult(value={"updated": (metrics or {}).get("num_updated_rows")}, version=dt.version())

    def delete(self, where: str | None, op_id: str, via: str = "sql") -> OpResult:
        from deltalake import CommitProperties

        dt = self._table()
        metrics = dt.delete(predicate=where, commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        return OpResult(value={"deleted": (metrics or {}).get("num_deleted_rows")}, version=dt.version())

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
            version=dt.version(),
        )

    def insert_select(self, columns: list[str], select_sql: str, match_on: list[str], op_id: str) -> OpResult:
        import pyarrow as pa
        from deltalake import QueryBuilder

        # The Python API has no INSERT ... SELECT. The SELECT runs on this
        # table object's snapshot and the MERGE commits from that same
        # snapshot, so the engine's conflict check covers what the SELECT read.
        dt = self._table()
        read_version = dt.version()
        rows = QueryBuilder().register("dj_table", dt).execute(select_sql.format(table="dj_table")).read_all()
        source = _as_target_types(pa.table(rows).select(columns), dt)
        on = " AND ".join(f"t.{c} = s.{c}" for c in match_on)
        metrics = self._merge(dt, source, on, None, {c: f"s.{c}" for c in columns}, op_id)
        return OpResult(
            value={
                "inserted": metrics.get("num_target_rows_inserted"),
                "read_version": read_version,
                "rows": source.to_pylist(),
            },
            version=dt.version(),
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
        from deltalake import CommitProperties

        merger = dt.merge(
            source=source,
            predicate=on,
            source_alias="s",
            target_alias="t",
            commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}),
        )
        if when_matched_set:
            merger = merger.when_matched_update(when_matched_set)
        if insert_values:
            merger = merger.when_not_matched_insert(insert_values)
        return merger.execute() or {}

    def optimize(self, op_id: str, zorder_by: list[str] | None = None) -> OpResult:
        from deltalake import CommitProperties

        dt = self._table()
        props = CommitProperties(custom_metadata={OP_ID_KEY: op_id})
        if zorder_by:
            metrics = dt.optimize.z_order(list(zorder_by), commit_properties=props)
        else:
            metrics = dt.optimize.compact(commit_properties=props)
        metrics = metrics or {}
        return OpResult(
            value={"files_added": metrics.get("numFilesAdded"), "files_removed": metrics.get("numFilesRemoved")},
            version=dt.version(),
        )

    def set_properties(self, props: dict[str, str], op_id: str) -> OpResult:
        # delta-rs 1.6 accepts only the delta.* keys it knows ("Error parsing
        # property" otherwise): "set-properties" is not in its capabilities.
        from deltalake import CommitProperties

        dt = self._table()
        dt.alter.set_table_properties(
            dict(props), commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id})
        )
        return OpResult(version=dt.version())

    def add_columns(self, columns: list[Column], op_id: str) -> OpResult:
        from deltalake import CommitProperties
        from deltalake.schema import Field, PrimitiveType

        dt = self._table()
        fields = [Field(c.name, PrimitiveType(_DELTA_TYPES[c.type.upper()]), nullable=True) for c in columns]
        dt.alter.add_columns(fields, commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        return OpResult(version=dt.version())

    def append_idempotent(
        self, rows: list[tuple], table: TableSpec, app_id: str, txn_version: int, op_id: str
    ) -> OpResult:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        dt = self._table()
        # delta-rs records the txn action but skips nothing itself: the
        # writer checks the app's committed version (the documented protocol);
        # a concurrent commit of the same app_id is the engine's E5 conflict.
        done = dt.transaction_version(app_id)
        if done is not None and done >= txn_version:
            return OpResult(value={"skipped": True, "committed_txn_version": done}, version=dt.version())
        schema = arrow_schema(table)
        data = _with_added_columns(
            pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema), dt
        )
        write_deltalake(
            dt,
            data,
            mode="append",
            commit_properties=CommitProperties(
                custom_metadata={OP_ID_KEY: op_id}, app_transactions=[Transaction(app_id, int(txn_version))]
            ),
        )
        return OpResult(value={"skipped": False}, version=dt.version())

    def read(self, columns: list[str], via: str = "dataframe") -> OpResult:
        from deltalake import QueryBuilder

        dt = self._table()
        version = dt.version()
        # QueryBuilder, not to_pyarrow_table(): the latter intermittently
        # aborts the interpreter at exit (seen with deltalake 1.6.6).
        t = QueryBuilder().register("t", dt).execute(f"SELECT {', '.join(columns)} FROM t").read_all()
        return OpResult(value=list(zip(*(t.column(c).to_pylist() for c in columns), strict=True)), version=version)

    def classify(self, exc: BaseException) -> Classified:
        return classify_deltars(exc)


class DeltaRsEngine(Engine):
    name = "delta-rs"
    capabilities = DELTARS_CAPABILITIES

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
        )

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"deltalake": version("deltalake")}
