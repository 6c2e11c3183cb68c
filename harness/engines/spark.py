"""Spark through PySpark's Spark Connect client.

The same client code drives any Spark Connect endpoint: Sail (started here,
one server per node), delta-spark on a JVM, or a remote cluster. Ops go
through SQL and the DataFrame API, chosen per op by the workload.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from harness.core.table import Column, TableSpec
from harness.engines.base import Capabilities, ClientConfig, EngineClient, OpResult, multi_table_sql, split_by_table
from harness.engines.errors import Classified, classify_spark

# Sail keeps a catalog per session, so each session registers the table
# under this name (by location) before it runs SQL against it.
TABLE_NAME = "dj_table"


def spark_uri(uri: str) -> str:
    """Hadoop's S3 connector is s3a://; the table is the same object."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, (int, float)):
        return repr(v)
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_values(rows: list[tuple]) -> str:
    return ", ".join("(" + ", ".join(sql_literal(v) for v in row) + ")" for row in rows)


def _to_arrow(df: Any) -> Any:
    """A Connect DataFrame's rows as one Arrow table. pyspark 3.5 (the client
    of delta-spark 3.x) has no DataFrame.toArrow: its client's to_table is
    what collect() itself runs."""
    if hasattr(type(df), "toArrow"):
        return df.toArrow()
    client = df._session.client
    table, _schema = client.to_table(df._plan.to_proto(client))
    return table


def _rows(df: Any, columns: list[str]) -> list[tuple]:
    """A DataFrame's rows as tuples of `columns`."""
    t = _to_arrow(df)
    return list(zip(*(t.column(c).to_pylist() for c in columns), strict=True))


