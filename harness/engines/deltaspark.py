"""delta-spark on Apache Spark: one Spark Connect server JVM per node.

Each node is its own "cluster": a JVM started from pyspark's own jars
(`bin/spark-submit` with Spark's `SparkConnectServer`) plus Delta's jars
(harness.engines.jars), with Delta's SQL extension and catalog. Clients
are the ordinary Spark Connect client (harness.engines.spark), one session
each. On S3 the JVM speaks `s3a://` and signs with the node's own access
key id (from its environment, never its command line), so the fault proxy
can tell the nodes apart.

The commit protocol on S3 is a run option (`--log-store`): delta-spark's
default for s3a (`S3SingleDriverLogStore`: put-if-absent only inside one
JVM, so two clusters writing one table are outside its contract),
coordinated commits (the DynamoDB commit coordinator shipped in
delta-spark's own jar: each commit is staged under
`_delta_log/_staged_commits/`, ratified by a conditional DynamoDB update,
then backfilled to `_delta_log/<v>.json`; Delta's way for several clusters
to write one table), or `S3DynamoDBLogStore` (a DynamoDB conditional put
per commit; its jar is not on every Maven mirror).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.core.capacity import Load, MiB
from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, foreign_python, owned_tempdir, python_argv
from harness.core.storage import Storage
from harness.engines.base import Capabilities, ClientConfig, Node
from harness.engines.cds import DUMP_GRACE_S, ClassArchive, stable_spark_home
from harness.engines.envs import ReleaseEnv, ensure
from harness.engines.jars import JarSet, Versions, resolve
from harness.engines.loopback import preload
from harness.engines.releases import EngineRelease, env_request, parse_release
from harness.engines.servers import ServerEngine
from harness.engines.spark import spark_uri

DELTA_SPARK_CAPABILITIES = Capabilities(
    ops=frozenset(
        {
            "create-table",
            "append",
            "read",
            "update",
            "delete",
            "merge",
            "insert_select",
            "optimize",
            "set-properties",
            "add-columns",
            "append-idempotent",
            "create-table-at",
            "read-as-of",
            "read-as-of-time",
            "restore",
            "vacuum",
            "read-tables",
            "stream",
        }
    ),
    # Through Spark Connect a statement reports neither version; the log's
    # commitInfo names the op (userMetadata) with its readVersion.
    read_version_known=False,
    commit_version_known=False,
    row_level_concurrency=False,  # a Databricks runtime feature (spec R-table)
    # Measured: on a table carrying no delta.isolationLevel, delta-spark 4.0
    # writes isolationLevel "Serializable" into every data-changing commit.
    default_isolation="Serializable",
    notes="versions from the log: every commit carries its op id as userMetadata, and its readVersion",
)

# Ops a release has from the release named on (ops not named: all supported
# releases). Identity columns: delta-spark 3.3 writes them, but only from
# 4.4 does SQL's CREATE TABLE declare one (the pinned 4.0.1 refuses it with
# UNSUPPORTED_FEATURE.TABLE_OPERATION; its builder API is not reachable
# through Spark Connect without Delta Connect, which Maven Central lacks).
SINCE: dict[str, tuple[int, int]] = {"identity-columns": (4, 4)}


def capabilities_of(release: str | None) -> Capabilities:
    """The capabilities of a delta-spark release (None: the pinned one)."""
    if release is None:
        return DELTA_SPARK_CAPABILITIES
    v = parse_release(release)[:2]
    ops = frozenset(op for op in DELTA_SPARK_CAPABILITIES.ops if v >= SINCE.get(op, (0, 0)))
    ops |= {op for op, since in SINCE.items() if v >= since}
    return dataclasses.replace(DELTA_SPARK_CAPABILITIES, ops=ops)


def installed_capabilities() -> Capabilities:
    """Where a client runs: the capabilities of the delta-spark installed
    there (the harness's own, or a release's environment)."""
    from importlib.metadata import version

    return capabilities_of(version("delta-spark"))


CONNECT_SERVER = "org.apache.spark.sql.connect.service.SparkConnectServer"
DRIVER_MEMORY_ENV = "DJ_SPARK_DRIVER_MEMORY"
DEFAULT_DRIVER_MEMORY = "1g"  # x 2 nodes, beside the workers: well inside 24 GiB
# What a node's JVM holds beyond its heap: the classes of Spark, Delta and
# the AWS SDK (about 20,000), compiled code and thread stacks.
JVM_OVERHEAD = 512 * MiB
JAVA_OPTS_ENV = "DJ_SPARK_JAVA_OPTS"
# The client JIT only, and one GC thread: on 2 cores two JVMs' C2 compiler
# threads fight the engine itself. Measured here: a node's first pass over
# the workloads' ops took 53 s with the JVM defaults and 28 s with these;
# later passes took the same time either way.
DEFAULT_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# More Spark settings for every node, "key=value" pairs split by whitespace,
# applied after the harness's own (so they can replace them).
SPARK_CONF_ENV = "DJ_SPARK_CONF"
WARMUP_TIMEOUT_S = 180.0
# Spark logs every task and plan at INFO (~1 MB per node per 30 s). Kept:
# warnings, the server's start line (the readiness probe waits for it),
# Delta's commit lines, which tie a node's log to the table's versions, and
# the DynamoDB commit coordinator's (staged file, ratified, backfilled).
LOG4J2 = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.server.name = org.apache.spark.sql.connect.service.SparkConnectServer
logger.server.level = info
logger.txn.name = org.apache.spark.sql.delta.OptimisticTransaction
logger.txn.level = info
logger.coordinator.name = io.delta.dynamodbcommitcoordinator
logger.coordinator.level = info
"""

