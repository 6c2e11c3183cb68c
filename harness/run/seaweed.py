"""SeaweedFS (`weed mini`) as an embedded S3 store whose data lives in the run folder.

`weed mini` runs master, volume server, filer, S3 gateway and admin in one
process; it was ready in ~2 s here where `weed server -s3` took ~9 s to its
first PUT and did not exit on SIGTERM within 10 s. Its data directory sits
in the run folder, so a run whose harness was SIGKILLed still holds its
table: `recover_table` starts a server on that directory and copies the
table out for `delta-jepsen check`.

It runs without S3 identities: then SeaweedFS accepts any access key id and
any signature, which is what the harness needs: per-client key ids that
the fault proxy tells apart, and a proxy that may strip a signed
`If-None-Match` header without the store refusing the signature.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, owned_tempdir, venv_bin
from harness.core.storage import RECOVERED_REPLACED_COMMITS
from harness.deltalog import copy_table
from harness.run.weed_metalog import replaced_commits, seconds_since

DATA_DIR = "seaweedfs"  # inside the run folder
LOOPBACK = "127.0.0.1"
# weed's own default: a gRPC port is its HTTP port + 10000. Its plugin worker
# dials the admin server there whatever -admin.port.grpc says.
GRPC_OFFSET = 10000
READY_LINE = r"S3 Endpoint:\s+http://127\.0\.0\.1:(\d+)"


@dataclass(frozen=True)
class WeedPorts:
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int
    admin: int

    @classmethod
    def pick(cls) -> WeedPorts:
        """Free loopback ports, all distinct: each socket stays bound until
        every port is chosen, and the admin port has its gRPC port
        (admin + 10000) free as well."""
        with ExitStack() as held:

            def bind(port: int = 0) -> int | None:
                s = held.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                try:
                    s.bind((LOOPBACK, port))
                except OSError:
                    return None
                return int(s.getsockname()[1])

            plain = [bind() for _ in range(8)]
            admin = None
            for _ in range(200):
                candidate = bind()
                if candidate is not None and candidate + GRPC_OFFSET < 65536 and bind(candidate + GRPC_OFFSET):
                    admin = candidate
                    break
            if admin is None or None in plain:
                raise HarnessError("seaweedfs: no free loopback ports")
            return cls(*(p for p in plain if p is not None), admin=admin)

    def argv(self) -> list[str]:
        return [
            f"-master.port={self.master}",
            f"-master.port.grpc={self.master_grpc}",
            f"-volume.port={self.volume}",
            f"-volume.port.grpc={self.volume_grpc}",
            f"-filer.port={self.filer}",
            f"-filer.port.grpc={self.filer_grpc}",
            f"-s3.port={self.s3}",
            f"-s3.port.grpc={self.s3_grpc}",
            f"-admin.port={self.admin}",
            f"-admin.port.grpc={self.admin + GRPC_OFFSET}",
        ]


def sweep_dead_sockets(root: Path = Path("/tmp")) -> None:
    """weed puts its gRPC unix sockets in /tmp whatever TMPDIR says, and a
    SIGKILLed weed leaves them there; one that nobody listens on is dead."""
    for path in root.glob("seaweedfs-*-grpc-*.sock"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(0.2)
            try:
                s.connect(str(path))
            except ConnectionRefusedError:
                path.unlink(missing_ok=True)
            except OSError:
                pass  # not ours to judge (permissions, a slow listener)


class WeedServer:
    """One `weed mini` process on `data_dir`, every port on 127.0.0.1."""

    def __init__(self, data_dir: str | os.PathLike[str], log_path: str | os.PathLike[str], bucket: str):
        self.data_dir = Path(data_dir).resolve()
        self.log_path = Path(log_path)
        self.bucket = bucket
        self.ports = WeedPorts.pick()
        self.endpoint = f"http://{LOOPBACK}:{self.ports.s3}"
        self.proc: ManagedProcess | None = None
        self._scratch: str | None = None

    def argv(self) -> list[str]:
        assert self._scratch is not None
        return [
            venv_bin("weed"),
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={LOOPBACK}",
            f"-ip.bind={LOOPBACK}",
            *self.ports.argv(),
            # Unix sockets default to /tmp/seaweedfs-*.sock: a SIGKILLed
            # server would leave them behind; the scratch dir is swept.
            f"-filer.localSocket={self._scratch}/filer.sock",
            f"-s3.localSocket={self._scratch}/s3.sock",
            # What the harness does not use stays off (the admin server
            # cannot be turned off in mini mode; its UI can).
            "-webdav=false",
            "-admin.ui=false",
            "-s3.iam=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",
            f"-bucket={self.bucket}",
        ]

    def _env(self) -> dict[str, str]:
        # Not the harness's environment: weed mini turns AWS_ACCESS_KEY_ID /
        # AWS_SECRET_ACCESS_KEY into an identity (auth on, per-client keys
        # refused), and reads config files from $HOME/.seaweedfs and ".".
        assert self._scratch is not None
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self._scratch, "TMPDIR": self._scratch}

    def filer_address(self) -> str:
        """The filer as weed's own tools name it: host:port.grpcport."""
        return f"{LOOPBACK}:{self.ports.filer}.{self.ports.filer_grpc}"

    def start(self, key: str, secret: str, timeout: float = 30) -> WeedServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        sweep_dead_sockets()
        self._scratch = owned_tempdir("dj-weed-")
        self.proc = ManagedProcess("seaweedfs", self.argv(), self.log_path, env=self._env(), cwd=self._scratch)
        try:
            self.proc.start()
            deadline = time.monotonic() + timeout
            self.proc.wait_for_log(READY_LINE, timeout)
            self._wait_for_bucket(key, secret, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_bucket(self, key: str, secret: str, deadline: float) -> None:
        """Ready = the S3 endpoint answers and the bucket exists (weed mini
        creates it a moment after it says it is up)."""
        import boto3
        from botocore.config import Config

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            region_name="us-east-1",
            config=Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 1}),
        )
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if not self.proc.alive():
                raise HarnessError(f"seaweedfs exited before it was ready (log: {self.log_path})")
            try:
                client.head_bucket(Bucket=self.bucket)
                return
            except Exception as e:  # not up yet, or the bucket not created yet
                last = e
            time.sleep(0.05)
        raise HarnessError(f"seaweedfs: bucket {self.bucket} not ready ({last}; log: {self.log_path})")

    def stop(self) -> None:
        """SIGTERM, SIGKILL after 2 s. weed mini shuts its parts down one by
        one in about 1.3 s, but after heavy racing it can hang past "S3
        stopped"; by then the run's table has been copied out, and its data
        on disk is what `check` recovers from anyway."""
        try:
            if self.proc is not None:
                self.proc.stop(grace=2.0)
        finally:
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
                self._scratch = None
            sweep_dead_sockets()  # when it had to be SIGKILLed


