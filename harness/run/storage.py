"""Where the table lives: a local directory, embedded S3 (moto or SeaweedFS), or external S3.

A storage hands out, per client, the settings an engine needs (environment
for Sail nodes, storage options for delta-rs) and, for the harness's own log
reader, boto3 settings. Each client gets its own access key id so that the
fault proxy (harness/s3proxy/) can tell clients apart: `dj-<node>` for a
Sail server, `dj-<node>-<process>` for a delta-rs client; the secret is
never written to results. With `proxy=True` the S3 storages start the proxy
and hand clients its endpoint, while the harness's own reader talks to the
server directly; `storage.proxy` then steers it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, python_argv
from harness.core.storage import Storage
from harness.run.seaweed import DATA_DIR as SEAWEED_DATA_DIR
from harness.run.seaweed import WeedServer
from harness.run.weed_metalog import replaced_commits
from harness.s3proxy.client import ProxyProcess, S3ProxyClient, start_proxy

STORAGE_KINDS = ("s3", "local", "external-s3", "seaweedfs")
EMBEDDED_SECRET = "delta-jepsen-secret"  # moto accepts any credentials
EMBEDDED_BUCKET = "delta-jepsen"
DEFAULT_REGION = "us-east-1"
# What clients sign with when the proxy re-signs for an external endpoint.
PROXY_CLIENT_SECRET = "delta-jepsen-proxy"


def start_moto(
    name: str,
    log_path: str | os.PathLike[str],
    start_timeout: float = 30,
    env: dict[str, str] | None = None,
    argv: list[str] | None = None,
) -> tuple[ManagedProcess, int]:
    """moto's server (harness.run.moto_main, or `argv`) on a free loopback
    port, `env` over this process's environment; the process and its port."""
    server = ManagedProcess(
        name,
        argv or python_argv("harness.run.moto_main", "-H", "127.0.0.1", "-p", "0"),
        log_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    ).start()
    try:
        m = server.wait_for_log(r"Running on http://127\.0\.0\.1:(\d+)", start_timeout)
    except BaseException:
        server.stop()
        raise
    return server, int(m.group(1))


class LocalStorage(Storage):
    kind = "local"

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    def table_uri(self, name: str) -> str:
        return str(self.root / name)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "root": str(self.root)}

    def stop(self) -> None:
        """A directory: nothing was started."""


