"""delta-rs through the `deltalake` Python package: a non-Spark Delta engine."""

from __future__ import annotations

from typing import Any

from harness.engines.base import Capabilities, ClientConfig, Engine, EngineClient, Node, OpResult, TableSpec
from harness.engines.errors import Classified, classify_deltars
from harness.storage import Storage

DELTARS_CAPABILITIES = Capabilities(
    ops=frozenset({"create-table", "append", "read", "update", "delete"}),
    read_version_known=True,
    commit_version_known=True,
    row_level_concurrency=False,
    # delta-rs applies Serializable checks unless told otherwise; see README.
    default_isolation="Serializable",
    notes="every conflict is CommitFailedError, the kind only in its message; "
    "appends are not marked isBlindAppend",
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


def arrow_schema(table: TableSpec) -> Any:
    import pyarrow as pa

    return pa.schema([(c.name, getattr(pa, _ARROW_TYPES[c.type.upper()])()) for c in table.columns])


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

    def append(self, rows: list[tuple], table: TableSpec, via: str, op_id: str) -> OpResult:
        import pyarrow as pa
        from deltalake import CommitProperties, write_deltalake

        schema = arrow_schema(table)
        data = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
        dt = self._table()
        write_deltalake(dt, data, mode="append", commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        # The table object now sits at the snapshot its own commit produced.
        return OpResult(version=dt.version())

    def update(self, where: str, assignments: dict[str, str], op_id: str, via: str = "sql") -> OpResult:
        from deltalake import CommitProperties

        dt = self._table()
        metrics = dt.update(predicate=where, updates=assignments,
                            commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        return OpResult(value={"updated": (metrics or {}).get("num_updated_rows")}, version=dt.version())

    def delete(self, where: str, op_id: str, via: str = "sql") -> OpResult:
        from deltalake import CommitProperties

        dt = self._table()
        metrics = dt.delete(predicate=where, commit_properties=CommitProperties(custom_metadata={OP_ID_KEY: op_id}))
        return OpResult(value={"deleted": (metrics or {}).get("num_deleted_rows")}, version=dt.version())

    def read(self, columns: list[str], via: str = "dataframe") -> OpResult:
        from deltalake import QueryBuilder

        dt = self._table()
        version = dt.version()
        # QueryBuilder, not to_pyarrow_table(): the latter intermittently
        # aborts the interpreter at exit (seen with deltalake 1.6.6).
        t = QueryBuilder().register("t", dt).execute(f"SELECT {', '.join(columns)} FROM t").read_all()
        return OpResult(value=list(zip(*(t.column(c).to_pylist() for c in columns))), version=version)

    def classify(self, exc: BaseException) -> Classified:
        return classify_deltars(exc)


class DeltaRsEngine(Engine):
    name = "delta-rs"
    capabilities = DELTARS_CAPABILITIES

    def client_config(self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float) -> ClientConfig:
        return ClientConfig(
            engine=self.name,
            node=node.name,
            process=process,
            table_uri=table_uri,
            storage_options=storage.deltars_options(str(process) if isinstance(process, int) else process),
            timeout=timeout,
        )

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        return {"deltalake": version("deltalake")}