# The commit protocols delta-spark 4.0 offers on S3: name -> (LogStore class
# for s3a, jar feature it needs, what the summary says).
SINGLE_DRIVER = "single-driver"
COORDINATED = "coordinated"
LOG_STORES: dict[str, tuple[str | None, str, str]] = {
    SINGLE_DRIVER: (
        None,
        "s3",
        "S3SingleDriverLogStore (delta-spark's default for s3a: mutual exclusion inside one JVM only)",
    ),
    COORDINATED: (
        None,
        "coordinator",
        "coordinated commits (delta-spark's DynamoDB commit coordinator ratifies each version "
        "by a conditional DynamoDB update; version 0 through S3SingleDriverLogStore)",
    ),
    "dynamodb": (
        "io.delta.storage.S3DynamoDBLogStore",
        "dynamodb",
        "S3DynamoDBLogStore (a DynamoDB conditional put per commit)",
    ),
}
# What the harness chooses when the run names no protocol: coordinated
# commits where several delta-spark clusters write one table on S3 (Delta's
# documented way for them to), the single-driver default otherwise.
AUTO = "auto"
# The name stored runs and older command lines gave the single-driver store.
LEGACY_NAMES = {"default": SINGLE_DRIVER}
# The DynamoDB table the commit coordinator keeps its tables' commits in
# (the coordinator creates it on first use).
COORDINATOR_TABLE = "delta_coordinated_commits"
# The first delta-spark release whose jar holds the DynamoDB commit coordinator.
COORDINATOR_SINCE = (4, 0)


def has_commit_coordinator(release: str | None) -> bool:
    """None: the pinned release."""
    return release is None or parse_release(release)[:2] >= COORDINATOR_SINCE


DYNAMODB_TABLE = "delta_log"


def coordinator_conf(storage: Storage) -> dict[str, str]:
    """Spark settings that make every table a node creates a coordinated-
    commits table of the DynamoDB commit coordinator. The coordinator's
    settings are stored in the table's metadata, so every cluster commits
    through the same DynamoDB table; each signs with its own key id (from
    its environment), so the fault proxy can tell them apart."""
    endpoint = storage.coordinator_endpoint()
    if endpoint is None:
        raise HarnessError(
            f"--log-store {COORDINATED} needs a DynamoDB endpoint, and --storage {storage.kind} offers none"
        )
    prefix = "spark.databricks.delta.properties.defaults.coordinatedCommits."
    return {
        prefix + "commitCoordinator-preview": "dynamodb",
        prefix + "commitCoordinatorConf-preview": json.dumps(
            {"dynamoDBTableName": COORDINATOR_TABLE, "dynamoDBEndpoint": endpoint}, separators=(",", ":")
        ),
        "spark.databricks.delta.coordinatedCommits.commitCoordinator.dynamodb.awsCredentialsProviderName": (
            "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
        ),
    }


def _conf(pairs: dict[str, str]) -> list[str]:
    out: list[str] = []
    for k, v in pairs.items():
        out += ["--conf", f"{k}={v}"]
    return out


def _env_conf() -> dict[str, str]:
    out = {}
    for pair in os.environ.get(SPARK_CONF_ENV, "").split():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise HarnessError(f"{SPARK_CONF_ENV}: {pair!r} is not key=value")
        out[key] = value
    return out


