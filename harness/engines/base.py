"""The engine seam: what every system under test offers the harness.

Two halves, so the controller never loads an engine library:
- :class:`Engine` lives in the controller: starts the engine's nodes (e.g.
  Sail servers) and tells each client worker how to connect.
- :class:`EngineClient` lives in a worker process: opens a session and
  executes primitive data operations; it classifies every error it raises.
Engines never import a checker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.capacity import NODE_NAME, Load
from harness.core.storage import Storage
from harness.core.table import Column, TableSpec
from harness.engines.errors import Classified

if TYPE_CHECKING:
    from harness.core.procs import ManagedProcess


@dataclass(frozen=True)
class Capabilities:
    """What an engine can do and report: the harness judges it by these
    (an op it lacks is `unsupported`, never a pass)."""

    ops: frozenset[str]  # primitive ops the client implements
    read_version_known: bool  # a read reports which version it saw
    commit_version_known: bool  # a write reports which version it committed
    row_level_concurrency: bool  # spec R-table applies
    default_isolation: str  # level assumed when the table carries none (spec C13)
    notes: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "ops": sorted(self.ops),
            "read_version_known": self.read_version_known,
            "commit_version_known": self.commit_version_known,
            "row_level_concurrency": self.row_level_concurrency,
            "default_isolation": self.default_isolation,
            "notes": self.notes,
        }


@dataclass
class Node:
    """A place clients connect to: a Sail server, a JVM, or just a label."""

    name: str
    url: str | None = None  # e.g. sc://127.0.0.1:PORT
    pid: int | None = None
    log: str | None = None
    engine: str | None = None  # set by the runner (runs may mix engines)


@dataclass
class ClientConfig:
    """Everything a worker process needs to open its client (crosses a pipe)."""

    engine: str
    node: str
    process: int | str
    table_uri: str
    url: str | None = None
    storage_options: dict[str, str] = field(default_factory=dict)
    timeout: float = 30.0  # per-call timeout the client passes to its engine
    # The interpreter of the engine release's own environment
    # (harness.engines.envs); None: the harness's own.
    python: str | None = None

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class OpResult:
    """What a primitive returns on success."""

    __slots__ = ("value", "version")

    def __init__(self, value: Any = None, version: int | None = None):
        self.value = value
        self.version = version


class EngineClient(ABC):
    """One client session of an engine, in a worker process: the
    engine-neutral primitives every workload's ops are written in."""

    name: str
    capabilities: Capabilities

    def __init__(self, config: ClientConfig):
        self.config = config

    @abstractmethod
    def open(self) -> None:
        """Start the session (connect to the node, load the table)."""

    def close(self) -> None:
        """End the session; by default there is nothing to end."""
        return None

    @abstractmethod
    def create_table(self, table: TableSpec) -> OpResult:
        """Create the run's table (version 0)."""

    @abstractmethod
    def append(self, rows: list[tuple], table: TableSpec, via: str, op_id: str) -> OpResult:
        """Blind append of `rows` (tuples in column order, the identity
        column left out: `TableSpec.written_columns`), spec C9."""

    def update(self, where: str, assignments: dict[str, str], op_id: str, via: str = "sql") -> OpResult:
        """UPDATE ... SET col = <SQL expression> WHERE <SQL predicate>; the
        expressions see the row's old values (so `prev_writer = writer` records
        which version the update replaced). value: rows updated, if known."""
        raise NotImplementedError(f"{self.name} has no update")

    def delete(self, where: str | None, op_id: str, via: str = "sql") -> OpResult:
        """DELETE FROM t WHERE <SQL predicate>, or every row when `where` is
        None. value: rows deleted, if known."""
        raise NotImplementedError(f"{self.name} has no delete")

    def merge(
        self,
        source_rows: list[tuple],
        source_columns: list[str],
        on: str,
        when_matched_set: dict[str, str] | None,
        insert_values: dict[str, str] | None,
        op_id: str,
    ) -> OpResult:
        """MERGE INTO t USING <source_rows> s ON <on> [WHEN MATCHED THEN UPDATE
        SET col = <expr>] [WHEN NOT MATCHED THEN INSERT (col) VALUES (<expr>)].
        Expressions name the source as `s` and the target as `t` (so
        `prev_writer = t.writer` records the version a match replaced).
        value: the engine's row counts, where it reports them."""
        raise NotImplementedError(f"{self.name} has no merge")

    def insert_select(self, columns: list[str], select_sql: str, match_on: list[str], op_id: str) -> OpResult:
        """INSERT INTO t (columns) <select_sql> as one transaction whose
        SELECT reads the target table, named `{table}` in `select_sql` (spec
        M-table: such an INSERT is no blind append and behaves like MERGE).
        `match_on`: columns that identify a new row, for engines with no
        INSERT ... SELECT that commit the SELECT's result as a MERGE ON them.
        value: rows inserted, if known."""
        raise NotImplementedError(f"{self.name} has no insert_select")

    def overwrite(
        self,
        columns: list[str],
        transform: Callable[[list[tuple]], tuple[list[tuple], dict[str, Any]]],
        table: TableSpec,
        op_id: str,
    ) -> OpResult:
        """Read `columns` of every row at one snapshot, and replace the table's
        rows by `transform(rows)[0]` as one transaction committed from that
        snapshot (a read-modify-overwrite; spec C14: its read covers the whole
        table). value: `transform(rows)[1]`, and the version read."""
        raise NotImplementedError(f"{self.name} has no overwrite")

    def optimize(self, op_id: str, zorder_by: list[str] | None = None) -> OpResult:
        """OPTIMIZE (bin-packing compaction), or OPTIMIZE ZORDER BY (cols):
        rewrites files without changing the data (spec M4-M6).
        value: the engine's file counts, where it reports them."""
        raise NotImplementedError(f"{self.name} has no optimize")

    def set_properties(self, props: dict[str, str], op_id: str) -> OpResult:
        """ALTER TABLE t SET TBLPROPERTIES (k = v, ...): a metadata change (spec C17)."""
        raise NotImplementedError(f"{self.name} has no set_properties")

    def add_columns(self, columns: list[Column], op_id: str) -> OpResult:
        """ALTER TABLE t ADD COLUMNS (nullable columns): a schema change (spec C17)."""
        raise NotImplementedError(f"{self.name} has no add_columns")

    def append_idempotent(
        self, rows: list[tuple], table: TableSpec, app_id: str, txn_version: int, op_id: str
    ) -> OpResult:
        """Blind append tagged with a `txn` action (app_id, txn_version), spec
        E5: skipped when the table already holds a version >= txn_version for
        app_id. value: {"skipped": True/False, or None where the engine does
        not say}."""
        raise NotImplementedError(f"{self.name} has no append_idempotent")

    def create_table_at(self, uri: str, table: TableSpec, op_id: str) -> OpResult:
        """Create a new, empty table at `uri` (not the client's table), failing
        if one exists there (error-if-exists), with `op_id` in its commitInfo.
        Spec E6: of several writers creating the same table at once, all but
        one must fail."""
        raise NotImplementedError(f"{self.name} has no create_table_at")

    def latest_version(self) -> int:
        """The table's newest committed version, as this client sees it now."""
        raise NotImplementedError(f"{self.name} does not report the table's version")

    def read_tables(self, uris: list[str], columns: list[str]) -> OpResult:
        """One query over several tables (spec C2): `columns` of each table
        at `uris`, tagged by table. value: {"rows": one list of row tuples
        per table, in order; "versions": the version each was read at where
        the engine says, else None}."""
        raise NotImplementedError(f"{self.name} has no query over several tables")

    def stream(self, sink_uri: str, checkpoint_uri: str, columns: list[str], seconds: float, op_id: str) -> OpResult:
        """A Structured Streaming query from this table to the Delta table at
        `sink_uri` (created by the query), its checkpoint at `checkpoint_uri`:
        micro-batches of `columns` every few hundred milliseconds for
        `seconds`, or, with `seconds` 0, until everything the table had at the
        start is written (available-now), then stopped. A query that fails
        raises its error. value: {"batches": [{"batch", "start", "end",
        "rows"}], the source versions each batch read from and to (spec
        C18)}."""
        raise NotImplementedError(f"{self.name} has no streaming")

    def read_as_of(self, columns: list[str], version: int, via: str = "dataframe") -> OpResult:
        """Time travel: read the whole table as of `version` (spec T1).
        value: list of row tuples."""
        raise NotImplementedError(f"{self.name} has no time travel")

    def read_as_of_time(self, columns: list[str], timestamp_ms: int, via: str = "dataframe") -> OpResult:
        """Time travel by timestamp: read the whole table as of the version
        the engine resolves `timestamp_ms` (Unix milliseconds) to (spec T1).
        value: list of row tuples; version: the version read, where the
        engine says."""
        raise NotImplementedError(f"{self.name} has no time travel")

    def restore(self, version: int, op_id: str) -> OpResult:
        """RESTORE TABLE t TO VERSION AS OF `version`, one commit (spec T3).
        value: the engine's file counts, where it reports them."""
        raise NotImplementedError(f"{self.name} has no restore")

    def vacuum(self, retention_hours: int, full: bool, op_id: str) -> OpResult:
        """VACUUM t RETAIN `retention_hours` HOURS, the retention check off
        when that is below the default (spec T2). `full`: also delete
        untracked files (delta-spark's default mode, delta-rs' full mode);
        otherwise only files the log removed (delta-spark's LITE, delta-rs'
        default). value: the files deleted, where the engine says."""
        raise NotImplementedError(f"{self.name} has no vacuum")

    def checkpoint(self, op_id: str) -> OpResult:
        """Write a checkpoint of the current version now (spec C4: it must
        equal the replay of the commits up to it)."""
        raise NotImplementedError(f"{self.name} has no explicit checkpoint")

    def cleanup_log(self, op_id: str) -> OpResult:
        """Delete the log entries older than the table's log retention
        (`delta.logRetentionDuration`) that a checkpoint stands in for
        (spec T1: time travel to their versions may then fail)."""
        raise NotImplementedError(f"{self.name} has no log cleanup")

    def at(self, table_uri: str) -> EngineClient:
        """This client (same session, same storage identity) bound to another
        table, e.g. one of a create race's tables. Only path-based ops address
        it: a Spark client's SQL still names the session's registered table,
        so callers pass via="dataframe"."""
        import copy
        from dataclasses import replace

        other = copy.copy(self)
        other.config = replace(self.config, table_uri=table_uri)
        return other

    # The table version the last primitive's snapshot was at (what its commit
    # read), where the engine tells; None otherwise. Commits of some engines
    # carry no readVersion, and checkers need it (spec C17).
    last_read_version: int | None = None

    @abstractmethod
    def read(self, columns: list[str], via: str = "dataframe") -> OpResult:
        """Read the whole table (one snapshot, spec C12); value: list of row tuples."""

    @abstractmethod
    def classify(self, exc: BaseException) -> Classified:
        """What an engine exception means: its error class (E1-E6 or other)
        and whether the op definitely did not apply (fail) or may have (info)."""