class _S3(Storage):
    endpoint: str
    bucket: str
    prefix: str
    region: str

    def table_uri(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{name}"

    _proxy_proc: ProxyProcess | None = None
    _proxy_stats: Path | None = None

    @property
    def _external_direct(self) -> bool:
        """Clients sign with the user's own credentials (no re-signing proxy)."""
        return self.kind == "external-s3" and self._proxy_proc is None

    def _key(self, client: str, node: str | None = None) -> str:
        if self._external_direct:
            return os.environ.get("AWS_ACCESS_KEY_ID", "")
        return f"dj-{node}-{client}" if node and node != client else f"dj-{client}"

    def _secret(self) -> str:
        if self._external_direct:
            return os.environ.get("AWS_SECRET_ACCESS_KEY", "")
        return EMBEDDED_SECRET if self.kind == "s3" else PROXY_CLIENT_SECRET

    def client_env(self, client: str, node: str | None = None) -> dict[str, str]:
        endpoint = self._client_endpoint()
        env = {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": self._key(client, node),
            "AWS_SECRET_ACCESS_KEY": self._secret(),
            "AWS_REGION": self.region,
        }
        if endpoint.startswith("http://"):
            env["AWS_ALLOW_HTTP"] = "true"
        if self._external_direct and os.environ.get("AWS_SESSION_TOKEN"):
            env["AWS_SESSION_TOKEN"] = os.environ["AWS_SESSION_TOKEN"]
        return env

    def deltars_options(self, client: str, node: str | None = None) -> dict[str, str]:
        return dict(self.client_env(client, node))

    def _client_endpoint(self) -> str:
        return self._proxy_proc.endpoint if self._proxy_proc is not None else self.endpoint

    # A moto server for DynamoDB alone, where the store serves no DynamoDB
    # and a commit coordinator needs one (start_coordinator).
    _dynamodb: ManagedProcess | None = None
    _dynamodb_endpoint: str | None = None

    def start_coordinator(self, log_path: str | os.PathLike[str], start_timeout: float = 30) -> None:
        """A DynamoDB endpoint for commit coordinators: an embedded moto
        of its own, on loopback, stopped with the storage."""
        if self._dynamodb is not None:
            return
        self._dynamodb, port = start_moto("moto_server (DynamoDB)", log_path, start_timeout)
        self._dynamodb_endpoint = f"http://127.0.0.1:{port}"

    def coordinator_endpoint(self) -> str | None:
        return self._dynamodb_endpoint

    def coordinator_reader_options(self) -> dict[str, str] | None:
        """boto3 settings for the harness's own reads of the coordinator's
        DynamoDB (straight to the server, never through the fault proxy)."""
        endpoint = self._dynamodb_endpoint
        if endpoint is None:
            return None
        return {
            "endpoint_url": endpoint,
            "aws_access_key_id": self._key("checker"),
            "aws_secret_access_key": EMBEDDED_SECRET,
            "region_name": self.region,
        }

    def _stop_coordinator(self) -> None:
        if self._dynamodb is not None:
            self._dynamodb.stop()

    def start_proxy(self, log_path: str | os.PathLike[str], seed: int | None = None) -> S3ProxyClient:
        """The fault proxy between the clients and this endpoint. Its stats
        land beside its log when the storage stops."""
        resign = None
        if self.kind == "external-s3":
            if not self.endpoint.startswith("http://"):
                raise HarnessError("the S3 fault proxy needs an http:// endpoint")
            resign = (
                os.environ.get("AWS_ACCESS_KEY_ID", ""),
                os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
                os.environ.get("AWS_SESSION_TOKEN"),
            )
        self._proxy_proc = start_proxy(
            self.endpoint, log_path, seed=seed, resign_credentials=resign, dechunk=self.kind == "seaweedfs"
        )
        self._proxy_stats = Path(log_path).with_name("s3proxy-stats.json")
        self.proxy = self._proxy_proc.control
        return self.proxy

    def _stop_proxy(self) -> None:
        if self._proxy_proc is None:
            return
        try:
            if self.proxy is not None and self._proxy_stats is not None:
                self._proxy_stats.write_text(json.dumps(self.proxy.stats(), indent=2) + "\n")
        except (HarnessError, OSError):
            pass  # stats are a diagnostic; the proxy may already be gone
        finally:
            self._proxy_proc.stop()

    def stop(self) -> None:
        try:
            self._stop_proxy()
        finally:
            self._stop_coordinator()

    def reader_options(self) -> dict[str, str]:
        opts = {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": os.environ.get("AWS_ACCESS_KEY_ID", "")
            if self.kind == "external-s3"
            else self._key("checker"),
            "aws_secret_access_key": os.environ.get("AWS_SECRET_ACCESS_KEY", "")
            if self.kind == "external-s3"
            else EMBEDDED_SECRET,
            "region_name": self.region,
        }
        if self.kind == "external-s3" and os.environ.get("AWS_SESSION_TOKEN"):
            opts["aws_session_token"] = os.environ["AWS_SESSION_TOKEN"]
        return opts

    def boto3_client(self) -> Any:
        import boto3
        from botocore.config import Config

        opts = self.reader_options()
        return boto3.client(
            "s3",
            config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 3}),
            **opts,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "endpoint": self.endpoint,
            "bucket": self.bucket,
            "prefix": self.prefix,
            "region": self.region,
            "proxy": self._proxy_proc is not None,
        }


class _Embedded(_S3):
    """A store the harness starts itself (`server`) and stops after the run."""

    server: Any

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self.server.stop()

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        d["endpoint"] = "embedded"  # the port is per run; re-runs start their own
        return d


class EmbeddedS3(_Embedded):
    """moto_server in its own process on a free loopback port.

    Out of process on purpose: an in-process ThreadedMotoServer stalled for
    minutes under concurrent requests from the Rust S3 clients.
    """

    kind = "s3"

    def __init__(self, log_path: str | os.PathLike[str], prefix: str = "", start_timeout: float = 30):
        self.bucket = EMBEDDED_BUCKET
        self.prefix = prefix
        self.region = DEFAULT_REGION
        self.server, self.port = start_moto("moto_server", log_path, start_timeout)
        try:
            self.endpoint = f"http://127.0.0.1:{self.port}"
            self.boto3_client().create_bucket(Bucket=self.bucket)
        except Exception:
            self.server.stop()
            raise

    def start_coordinator(self, log_path: str | os.PathLike[str], start_timeout: float = 30) -> None:
        """moto serves DynamoDB on the same port as S3: nothing to start."""

    def coordinator_endpoint(self) -> str | None:
        # What the engines reach it at: through the fault proxy when there is one.
        return self._client_endpoint()

    def coordinator_reader_options(self) -> dict[str, str] | None:
        return self.reader_options()


