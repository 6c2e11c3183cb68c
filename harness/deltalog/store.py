"""Storage: a local directory or an S3 prefix, behind four operations (list
the log, read by name, list everything, read by an add's path), plus the
S3 clients and the process-wide thread pool that reads ahead of need."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from harness.deltalog.names import _SCHEME_RE, LOG_DIR, STAGED_DIR

# Threads for S3 reads: each GET is latency-bound, so many in flight pay off.
_S3_WORKERS = 32

_io_pool_instance: ThreadPoolExecutor | None = None
_io_pool_lock = threading.Lock()


def _io_pool() -> ThreadPoolExecutor:
    """A process-wide pool for reading data files ahead (idle threads cost
    nothing; one pool per log would leak threads in long test sessions)."""
    global _io_pool_instance
    with _io_pool_lock:
        if _io_pool_instance is None:
            _io_pool_instance = ThreadPoolExecutor(_S3_WORKERS, thread_name_prefix="deltalog-io")
        return _io_pool_instance


def _boto_kwargs(storage_options: dict | None) -> dict[str, str]:
    # boto3 names are the contract; delta-rs' upper-case names are accepted
    # too because the harness already holds those for the engines.
    aliases = {
        "endpoint_url": "endpoint_url",
        "aws_endpoint_url": "endpoint_url",
        "aws_endpoint": "endpoint_url",
        "aws_access_key_id": "aws_access_key_id",
        "aws_secret_access_key": "aws_secret_access_key",
        "aws_session_token": "aws_session_token",
        "region_name": "region_name",
        "aws_region": "region_name",
        "aws_default_region": "region_name",
    }
    out: dict[str, str] = {}
    for k, v in (storage_options or {}).items():
        name = aliases.get(k.lower())
        if name and v is not None and name not in out:
            out[name] = str(v)
    return out


# One S3 client per (process, options): building one costs ~0.3 s of CPU
# (boto3 loads its service models per session), more than reading a small
# table's log. Clients are thread-safe; a forked child builds its own.
_S3_CLIENTS: OrderedDict[tuple[int, tuple[tuple[str, str], ...]], Any] = OrderedDict()
_S3_CLIENTS_MAX = 16
_S3_CLIENTS_LOCK = threading.Lock()


def _s3_client(storage_options: dict | None) -> Any:
    kw = _boto_kwargs(storage_options)
    key = (os.getpid(), tuple(sorted(kw.items())))
    with _S3_CLIENTS_LOCK:
        if key in _S3_CLIENTS:
            _S3_CLIENTS.move_to_end(key)
        else:
            _S3_CLIENTS[key] = _new_s3_client(kw)
            while len(_S3_CLIENTS) > _S3_CLIENTS_MAX:
                _S3_CLIENTS.popitem(last=False)
        return _S3_CLIENTS[key]


def _new_s3_client(kw: dict[str, str]) -> Any:
    import boto3  # lazy: local-only use needs no AWS stack
    from botocore.config import Config

    cfg: dict[str, Any] = {
        "connect_timeout": 10,
        "read_timeout": 60,
        "retries": {"max_attempts": 5, "mode": "standard"},
        "max_pool_connections": _S3_WORKERS,
    }
    if "endpoint_url" in kw:
        # Local S3 look-alikes (moto, MinIO) serve path-style only.
        cfg["s3"] = {"addressing_style": "path"}
    return boto3.session.Session().client("s3", config=Config(**cfg), **kw)


def _is_not_found(e: BaseException) -> bool:
    """Whether a read failed because the object is not in the store."""
    if isinstance(e, FileNotFoundError):
        return True
    if isinstance(e, KeyError) and "no table given for this path" in str(e):
        return True  # from_commits: the test built no table for that path
    response = getattr(e, "response", None)  # botocore's ClientError
    if isinstance(response, dict):
        code = str((response.get("Error") or {}).get("Code", ""))
        status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
        return code in ("NoSuchKey", "404", "NotFound") or status == 404
    return False


class _Store:
    remote = False

    def __init__(self, storage_options: dict | None) -> None:
        self._options = storage_options
        self._s3: Any = None

    def s3(self) -> Any:
        if self._s3 is None:
            self._s3 = _s3_client(self._options)
        return self._s3

    def list_log(self) -> list[str]:
        """Names directly inside _delta_log (not in its subdirectories)."""
        raise NotImplementedError

    def list_staged(self) -> list[str]:
        """Names inside _delta_log/_staged_commits (a coordinated-commits
        table's staged commits)."""
        raise NotImplementedError

    def read_rel(self, rel: str) -> bytes:
        """An object by its (decoded) name relative to the table root."""
        raise NotImplementedError

    def list_all(self) -> list[str]:
        """Every object under the table root, relative names."""
        raise NotImplementedError

    def read_path(self, path: str) -> bytes:
        """A data file by its add-action path (relative URI or absolute)."""
        m = _SCHEME_RE.match(path)
        if not m:
            return self.read_rel(unquote(path))
        scheme = m[1].lower()
        u = urlparse(path)
        if scheme == "file":
            return Path(unquote(u.path)).read_bytes()
        if scheme in ("s3", "s3a"):
            obj = self.s3().get_object(Bucket=u.netloc, Key=unquote(u.path.lstrip("/")))
            return obj["Body"].read()
        raise ValueError(f"unsupported URI scheme {scheme!r}")


class _LocalStore(_Store):
    def __init__(self, root: Path, storage_options: dict | None = None) -> None:
        super().__init__(storage_options)
        self.root = root
        self._root_str = str(root)

    def list_log(self) -> list[str]:
        return self._files_in(self.root / LOG_DIR)

    def list_staged(self) -> list[str]:
        return self._files_in(self.root / LOG_DIR / STAGED_DIR)

    @staticmethod
    def _files_in(d: Path) -> list[str]:
        try:
            with os.scandir(d) as it:
                return [e.name for e in it if e.is_file()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read_rel(self, rel: str) -> bytes:
        # os.path.join names the same file as Path's `/` (an absolute rel
        # wins in both) at a fraction of the cost, which counts at 100k+
        # files. On failure Path reads it again, to raise what it raised.
        try:
            with open(os.path.join(self._root_str, rel), "rb") as fh:
                return fh.read()
        except (OSError, ValueError):
            pass
        return (self.root / rel).read_bytes()

    def list_all(self) -> list[str]:
        out = []
        for dirpath, _dirs, files in os.walk(self.root):
            for f in files:
                out.append(os.path.relpath(os.path.join(dirpath, f), self.root))
        return out


class _S3Store(_Store):
    remote = True

    def __init__(self, bucket: str, prefix: str, storage_options: dict | None) -> None:
        super().__init__(storage_options)
        self.bucket = bucket
        self.prefix = prefix.strip("/")

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def _list(self, prefix: str) -> list[str]:
        pages = self.s3().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return [o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", [])]

    def list_log(self) -> list[str]:
        return [n for n in self._list(self._key(LOG_DIR + "/")) if n and "/" not in n]

    def list_staged(self) -> list[str]:
        return [n for n in self._list(self._key(f"{LOG_DIR}/{STAGED_DIR}/")) if n and "/" not in n]

    def read_rel(self, rel: str) -> bytes:
        return self.s3().get_object(Bucket=self.bucket, Key=self._key(rel))["Body"].read()

    def list_all(self) -> list[str]:
        root = self._key("")
        # Without the slash, prefix "t" would also list a sibling table "t2".
        root = root if root.endswith("/") or not root else root + "/"
        return [n for n in self._list(root) if n and not n.endswith("/")]


def _open_store(location: str, storage_options: dict | None) -> tuple[_Store, str]:
    location = str(location)
    m = _SCHEME_RE.match(location)
    scheme = m[1].lower() if m else ""
    if scheme in ("s3", "s3a"):
        u = urlparse(location)
        if not u.netloc:
            raise ValueError(f"no bucket in {location!r}")
        return _S3Store(u.netloc, u.path, storage_options), location.rstrip("/")
    if scheme == "file":
        root = Path(unquote(urlparse(location).path))
    elif scheme:
        raise ValueError(f"unsupported location scheme {scheme!r}: {location!r}")
    else:
        root = Path(location)
    return _LocalStore(root.resolve(), storage_options), str(root.resolve())