def _offset(offset: Any) -> tuple[int | None, int | None]:
    """Where a Delta source offset stands: (reservoirVersion, index), the
    index -1 meaning before any file of that version."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return None, None
    if isinstance(offset, dict) and isinstance(offset.get("reservoirVersion"), int):
        index = offset.get("index")
        return int(offset["reservoirVersion"]), int(index) if isinstance(index, int) else None
    return None, None


def _batch(progress: Any) -> dict[str, Any] | None:
    """One micro-batch's progress: its id, the source versions it read from
    and to, and its rows; None for a progress report of no batch."""
    p = json.loads(progress.json) if hasattr(progress, "json") else progress
    sources = p.get("sources") or []
    if not sources:
        return None
    src = sources[0]
    rows = src.get("numInputRows", p.get("numInputRows"))
    start, _ = _offset(src.get("startOffset"))
    end, end_index = _offset(src.get("endOffset"))
    return {
        "batch": p.get("batchId"),
        "start": start,
        "end": end,
        "end_index": end_index,
        "rows": rows,
    }


class SparkConnectClient(EngineClient):
    """One client for every Spark Connect backend; what the backend can do
    (Sail, delta-spark, a remote cluster) comes in as its capabilities."""

    def __init__(self, config: ClientConfig, name: str, capabilities: Capabilities):
        super().__init__(config)
        self.name = name
        self.capabilities = capabilities
        self.spark: Any = None
        self._registered = False

    def open(self) -> None:
        from pyspark.sql import SparkSession

        assert self.config.url, "a Spark Connect client needs sc://host:port"

        # PySpark's default retries an unavailable server for ~10 minutes; a
        # dead node must surface fast (as an indeterminate op) instead.
        policy = {"max_retries": 3, "initial_backoff": 50, "max_backoff": 1000, "jitter": 0}
        try:
            from pyspark.sql.connect.client.retries import DefaultPolicy
        except ImportError:  # pyspark 3.5 (delta-spark 3.x, Sail before 0.7): one policy, a dict
            from pyspark.sql.connect.session import SparkSession as ConnectSession

            # Its builder's create() sends each option (spark.remote too) to
            # the server under the default policy, minutes against a node
            # that is down: the session alone, its policy set before any call.
            self.spark = ConnectSession(connection=self.config.url)
            self.spark.client._retry_policy.update(policy)
        else:
            # create(), not getOrCreate(): every client must have its own session.
            self.spark = SparkSession.builder.remote(self.config.url).create()
            self.spark.client.set_retry_policies([DefaultPolicy(**policy)])

    def close(self) -> None:
        if self.spark is not None:
            try:
                self.spark.stop()
            except Exception:
                pass
            self.spark = None

    def _sql(self, stmt: str) -> list[Any]:
        return self.spark.sql(stmt).collect()

    # How SQL names the client's table: a per-session catalog name (Sail
    # keeps a catalog per session), or delta.`<uri>` for backends whose
    # catalog all sessions share.
    path_identifiers = False

    @property
    def table_ref(self) -> str:
        if self.path_identifiers:
            return "delta.`" + self.config.table_uri.replace("`", "``") + "`"
        return TABLE_NAME

    def _tag(self, op_id: str) -> None:
        """Name the op in the commit's commitInfo, where the backend can."""

    def _register(self) -> None:
        if not self._registered and not self.path_identifiers:
            self._sql(
                f"CREATE TABLE IF NOT EXISTS {TABLE_NAME} USING delta LOCATION {sql_literal(self.config.table_uri)}"
            )
            self._registered = True

    def create_table(self, table: TableSpec) -> OpResult:
        name = self.table_ref
        if table.identity is not None and self.path_identifiers:
            # delta-spark refuses an identity column in CREATE TABLE
            # delta.`<path>` (UNSUPPORTED_FEATURE.TABLE_OPERATION): the table
            # is created under a catalog name of its own, at its location,
            # and written by path like any other.
            name = "dj_identity_" + hashlib.sha1(self.config.table_uri.encode()).hexdigest()[:16]
        cols = ", ".join(
            f"{c.name} {c.type}" + (" GENERATED ALWAYS AS IDENTITY" if c.name == table.identity else "")
            for c in table.columns
        )
        stmt = f"CREATE TABLE {name} ({cols}) USING delta"
        if table.partition_by:
            stmt += f" PARTITIONED BY ({', '.join(table.partition_by)})"
        if name != self.table_ref or not self.path_identifiers:
            stmt += f" LOCATION {sql_literal(self.config.table_uri)}"
        if table.properties:
            props = ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in table.properties)
            stmt += f" TBLPROPERTIES ({props})"
        self._sql(stmt)
        self._registered = True
        return OpResult(version=0)

    def create_table_at(self, uri: str, table: TableSpec, op_id: str) -> OpResult:
        # The DataFrame writer's error-if-exists on an empty DataFrame: SQL
        # CREATE TABLE ... LOCATION succeeds on an existing table of the same
        # schema (it only registers it), so it cannot tell a lost race.
        # PySpark's Connect client accepts "error" only, not "errorifexists".
        schema = ", ".join(f"{c.name} {c.type}" for c in table.columns)
        w = self.spark.createDataFrame([], schema).write.format("delta").mode("error")
        if table.partition_by:
            w = w.partitionBy(*table.partition_by)
        for k, v in table.properties:
            w = w.option(k, v)
        w.option("userMetadata", op_id).save(uri)
        return OpResult()

    def append(self, rows: list[tuple], table: TableSpec, via: str, op_id: str) -> OpResult:
        if via == "sql":
            self._register()
            self._tag(op_id)
            names = ", ".join(c.name for c in table.written_columns())
            self._sql(f"INSERT INTO {self.table_ref} ({names}) VALUES {sql_values(rows)}")
        else:
            schema = ", ".join(f"{c.name} {c.type}" for c in table.written_columns())
            df = self.spark.createDataFrame(rows, schema)
            # userMetadata lands in commitInfo: the log then names the op.
            df.write.format("delta").mode("append").option("userMetadata", op_id).save(self.config.table_uri)
        return OpResult()

    def update(self, where: str, assignments: dict[str, str], op_id: str, via: str = "sql") -> OpResult:
        self._register()
        self._tag(op_id)
        sets = ", ".join(f"{col} = {expr}" for col, expr in assignments.items())
        rows = self._sql(f"UPDATE {self.table_ref} SET {sets} WHERE {where}")
        # Spark returns the number of affected rows where the backend says it.
        count = rows[0][0] if rows and len(rows[0]) else None
        return OpResult(value={"updated": count})

    def delete(self, where: str | None, op_id: str, via: str = "sql") -> OpResult:
        self._register()
        self._tag(op_id)
        rows = self._sql(f"DELETE FROM {self.table_ref}" + (f" WHERE {where}" if where else ""))
        count = rows[0][0] if rows and len(rows[0]) else None
        return OpResult(value={"deleted": count})

    def merge(
        self,
        source_rows: list[tuple],
        source_columns: list[str],
        on: str,
        when_matched_set: dict[str, str] | None,
        insert_values: dict[str, str] | None,
        op_id: str,
    ) -> OpResult:
        self._register()
        self._tag(op_id)
        # Sail rejects column aliases on a MERGE source (`s(a, b)`), so the
        # names go on an inner VALUES instead.
        src = f"(SELECT * FROM VALUES {sql_values(source_rows)} AS src({', '.join(source_columns)})) s"
        stmt = f"MERGE INTO {self.table_ref} t USING {src} ON {on}"
        if when_matched_set:
            stmt += " WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{c} = {e}" for c, e in when_matched_set.items())
        if insert_values:
            stmt += (
                f" WHEN NOT MATCHED THEN INSERT ({', '.join(insert_values)}) "
                f"VALUES ({', '.join(insert_values.values())})"
            )
        rows = self._sql(stmt)
        count = rows[0][0] if rows and len(rows[0]) else None
        return OpResult(value={"merged": count})

    def insert_select(self, columns: list[str], select_sql: str, match_on: list[str], op_id: str) -> OpResult:
        self._register()
        self._tag(op_id)
        rows = self._sql(
            f"INSERT INTO {self.table_ref} ({', '.join(columns)}) {select_sql.format(table=self.table_ref)}"
        )
        count = rows[0][0] if rows and len(rows[0]) else None
        return OpResult(value={"inserted": count})

    def optimize(self, op_id: str, zorder_by: list[str] | None = None) -> OpResult:
        # Only reached on backends whose capabilities list "optimize" (delta-spark);
        # Sail 0.7 cannot parse OPTIMIZE, so its capabilities leave it out.
        self._register()
        self._tag(op_id)
        stmt = f"OPTIMIZE {self.table_ref}"
        if zorder_by:
            stmt += f" ZORDER BY ({', '.join(zorder_by)})"
        self._sql(stmt)
        return OpResult()

    def set_properties(self, props: dict[str, str], op_id: str) -> OpResult:
        self._register()
        self._tag(op_id)
        pairs = ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in props.items())
        self._sql(f"ALTER TABLE {self.table_ref} SET TBLPROPERTIES ({pairs})")
        return OpResult()

    def add_columns(self, columns: list[Column], op_id: str) -> OpResult:
        # Sail 0.7.2: "unsupported ALTER TABLE operation"; not in its capabilities.
        self._register()
        self._tag(op_id)
        self._sql(f"ALTER TABLE {self.table_ref} ADD COLUMNS ({', '.join(f'{c.name} {c.type}' for c in columns)})")
        return OpResult()

    def append_idempotent(
        self, rows: list[tuple], table: TableSpec, app_id: str, txn_version: int, op_id: str
    ) -> OpResult:
        # delta-spark skips the write when the table holds txnVersion >= this
        # one for txnAppId, silently: whether it skipped is not reported.
        # Sail 0.7.2 ignores both options (no txn action, a re-sent pair is
        # applied again), so its capabilities leave "append-idempotent" out.
        schema = ", ".join(f"{c.name} {c.type}" for c in table.columns)
        (
            self.spark.createDataFrame(rows, schema)
            .write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", str(int(txn_version)))
            .option("userMetadata", op_id)
            .save(self.config.table_uri)
        )
        return OpResult(value={"skipped": None})

    def read(self, columns: list[str], via: str = "dataframe") -> OpResult:
        if via == "sql":
            self._register()
            df = self.spark.sql(f"SELECT {', '.join(columns)} FROM {self.table_ref}")
        else:
            df = self.spark.read.format("delta").load(self.config.table_uri).select(*columns)
        t = _to_arrow(df)
        if t.num_rows == 0:
            return OpResult(value=[])
        return OpResult(value=list(zip(*(t.column(c).to_pylist() for c in columns), strict=True)))

    def read_tables(self, uris: list[str], columns: list[str]) -> OpResult:
        names = []
        for uri in uris:
            if uri == self.config.table_uri:
                self._register()
                names.append(self.table_ref)
            elif self.path_identifiers:
                names.append("delta.`" + uri.replace("`", "``") + "`")
            else:
                # A catalog name of its own per table, in this session's catalog.
                name = "dj_other_" + hashlib.sha1(uri.encode()).hexdigest()[:16]
                self._sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {sql_literal(uri)}")
                names.append(name)
        t = _to_arrow(self.spark.sql(multi_table_sql(names, columns)))
        return OpResult(value={"rows": split_by_table(t, len(uris), columns), "versions": None})

    # How often a running stream starts a micro-batch.
    STREAM_TRIGGER = "250 milliseconds"

    def stream(self, sink_uri: str, checkpoint_uri: str, columns: list[str], seconds: float, op_id: str) -> OpResult:
        self._tag(op_id)  # the sink's commits name the op that ran the query
        source = self.spark.readStream.format("delta").load(self.config.table_uri).select(*columns)
        writer = source.writeStream.format("delta").option("checkpointLocation", checkpoint_uri).outputMode("append")
        # Micro-batches on a timer, also for the drain: a query that ended on
        # its own (available-now) no longer reports its progress.
        query = writer.trigger(processingTime=self.STREAM_TRIGGER).start(sink_uri)
        try:
            if seconds <= 0:
                query.processAllAvailable()
            else:
                query.awaitTermination(seconds)  # True only if it ended: a failure raises below
            err = query.exception()
            if err is not None:
                raise err
            progress = list(query.recentProgress)
        finally:
            if query.isActive:
                query.stop()
        batches = [b for b in map(_batch, progress) if b is not None]
        return OpResult(value={"batches": batches})

    def latest_version(self) -> int:
        self._register()
        return int(self._sql(f"DESCRIBE HISTORY {self.table_ref} LIMIT 1")[0]["version"])

    def read_as_of(self, columns: list[str], version: int, via: str = "dataframe") -> OpResult:
        if via == "sql":
            self._register()
            df = self.spark.sql(f"SELECT {', '.join(columns)} FROM {self.table_ref} VERSION AS OF {int(version)}")
        else:
            df = (
                self.spark.read.format("delta")
                .option("versionAsOf", int(version))
                .load(self.config.table_uri)
                .select(*columns)
            )
        return OpResult(value=_rows(df, columns))

    def read_as_of_time(self, columns: list[str], timestamp_ms: int, via: str = "dataframe") -> OpResult:
        # A string with an explicit zone (read in the session's time zone
        # otherwise); delta-spark's SQL takes a literal only: an expression
        # such as timestamp_millis(...) fails analysis on a path identifier.
        at = datetime.fromtimestamp(int(timestamp_ms) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%fZ")
        if via == "sql":
            self._register()
            df = self.spark.sql(f"SELECT {', '.join(columns)} FROM {self.table_ref} TIMESTAMP AS OF {sql_literal(at)}")
        else:
            df = (
                self.spark.read.format("delta").option("timestampAsOf", at).load(self.config.table_uri).select(*columns)
            )
        return OpResult(value=_rows(df, columns))

    def restore(self, version: int, op_id: str) -> OpResult:
        self._register()
        self._tag(op_id)
        rows = self._sql(f"RESTORE TABLE {self.table_ref} TO VERSION AS OF {int(version)}")
        got = rows[0].asDict() if rows else {}
        return OpResult(
            value={"restored_files": got.get("num_restored_files"), "removed_files": got.get("num_removed_files")}
        )

    # The documented default retention (7 days): below it the engine's
    # safety check refuses VACUUM unless it is turned off.
    DEFAULT_RETENTION_HOURS = 168

    def vacuum(self, retention_hours: int, full: bool, op_id: str) -> OpResult:
        self._register()
        self._tag(op_id)
        if retention_hours < self.DEFAULT_RETENTION_HOURS:
            self.spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        # VACUUM START / END commits: what the vacuum check dates each VACUUM by.
        self.spark.conf.set("spark.databricks.delta.vacuum.logging.enabled", "true")
        mode = "" if full else " LITE"
        self._sql(f"VACUUM {self.table_ref}{mode} RETAIN {int(retention_hours)} HOURS")
        return OpResult(value={"deleted": None})

    def classify(self, exc: BaseException) -> Classified:
        return classify_spark(exc)


class DeltaSparkClient(SparkConnectClient):
    """delta-spark (a JVM Spark Connect server, or a remote cluster with
    Delta configured). Its catalog is shared by every session of a server,
    so SQL names tables by path; and each write names its op in
    commitInfo.userMetadata, where the checkers find it beside the
    commit's readVersion."""

    USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
    path_identifiers = True

    def _tag(self, op_id: str) -> None:
        self.spark.conf.set(self.USER_METADATA, op_id)

    def at(self, table_uri: str) -> EngineClient:
        return super().at(spark_uri(table_uri))

    def create_table(self, table: TableSpec) -> OpResult:
        # The session's op id of an earlier write must not name this commit.
        self.spark.conf.unset(self.USER_METADATA)
        try:
            return super().create_table(table)
        except Exception as e:
            # delta-spark 4.0 accepts only "Serializable" for
            # delta.isolationLevel (spec C13 names WriteSerializable too):
            # the table cannot be made, so nothing at that level can be
            # tested; unsupported, not a failure of the harness.
            if dict(table.properties).get("delta.isolationLevel") and "delta.isolationLevel must be" in str(e):
                raise NotImplementedError(f"the engine refuses the table's isolation level: {e}") from e
            raise

    def create_table_at(self, uri: str, table: TableSpec, op_id: str) -> OpResult:
        return super().create_table_at(spark_uri(uri), table, op_id)