def driver_memory() -> int:
    """Bytes of heap a node's JVM gets: $DJ_SPARK_DRIVER_MEMORY, as
    spark-submit --driver-memory reads it (a plain number is MiB)."""
    value = os.environ.get(DRIVER_MEMORY_ENV, DEFAULT_DRIVER_MEMORY)
    m = re.fullmatch(r"\s*(\d+)\s*(b|[kmgtp]b?)?\s*", value, re.IGNORECASE)
    if m is None:
        raise HarnessError(f"${DRIVER_MEMORY_ENV}={value!r} is not a heap size such as 1g or 512m")
    unit = (m.group(2) or "m")[0].lower()
    return int(m.group(1)) << {"b": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}[unit]


class DeltaSparkEngine(ServerEngine):
    name = "delta-spark"
    capabilities = DELTA_SPARK_CAPABILITIES
    stop_grace = 10.0

    def __init__(
        self,
        log_store: str = SINGLE_DRIVER,
        jar_dir: str | None = None,
        progress: Callable[[str], None] | None = None,
        release: str | None = None,
    ):
        log_store = LEGACY_NAMES.get(log_store, log_store)
        if log_store not in LOG_STORES:
            raise HarnessError(f"unknown --log-store {log_store!r}; valid: {', '.join(LOG_STORES)}")
        if log_store == COORDINATED and release is not None and not has_commit_coordinator(release):
            raise HarnessError(
                f"--log-store {COORDINATED}: delta-spark {release} has no DynamoDB commit coordinator "
                f"(it came with {'.'.join(map(str, COORDINATOR_SINCE))})"
            )
        self.log_store = log_store
        self.capabilities = capabilities_of(release)
        # A release other than the pinned one: its Spark, pyspark client and
        # Delta jars come from an environment of its own (harness.engines.envs).
        self.release = release
        self.env: ReleaseEnv | None = None
        self._versions: Versions | None = None
        self.jar_dir = jar_dir
        self.progress = progress
        self.jars: JarSet | None = None
        self.workdirs: dict[str, str] = {}  # node name -> its JVM's scratch dir
        self.last_start: dict[str, float] = {}
        self._t0 = 0.0
        self.warm_ops: frozenset[str] | None = None  # None: every op the warm-up knows
        self.cds: ClassArchive | None = None
        super().__init__()

    # -- jars and configuration ------------------------------------------------

    def _features(self, storage: Storage) -> list[str]:
        if storage.kind == "local":
            return ["delta"]
        return [LOG_STORES[self.log_store][1]]

    def prepare(self) -> None:
        if self.release is not None and self.env is None:
            self.env = ensure(env_request(EngineRelease(self.name, self.release)), self.progress)

    def spark_versions(self) -> Versions:
        """The Spark and Delta the nodes run: the harness's own, or the release's."""
        if self._versions is None:
            self.prepare()
            if self.env is None:
                self._versions = Versions.installed()
            else:
                home = self.env.site_packages / "pyspark"
                self._versions = Versions.of(home, self.env.resolved["pyspark"], self.env.resolved["delta-spark"])
        return self._versions

    def jarset(self, storage: Storage) -> JarSet:
        if self.jars is None:
            self.jars = resolve(self._features(storage), self.jar_dir, self.progress, self.spark_versions())
        return self.jars

    def uses_commit_coordinator(self, storage: Storage) -> bool:
        return storage.kind != "local" and self.log_store == COORDINATED

    def commit_protocol(self, storage: Storage) -> str:
        if storage.kind == "local":
            return (
                "HDFSLogStore (on the local file system: an existence check, then a rename that replaces; "
                "mutual exclusion inside one JVM only)"
            )
        return LOG_STORES[self.log_store][2]

    def _spark_conf(self, storage: Storage, port: int) -> dict[str, str]:
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port),
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            # No Hive metastore (a Derby folder in the working directory):
            # the harness addresses tables by path.
            "spark.sql.catalogImplementation": "in-memory",
            # Small tables on 2 cores: Delta's default of 50 partitions for
            # log replay costs more than it saves.
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.databricks.delta.snapshotPartitions": "2",
            # VACUUM lists and deletes files in this many tasks (10000 by
            # default): on local[2] a VACUUM ran ~5400 tasks in 30 s and every
            # other session's job waited behind them, a commit holding the
            # table's snapshot lock among them (thread dump of a maintenance
            # run; with 2, no op waited).
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
            # Interpreted expressions, no generated Java: on tables of a few
            # hundred rows, building and compiling the code of each query
            # (Delta's action encoders are wide) cost more than running it.
            # Measured on 41 conformance cells, 2 JVMs on 2 cores: JVM CPU
            # 220 s -> 166 s, cell time 148 s -> 114 s (either setting alone
            # was no faster, or slower). Execution settings only: what Delta
            # commits, and how it detects conflicts, is the same.
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            # A node that outlives hundreds of tables (a conformance worker
            # makes a few per cell) keeps each table's DeltaLog and snapshot,
            # with their plans, for an hour by default, and the plan text of
            # its last 1000 statements: a 1 GiB heap filled after about 275
            # cells (OutOfMemoryError). An evicted DeltaLog is read again
            # from the log when its table is next used.
            "spark.databricks.delta.delta.log.cacheSize": "32",
            "spark.sql.ui.retainedExecutions": "50",
        }
        if storage.kind != "local":
            endpoint = storage.client_env("x")["AWS_ENDPOINT_URL"]
            # Hadoop 3.4's S3A signs with the AWS SDK v2, 3.3's (Spark 3.5)
            # with v1: each has its own environment-variable provider.
            v1 = self.spark_versions().hadoop.startswith(("2.", "3.0.", "3.1.", "3.2.", "3.3."))
            conf.update(
                {
                    "spark.hadoop.fs.s3a.endpoint": endpoint,
                    "spark.hadoop.fs.s3a.endpoint.region": getattr(storage, "region", "us-east-1"),
                    "spark.hadoop.fs.s3a.path.style.access": "true",
                    "spark.hadoop.fs.s3a.connection.ssl.enabled": str(endpoint.startswith("https://")).lower(),
                    # Credentials come from the JVM's environment, never argv.
                    "spark.hadoop.fs.s3a.aws.credentials.provider": (
                        "com.amazonaws.auth.EnvironmentVariableCredentialsProvider"
                        if v1
                        else "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider"
                    ),
                    # Fail an S3 call in seconds, not minutes: the harness's op
                    # timeout decides what is indeterminate.
                    "spark.hadoop.fs.s3a.attempts.maximum": "3",
                    "spark.hadoop.fs.s3a.retry.limit": "3",
                    # Hadoop 3.3 reads a plain number of milliseconds only.
                    "spark.hadoop.fs.s3a.connection.timeout": "30000" if v1 else "30s",
                }
            )
            store_class = LOG_STORES[self.log_store][0]
            if store_class:
                conf["spark.delta.logStore.s3a.impl"] = store_class
                conf["spark.delta.logStore.s3.impl"] = store_class
            if self.log_store == COORDINATED:
                conf.update(coordinator_conf(storage))
        return conf

    # -- nodes -------------------------------------------------------------------

    def _spawn(self, name: str, storage: Storage, log: Path, extra_env: dict[str, str] | None = None) -> ManagedProcess:
        jars = self.jarset(storage)
        # A restarted node's old JVM is dead by now (restart_node kills it
        # first): its scratch dir, and the Delta cache in it, go with it.
        old = self.workdirs.pop(name, None)
        if old:
            shutil.rmtree(old, ignore_errors=True)
        work = owned_tempdir(f"dj-spark-{name}-")
        self.workdirs[name] = work
        log4j = os.path.join(work, "log4j2.properties")
        Path(log4j).write_text(LOG4J2)
        home = self.spark_versions().spark_home
        if self.env is None:  # a release's Spark lives in the cache already
            home = stable_spark_home(home)
        memory = os.environ.get(DRIVER_MEMORY_ENV, DEFAULT_DRIVER_MEMORY)
        java_opts = os.environ.get(JAVA_OPTS_ENV, DEFAULT_JAVA_OPTS)
        if self.cds is None:
            self.cds = ClassArchive([str(home), *(str(p) for p in jars.jars)], java_opts)
        cds_opt = self.cds.java_option(name)
        argv = [
            str(home / "bin" / "spark-submit"),
            "--class",
            CONNECT_SERVER,
            "--master",
            "local[2]",
            "--driver-memory",
            memory,
            *_conf(
                {
                    **self._spark_conf(storage, 0),
                    "spark.local.dir": work,
                    "spark.sql.warehouse.dir": os.path.join(work, "warehouse"),
                    "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={work} -Dderby.system.home={work} "
                    f"-Dlog4j2.configurationFile=file:{log4j} " + java_opts + (f" {cds_opt}" if cds_opt else ""),
                    **_env_conf(),
                }
            ),
            "spark-internal",
        ]
        # SPARK_LOCAL_IP: nothing of the JVM binds beyond loopback.
        # Delta's jars go on the class path after Spark's own, not through
        # `--jars`: Spark copies every `--jars` file into its temp dir (541 MB
        # per JVM, most of it the AWS SDK bundle), seconds of disk writes per
        # start; and after, because that bundle carries an old SLF4J API that,
        # ahead of Spark's, silences the log the readiness probe reads.
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            **storage.client_env(name),
            "SPARK_DIST_CLASSPATH": os.pathsep.join(str(p) for p in jars.jars),
            **(extra_env or {}),
        }
        env.pop("PYSPARK_PYTHON", None)
        if self.spark_versions().spark.startswith("3."):
            # Spark 3.5's Connect server ignores the binding address above.
            env = preload(env)
        return ManagedProcess(f"delta-spark-{name}", argv, log, env=env, cwd=work).start()

    def _ready(self, srv: ManagedProcess, timeout: float) -> str:
        m = srv.wait_for_log(r"Spark Connect server started at: 127\.0\.0\.1:(\d+)", timeout)
        return f"sc://127.0.0.1:{m.group(1)}"

    def _warm(self, nodes: list[Node], logs_dir: Path) -> None:
        """Run each node's first ops on a scratch table (harness.engines.warmup)
        so the run measures the engine, not the JVM's start-up."""
        procs = []
        for node in nodes:
            srv = self.by_name[node.name]
            scratch = os.path.join(srv.cwd or tempfile.gettempdir(), "warmup-table")
            argv = python_argv(
                "harness.engines.warmup",
                node.url or "",
                scratch,
                *([",".join(sorted(self.warm_ops))] if self.warm_ops is not None else []),
            )
            env = None
            if self.env is not None:  # the release's own Spark Connect client
                argv, env = foreign_python(self.env.python, argv)
            procs.append(
                (
                    node,
                    ManagedProcess(
                        f"warm-up {node.name}", argv, logs_dir / f"delta-spark-{node.name}.warmup.log", env=env
                    ).start(),
                )
            )
        deadline = time.monotonic() + WARMUP_TIMEOUT_S
        try:
            for node, p in procs:
                assert p.proc is not None
                try:
                    code = p.proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    raise HarnessError(
                        f"delta-spark node {node.name}: warm-up not done after "
                        f"{WARMUP_TIMEOUT_S:.0f} s (log: {p.log_path})"
                    ) from None
                if code != 0:
                    raise HarnessError(
                        f"delta-spark node {node.name}: warm-up failed with exit code {code} (log: {p.log_path})"
                    )
        finally:
            for _, p in procs:
                p.kill()

    def stop_nodes(self) -> None:
        # A JVM recording the class archive writes it as it exits: let it.
        for name in list(self.cds.recording if self.cds is not None else ()):
            srv = self.by_name.get(name)
            assert self.cds is not None
            if srv is None or srv.proc is None:
                self.cds.discard(name)
                continue
            srv.stop(grace=DUMP_GRACE_S)
            self.cds.finish(name, exited_cleanly=srv.proc.returncode not in (None, -signal.SIGKILL))
        super().stop_nodes()

    def node_load(self) -> Load:
        return Load(memory=driver_memory() + JVM_OVERHEAD, tasks=1, files=1)

    def expect_ops(self, ops: frozenset[str]) -> None:
        self.warm_ops = ops

    def start_nodes(self, n: int, storage: Storage, logs_dir: Path, timeout: float, first: int = 1) -> list[Node]:
        self.jarset(storage)  # the jar fetch, once, before any JVM starts
        self._t0 = time.monotonic()
        return super().start_nodes(n, storage, logs_dir, timeout, first)

    def _after_start(self, nodes: list[Node], logs_dir: Path) -> None:
        t1 = time.monotonic()
        self._warm(nodes, logs_dir)
        # For bench-startup: answering vs warmed.
        self.last_start = {"ready_s": t1 - self._t0, "warmup_s": time.monotonic() - t1}

    # restart_node (the base's) runs no warm-up: a restarted cluster is slow
    # over its first ops, and the run should see that, as it sees the outage.

    def _cleanup(self) -> None:
        for d in self.workdirs.values():
            shutil.rmtree(d, ignore_errors=True)
        self.workdirs.clear()

    def client_config(
        self, node: Node, process: int | str, storage: Storage, table_uri: str, timeout: float
    ) -> ClientConfig:
        return ClientConfig(
            engine=self.name,
            node=node.name,
            process=process,
            table_uri=spark_uri(table_uri),
            url=node.url,
            timeout=timeout,
            python=self.env.python if self.env is not None else None,
        )

    def versions(self) -> dict[str, Any]:
        v = self.spark_versions()
        out: dict[str, Any] = {"pyspark": v.spark, "delta-spark": v.delta}
        if self.jars is not None:
            out["spark-jars"] = ", ".join(sorted(p.name for p in self.jars.jars))
        return out
