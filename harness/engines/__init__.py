"""Engines under test, by name. Their heavy libraries (pyspark, deltalake)
load only when a client opens, inside the engine modules."""

from __future__ import annotations

from typing import Any

from harness.core.errors import HarnessError
from harness.engines.base import ClientConfig, Engine, EngineClient
from harness.engines.deltars import DeltaRsClient, DeltaRsEngine
from harness.engines.deltaspark import DeltaSparkEngine
from harness.engines.deltaspark import installed_capabilities as delta_spark_capabilities
from harness.engines.releases import EngineRelease, parse_engine_release
from harness.engines.remote import CAPABILITIES as SPARK_CONNECT_CAPABILITIES
from harness.engines.remote import SparkConnectRemoteEngine
from harness.engines.sail import SailEngine
from harness.engines.sail import installed_capabilities as sail_capabilities
from harness.engines.spark import DeltaSparkClient, SparkConnectClient

ENGINE_NAMES = ("delta-spark", "sail", "delta-rs", "spark-connect")
# Engines that start nothing and need endpoints given on the command line:
# commands with no such option (matrix, "all") leave them out.
REMOTE_ENGINES = ("spark-connect",)


def parse_engine_releases(spec: str) -> tuple[EngineRelease, ...]:
    """`delta-spark`, `delta-rs==0.15.3`, or a mixed-engine list
    `delta-spark,delta-rs`: clients of every listed engine share the one
    table (the first listed creates it)."""
    entries = [e for e in spec.split(",") if e.strip()]
    if not entries:
        raise HarnessError(f"unknown engine {spec!r}; valid: {', '.join(ENGINE_NAMES)} (or several, comma-separated)")
    out = tuple(parse_engine_release(e, ENGINE_NAMES) for e in entries)
    if len({e.name for e in out}) != len(out):
        raise HarnessError(f"engine listed twice in {spec!r}")
    return out


def parse_engine_list(spec: str) -> tuple[str, ...]:
    """The engine names of `spec` (see parse_engine_releases)."""
    return tuple(e.name for e in parse_engine_releases(spec))


def make_engine(name: str, release: str | None = None, **options: Any) -> Engine:
    """`options` reach the engines that take them (delta-spark: log_store,
    jar_dir, progress; spark-connect: remotes; delta-rs: progress); the
    others ignore them. `release`: one other than the pinned one, where the
    engine can run it (harness.engines.releases)."""
    if name == "delta-spark":
        opts = {k: v for k, v in options.items() if k in ("log_store", "jar_dir", "progress")}
        return DeltaSparkEngine(**opts, release=release)
    if name == "sail":
        return SailEngine(release, progress=options.get("progress"))
    if name == "delta-rs":
        return DeltaRsEngine(release, progress=options.get("progress"))
    if name == "spark-connect":
        return SparkConnectRemoteEngine(options.get("remotes"))
    raise HarnessError(f"unknown engine {name!r}; valid: {', '.join(ENGINE_NAMES)}")


def make_client(config: ClientConfig) -> EngineClient:
    if config.engine == "delta-spark":
        return DeltaSparkClient(config, "delta-spark", delta_spark_capabilities())
    if config.engine == "sail":
        return SparkConnectClient(config, "sail", sail_capabilities())
    if config.engine == "delta-rs":
        return DeltaRsClient(config)
    if config.engine == "spark-connect":
        return DeltaSparkClient(config, "spark-connect", SPARK_CONNECT_CAPABILITIES)
    raise HarnessError(f"unknown engine {config.engine!r}; valid: {', '.join(ENGINE_NAMES)}")
