"""Engines under test, by name. Clients are imported lazily in workers."""

from __future__ import annotations

from harness.engines.base import Engine, EngineClient, ClientConfig
from harness.procs import HarnessError

ENGINE_NAMES = ("sail", "delta-rs")


def make_engine(name: str) -> Engine:
    if name == "sail":
        from harness.engines.sail import SailEngine

        return SailEngine()
    if name == "delta-rs":
        from harness.engines.deltars import DeltaRsEngine

        return DeltaRsEngine()
    raise HarnessError(f"unknown engine {name!r}; valid: {', '.join(ENGINE_NAMES)}")


def make_client(config: ClientConfig) -> EngineClient:
    if config.engine == "sail":
        from harness.engines.sail import SAIL_CAPABILITIES
        from harness.engines.spark import SparkConnectClient

        return SparkConnectClient(config, "sail", SAIL_CAPABILITIES)
    if config.engine == "delta-rs":
        from harness.engines.deltars import DeltaRsClient

        return DeltaRsClient(config)
    raise HarnessError(f"unknown engine {config.engine!r}; valid: {', '.join(ENGINE_NAMES)}")