class SeaweedS3(_Embedded):
    """SeaweedFS (`weed mini`, harness/run/seaweed.py) with its data in the
    run folder (`seaweedfs/`): the table outlives a SIGKILLed harness."""

    kind = "seaweedfs"

    def __init__(self, run_dir: Path, prefix: str = "", start_timeout: float = 30):
        self.bucket = EMBEDDED_BUCKET
        self.prefix = prefix
        self.region = DEFAULT_REGION
        # It checks no signature (no identities configured), so any secret
        # does; a per-run one, recorded nowhere, keeps the results free of it.
        self._run_secret = secrets.token_urlsafe(24)
        self.server = WeedServer(run_dir / SEAWEED_DATA_DIR, run_dir / "logs" / "seaweedfs.log", self.bucket)
        self._started = time.time()
        self.server.start(self._key("checker"), self._run_secret, start_timeout)
        self.endpoint = self.server.endpoint

    def replaced_commits(self, table_uri: str) -> dict[str, Any]:
        """The table's commit files a second write replaced, from the filer's
        own metadata log: SeaweedFS was seen to acknowledge two racing
        conditional PUTs of one key, and an engine must not be blamed for
        the commit the store then lost."""
        return replaced_commits(self.server.filer_address(), table_uri, time.time() - self._started)

    def _secret(self) -> str:
        return self._run_secret

    def reader_options(self) -> dict[str, str]:
        return {**super().reader_options(), "aws_secret_access_key": self._run_secret}

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        # Where `delta-jepsen check` finds the table when the harness died
        # before copying it out (relative: the run folder may move).
        d["data_dir"] = SEAWEED_DATA_DIR
        return d


class ExternalS3(_S3):
    """An S3-compatible endpoint the user runs (MinIO, AWS S3, ...)."""

    kind = "external-s3"

    def __init__(self, endpoint: str | None, bucket: str | None, prefix: str = ""):
        endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3")
        bucket = bucket or os.environ.get("DJ_S3_BUCKET")
        if not bucket:
            raise HarnessError("--storage external-s3 needs --s3-bucket (or DJ_S3_BUCKET)")
        if not os.environ.get("AWS_ACCESS_KEY_ID") or not os.environ.get("AWS_SECRET_ACCESS_KEY"):
            raise HarnessError(
                "--storage external-s3 needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment"
            )
        self.endpoint = endpoint or f"https://s3.{os.environ.get('AWS_REGION', DEFAULT_REGION)}.amazonaws.com"
        self.bucket = bucket
        self.prefix = prefix
        self.region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION


def open_storage(
    kind: str,
    run_dir: Path,
    *,
    local_root: str | None = None,
    s3_endpoint: str | None = None,
    s3_bucket: str | None = None,
    prefix: str = "",
    proxy: bool = False,
    proxy_seed: int | None = None,
    coordinator: bool = False,
) -> Storage:
    """`proxy`: put the S3 fault proxy between the clients and the store
    (off by default: runs without S3 faults should not pay for it).
    `coordinator`: a DynamoDB endpoint for a commit coordinator too."""
    if kind == "local":
        if proxy:
            raise HarnessError("the S3 fault proxy needs --storage s3, seaweedfs or external-s3")
        return LocalStorage(local_root or run_dir)
    storage: _S3
    if kind == "s3":
        storage = EmbeddedS3(run_dir / "logs" / "moto.log", prefix=prefix)
    elif kind == "seaweedfs":
        storage = SeaweedS3(run_dir, prefix=prefix)
    elif kind == "external-s3":
        storage = ExternalS3(s3_endpoint, s3_bucket, prefix=prefix)
    else:
        raise HarnessError(f"unknown storage {kind!r}; valid: {', '.join(STORAGE_KINDS)}")
    try:
        if coordinator:
            storage.start_coordinator(run_dir / "logs" / "moto-dynamodb.log")
        if proxy:
            storage.start_proxy(run_dir / "logs" / "s3proxy.log", seed=proxy_seed)
    except BaseException:
        storage.stop()
        raise
    return storage
