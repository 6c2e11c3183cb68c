"""What a run is: the spec (everything needed to re-run it, as the command
line gives it) and the test plan composed from it once (Jepsen's test map):
the workload, the engines, the nemeses, the table and the checkers. The
runner, the workload matrix and the benchmarks consume the plan; spec.json
records it, so `check` needs only the run folder."""

from __future__ import annotations

import dataclasses
import platform
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from checkers import checker_fn
from checkers.exception_classes import NAME as EXCEPTION_CLASSES
from checkers.liveness import NAME as LIVENESS
from harness.core.capacity import CLIENT_WORKER, EMBEDDED_STORE, HARNESS, Load, check_fits
from harness.core.contract import AUTO_NODES, default_nodes, engine_nodes
from harness.core.errors import HarnessError
from harness.core.isolation import LEVELS
from harness.core.table import TableSpec
from harness.engines import make_engine, parse_engine_releases
from harness.engines.base import Engine
from harness.engines.deltaspark import (
    AUTO,
    COORDINATED,
    LEGACY_NAMES,
    LOG_STORES,
    SINGLE_DRIVER,
    has_commit_coordinator,
)
from harness.run.storage import STORAGE_KINDS
from nemeses import make_nemeses
from nemeses.base import Nemesis
from workloads import make_workload
from workloads.base import Workload


@dataclass
class RunSpec:
    workload: str = "append"
    engine: str = "delta-spark"
    storage: str = "s3"
    # Engine nodes; AUTO_NODES resolves to default_nodes(engine, storage).
    nodes: int = AUTO_NODES
    concurrency: int = 4
    time_limit: float = 30.0
    seed: int = 0
    op_timeout: float = 30.0
    isolation: str | None = None
    nemesis: list[str] = field(default_factory=list)
    # Seconds per nemesis cycle: a quiet half, then a fault for the other half.
    nemesis_interval: float = 10.0
    local_root: str | None = None
    s3_endpoint: str | None = None
    s3_bucket: str | None = None
    # The S3 fault proxy between clients and store (harness/s3proxy.py).
    s3_proxy: bool = False
    # delta-spark's commit protocol on S3 (harness.engines.deltaspark.LOG_STORES),
    # or "auto": TestPlan.build resolves it (resolve_log_store).
    log_store: str = AUTO
    # A directory of jars for delta-spark instead of Maven Central (not part
    # of the re-run command: a path of one machine).
    spark_jars: str | None = None
    # --engine spark-connect: the endpoints, comma-separated sc://host:port.
    spark_remote: str | None = None
    # Exception-class findings (a conflict with no or a wrong E-class) fail
    # the run instead of being reported beside it.
    strict_exceptions: bool = False

    def __post_init__(self) -> None:
        if self.nodes == AUTO_NODES:
            self.nodes = default_nodes(self.engine, self.storage)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def cli_args(self) -> list[str]:
        """The `run` arguments that give this spec on any machine (no path of
        this one: --spark-jars, --local-root and --s3-endpoint stay out)."""
        args = [
            "--workload",
            self.workload,
            "--engine",
            self.engine,
            "--storage",
            self.storage,
            "--nodes",
            str(self.nodes),
            "--concurrency",
            str(self.concurrency),
            "--time-limit",
            f"{self.time_limit:g}",
            "--seed",
            str(self.seed),
            "--op-timeout",
            f"{self.op_timeout:g}",
        ]
        if self.isolation:
            args += ["--isolation", self.isolation]
        if self.nemesis:
            args += ["--nemesis", ",".join(self.nemesis), "--nemesis-interval", f"{self.nemesis_interval:g}"]
        if self.s3_bucket:
            args += ["--s3-bucket", self.s3_bucket]
        if self.s3_proxy:
            args += ["--s3-proxy"]
        if self.log_store not in (AUTO, resolve_log_store(dataclasses.replace(self, log_store=AUTO))):
            args += ["--log-store", self.log_store]
        if self.spark_remote:
            args += ["--spark-remote", self.spark_remote]
        if self.strict_exceptions:
            args += ["--strict-exceptions"]
        return args

    def repro_command(self) -> str:
        """The command that re-runs this test with the same generator seed."""
        return shlex.join(["delta-jepsen", "run", *self.cli_args()])


# Engine and storage pairs known not to work, and why: refused before
# anything starts rather than failing mid-run as if the engine were at fault.
_UNSUPPORTED_STORAGE: dict[tuple[str, str], str] = {}
# Pairs that work only through the fault proxy (no fault armed). SeaweedFS
# without S3 logins (how the harness runs it, so any per-client key id
# works) refuses the chunk-signed uploads Hadoop's S3A client sends over
# http (400 "Signed request requires setting up SeaweedFS S3
# authentication"); the proxy in front of it decodes them into plain bodies.
_NEEDS_PROXY = {("delta-spark", "seaweedfs")}


def resolve_log_store(spec: RunSpec) -> str:
    """The commit protocol delta-spark uses in this run. "auto" is
    coordinated commits when more than one delta-spark cluster writes the
    table on S3 (the single-driver LogStore's mutual exclusion holds inside
    one JVM only), and the single-driver LogStore otherwise."""
    name = LEGACY_NAMES.get(spec.log_store, spec.log_store)
    if name != AUTO:
        return name
    if spec.storage == "local":
        return SINGLE_DRIVER
    releases = parse_engine_releases(spec.engine)
    clusters = engine_nodes([e.name for e in releases], spec.nodes, "delta-spark")
    # A release without the coordinator (before 4.0) has no multi-cluster
    # protocol here (its S3DynamoDBLogStore jar is not on Maven Central): the
    # run goes outside the single-driver contract and says so.
    coordinator = all(has_commit_coordinator(e.release) for e in releases if e.name == "delta-spark")
    return COORDINATED if clusters > 1 and coordinator else SINGLE_DRIVER


