"""The test spec: everything needed to re-run a test, written to spec.json."""

from __future__ import annotations

import platform
import shlex
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class RunSpec:
    workload: str = "append"
    engine: str = "delta-spark"
    storage: str = "s3"
    nodes: int = 2
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
    # delta-spark's commit protocol on S3 (harness.engines.deltaspark.LOG_STORES).
    log_store: str = "default"
    # A directory of jars for delta-spark instead of Maven Central (not part
    # of the re-run command: a path of one machine).
    spark_jars: str | None = None
    # --engine spark-connect: the endpoints, comma-separated sc://host:port.
    spark_remote: str | None = None
    # Exception-class findings (a conflict with no or a wrong E-class) fail
    # the run instead of being reported beside it.
    strict_exceptions: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def repro_command(self) -> str:
        """The command that re-runs this test with the same generator seed."""
        args = [
            "delta-jepsen",
            "run",
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
        if self.log_store != "default":
            args += ["--log-store", self.log_store]
        if self.spark_remote:
            args += ["--spark-remote", self.spark_remote]
        if self.strict_exceptions:
            args += ["--strict-exceptions"]
        return shlex.join(args)


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