def recover_table(run_dir: Path, dest: Path, log: Any = print) -> int | None:
    """A run on SeaweedFS whose harness died before it copied the table out:
    start weed on the run's data directory, copy the table into `dest`,
    stop. Returns the object count, or None when the run has no such data.

    Only reads: the table is copied, nothing is written to the bucket."""
    import secrets

    try:
        spec = json.loads((run_dir / "spec.json").read_text())
    except (OSError, ValueError):
        return None
    storage = spec.get("storage") or {}
    if storage.get("kind") != "seaweedfs":
        return None
    data_dir = run_dir / storage.get("data_dir", DATA_DIR)
    table_uri = spec.get("table_uri", "")
    if not data_dir.is_dir() or not table_uri.startswith("s3://"):
        return None
    log(f"no table copy in {run_dir}: reading it from the run's SeaweedFS data ({data_dir})")
    server = WeedServer(data_dir, run_dir / "logs" / "seaweedfs-recover.log", storage.get("bucket", "delta-jepsen"))
    key, secret = "dj-checker", secrets.token_urlsafe(24)
    server.start(key, secret)
    try:
        _keep_replaced_commits(server, table_uri, run_dir)
        return copy_table(
            table_uri,
            dest,
            {
                "endpoint_url": server.endpoint,
                "aws_access_key_id": key,
                "aws_secret_access_key": secret,
                "region_name": storage.get("region", "us-east-1"),
            },
        )
    finally:
        server.stop()


def _keep_replaced_commits(server: WeedServer, table_uri: str, run_dir: Path) -> None:
    """What the store's own log shows of the table's commit files replaced
    (harness.run.weed_metalog), kept where `check` reads it for a run that
    wrote no run.json."""
    doc = replaced_commits(server.filer_address(), table_uri, seconds_since(run_dir / "spec.json"))
    path = run_dir / RECOVERED_REPLACED_COMMITS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