def run_load(engines: list[Engine], nodes: int, concurrency: int, storage: str) -> Load:
    """What a run takes of the machine (harness.core.capacity): its
    controller, the store it starts, its nodes as the runner deals them to
    the engines, and a client worker per slot."""
    names = [e.name for e in engines]
    load = HARNESS + CLIENT_WORKER * concurrency
    if storage not in ("local", "external-s3"):
        load += EMBEDDED_STORE
    for e in engines:
        load += e.node_load() * engine_nodes(names, nodes, e.name)
    return load


def heaviest_run(engines: list[str], nodes: int, concurrency: int, storage: str) -> Load:
    """The load of the most memory-hungry of one such run per engine (for
    commands that run several, one engine each)."""
    runs = (
        run_load([make_engine(er.name, er.release)], nodes, concurrency, storage)
        for er in (parse_engine_releases(e)[0] for e in engines)
    )
    return max(runs, key=lambda load: load.memory)


@dataclass
class TestPlan:
    """One run, composed once from its spec: every part checked before
    anything starts (bad input exits 2 with nothing started)."""

    spec: RunSpec
    workload: Workload
    engines: list[Engine]  # a mixed run lists several; the first creates the table
    nemeses: list[Nemesis]
    table: TableSpec
    checkers: list[str]  # the workload's, and exception-classes for every run
    related_tables: list[str]  # globs of the other tables the workload writes

    __test__ = False  # a plan, not a pytest class

    @classmethod
    def build(cls, spec: RunSpec, progress: Callable[[str], None] | None = None) -> TestPlan:
        if spec.isolation is not None and spec.isolation not in LEVELS:
            raise HarnessError(f"unknown isolation level {spec.isolation!r}; valid: {', '.join(LEVELS)}")
        if spec.storage not in STORAGE_KINDS:
            raise HarnessError(f"unknown storage {spec.storage!r}; valid: {', '.join(STORAGE_KINDS)}")
        if spec.log_store not in (*LOG_STORES, AUTO, *LEGACY_NAMES):
            raise HarnessError(f"unknown --log-store {spec.log_store!r}; valid: {', '.join((AUTO, *LOG_STORES))}")
        spec = dataclasses.replace(spec, log_store=resolve_log_store(spec))
        if spec.spark_jars and not Path(spec.spark_jars).is_dir():
            raise HarnessError(f"--spark-jars {spec.spark_jars}: no such directory")
        workload = make_workload(spec.workload, spec.seed, spec.isolation)
        for name in workload.checkers:
            checker_fn(name)  # a checker of your own that cannot load: bad input, before anything starts
        remotes = spec.spark_remote.split(",") if spec.spark_remote else None
        engines = [
            make_engine(
                e.name, e.release, log_store=spec.log_store, jar_dir=spec.spark_jars, progress=progress, remotes=remotes
            )
            for e in parse_engine_releases(spec.engine)
        ]
        for e in engines:
            why = _UNSUPPORTED_STORAGE.get((e.name, spec.storage))
            if why:
                raise HarnessError(f"{e.name} cannot run on --storage {spec.storage}: {why}")
            if (e.name, spec.storage) in _NEEDS_PROXY and not spec.s3_proxy:
                spec = dataclasses.replace(spec, s3_proxy=True)
        check_fits("--nodes", spec.nodes, lambda n: run_load(engines, n, 1, spec.storage))
        check_fits("--concurrency", spec.concurrency, lambda n: run_load(engines, spec.nodes, n, spec.storage))
        return cls(
            spec=spec,
            workload=workload,
            engines=engines,
            nemeses=make_nemeses(spec.nemesis, spec.storage),
            table=workload.table(),
            checkers=[*workload.checkers, EXCEPTION_CLASSES, LIVENESS],
            related_tables=list(workload.related_tables),
        )

    @property
    def needs_coordinator(self) -> bool:
        """Whether delta-spark commits through a commit coordinator, whose
        DynamoDB the storage must then provide."""
        return (
            self.spec.log_store == COORDINATED
            and self.spec.storage != "local"
            and any(e.name == "delta-spark" for e in self.engines)
        )

    @property
    def engine(self) -> Engine:
        """The engine that creates the table."""
        return self.engines[0]

    def to_json(self) -> dict[str, Any]:
        """The plan's part of spec.json (the runner adds what it started)."""
        return {
            "spec": self.spec.to_json(),
            "repro": self.spec.repro_command(),
            "table": self.table.to_json(),
            "checkers": list(self.checkers),
            "related_tables": list(self.related_tables),
            "engine": {"name": self.spec.engine, "capabilities": self.engine.capabilities.to_json()},
            "engines": {e.name: {"capabilities": e.capabilities.to_json()} for e in self.engines},
        }


def package_versions(extra: dict[str, str] | None = None) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("delta-jepsen", "pyarrow", "boto3", "moto"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    out.update(extra or {})
    return out
