"""Engines under test, by name. Clients are imported lazily in workers."""

from __future__ import annotations

from typing import Any

from harness.engines.base import Engine, EngineClient, ClientConfig
from harness.core.errors import HarnessError

ENGINE_NAMES = ("delta-spark", "sail", "delta-rs", "spark-connect")
# Engines that start nothing and need endpoints given on the command line:
# commands with no such option (matrix, "all") leave them out.
REMOTE_ENGINES = ("spark-connect",)


def parse_engine_list(spec: str) -> tuple[str, ...]:
    """`delta-spark` or a mixed-engine list `delta-spark,delta-rs`: clients of every listed
    engine share the one table (the first listed creates it)."""
    names = tuple(n.strip() for n in spec.split(",") if n.strip())
    bad = [n for n in names if n not in ENGINE_NAMES]
    if not names or bad:
        raise HarnessError(f"unknown engine {(bad[0] if bad else spec)!r}; valid: {', '.join(ENGINE_NAMES)} "
                           "(or several, comma-separated)")
    if len(set(names)) != len(names):
        raise HarnessError(f"engine listed twice in {spec!r}")
    return names


def make_engine(name: str, **options: Any) -> Engine:
    """`options` reach the engines that take them (delta-spark: log_store,
    jar_dir, progress; spark-connect: remotes); the others ignore them."""
    if name == "delta-spark":
        from harness.engines.deltaspark import DeltaSparkEngine

        return DeltaSparkEngine(**{k: v for k, v in options.items() if k in ("log_store", "jar_dir", "progress")})
    if name == "sail":
        from harness.engines.sail import SailEngine

        return SailEngine()
    if name == "delta-rs":
        from harness.engines.deltars import DeltaRsEngine

        return DeltaRsEngine()
    if name == "spark-connect":
        from harness.engines.remote import SparkConnectRemoteEngine

        return SparkConnectRemoteEngine(options.get("remotes"))
    raise HarnessError(f"unknown engine {name!r}; valid: {', '.join(ENGINE_NAMES)}")


def make_client(config: ClientConfig) -> EngineClient:
    if config.engine == "delta-spark":
        from harness.engines.deltaspark import DELTA_SPARK_CAPABILITIES
        from harness.engines.spark import DeltaSparkClient

        return DeltaSparkClient(config, "delta-spark", DELTA_SPARK_CAPABILITIES)
    if config.engine == "sail":
        from harness.engines.sail import SAIL_CAPABILITIES
        from harness.engines.spark import SparkConnectClient

        return SparkConnectClient(config, "sail", SAIL_CAPABILITIES)
    if config.engine == "delta-rs":
        from harness.engines.deltars import DeltaRsClient

        return DeltaRsClient(config)
    if config.engine == "spark-connect":
        from harness.engines.remote import CAPABILITIES
        from harness.engines.spark import DeltaSparkClient

        return DeltaSparkClient(config, "spark-connect", CAPABILITIES)
    raise HarnessError(f"unknown engine {config.engine!r}; valid: {', '.join(ENGINE_NAMES)}")