# A Spark Connect client's imports (PySpark, pandas, grpc): 1.5 s of CPU.
SPARK_CLIENT_MODULES = ("pyspark.sql.connect.session", "pyspark.sql.connect.client.retries")


class Engine(ABC):
    """Controller-side: nodes and client configs for one engine."""

    name: str
    capabilities: Capabilities
    # What a client worker imports before it opens its session: a run's
    # worker fork server imports them once (harness.run.forkserver).
    client_modules: tuple[str, ...] = ()

    def prepare(self) -> None:
        """Build what this engine's release needs before anything starts (an
        environment of its own, harness.engines.envs); nothing by default."""
        return None

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        """`n` nodes named n<first>, n<first+1>, ... (names are unique across
        the engines of a mixed run)."""
        return [Node(f"n{first + i}") for i in range(n)]

    def stop_nodes(self) -> None:
        """Stop the nodes start_nodes started; by default it started none."""
        return None

    def node_load(self) -> Load:
        """What one node takes of the machine (harness.core.capacity); by
        default a node is a name only."""
        return NODE_NAME

    def expect_ops(self, ops: frozenset[str]) -> None:
        """The primitives the run will call, said before start_nodes: an
        engine that prepares its nodes (delta-spark's warm-up) may prepare
        only those."""
        return None

    def server(self, name: str) -> ManagedProcess | None:
        """The server process of node `name`, for engines whose nodes have
        one (Sail): what the kill, pause and clock nemeses act on."""
        return None

    def restart_node(
        self, node: Node, storage: Storage, logs_dir: Path, timeout: float, extra_env: dict[str, str] | None = None
    ) -> None:
        """Start node's server again (killing it first if it runs), with
        `extra_env`; updates node.url, pid and log in place."""
        raise NotImplementedError(f"{self.name} nodes have no server to restart")

    @abstractmethod
    def client_config(
        self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float
    ) -> ClientConfig:
        """What a worker needs to open a client of `node` on the table: the
        client class, the node's endpoint, the storage's credentials."""

    def versions(self) -> dict[str, str]:
        """Package versions of the engine, for spec.json."""
        return {}

    def uses_commit_coordinator(self, storage: Storage) -> bool:
        """Whether this engine's commits are ratified by a commit
        coordinator (DynamoDB conditional updates) on `storage`, rather than
        by the store alone: the store's self-check then covers the
        coordinator's conditional update too, and the run keeps its state."""
        return False

    def commit_protocol(self, storage: Storage) -> str:
        """How this engine makes a commit atomic on `storage` (spec C4): two
        engines sharing a table are safe together only if they use one
        primitive. Recorded in spec.json and the summary."""
        if storage.kind == "local":
            return "create-if-absent of the commit file on the local file system"
        return "put-if-absent on the object store (If-None-Match: * on the commit PUT)"


# The column a query over several tables tags each row with its table by.
TABLE_TAG = "dj_table_index"


def multi_table_sql(names: list[str], columns: list[str]) -> str:
    """One statement reading every table named (spec C2): each table's
    `columns`, tagged with its place in `names`."""
    cols = ", ".join(columns)
    return " UNION ALL ".join(f"SELECT {i} AS {TABLE_TAG}, {cols} FROM {name}" for i, name in enumerate(names))


def split_by_table(table: Any, n: int, columns: list[str]) -> list[list[tuple]]:
    """The rows of a `multi_table_sql` result (a pyarrow table), one list per table."""
    out: list[list[tuple]] = [[] for _ in range(n)]
    if table.num_rows == 0:
        return out
    tags = table.column(TABLE_TAG).to_pylist()
    for tag, *row in zip(tags, *(table.column(c).to_pylist() for c in columns), strict=True):
        out[int(tag)].append(tuple(row))
    return out
