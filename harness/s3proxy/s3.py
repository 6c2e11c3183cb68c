"""What an S3 request is, for the proxy: its kind, path class, client and
the table version it names; S3 error bodies and pinned listings (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from urllib.parse import parse_qs, unquote, urlsplit

from harness.s3proxy.http import _REASONS, Headers, Response

CONTROL_PREFIX = "/__dj__/"
FAULT_KINDS = (
    "latency",
    "error",
    "reset",
    "ambiguous",
    "applied-error",
    "applied-late",
    "stale-list",
    "partition",
    "strip-if-none-match",
    "hold",
    "pin",
)
# The DynamoDB actions a commit coordinator sends (delta-spark's DynamoDB
# commit coordinator: UpdateItem ratifies a commit and clears backfilled
# ones, GetItem lists the unbackfilled, PutItem registers a table): each is
# a request kind of its own, of path class "coordinator".
DYNAMODB_ACTIONS = ("UpdateItem", "GetItem", "PutItem", "DescribeTable", "CreateTable", "Scan", "Query", "DeleteItem")
REQUEST_KINDS = ("GET", "PUT", "LIST", "HEAD", "DELETE", "POST", *DYNAMODB_ACTIONS)
PATH_CLASSES = ("commit", "checkpoint", "log", "data", "bucket", "coordinator")
ERROR_CODES = {500: "InternalError", 503: "SlowDown"}
DYNAMODB_ERROR_CODES = {500: "InternalServerError", 503: "ServiceUnavailable"}
UPSTREAM_CONNECT_TIMEOUT = 5.0
UPSTREAM_READ_TIMEOUT = 60.0
CLIENT_IDLE_TIMEOUT = 300.0
MAX_HEADER_BYTES = 64 * 1024
# Hop-by-hop: never forwarded as they came; the proxy frames each side itself.

_COMMIT_RX = re.compile(r"(?:^|/)_delta_log/(\d{20})\.json$")
_VERSIONED_LOG_RX = re.compile(r"(?:^|/)_delta_log/(\d{20})\.")
_CREDENTIAL_RX = re.compile(r"Credential=([^/,\s]+)/")
_CONTENTS_RX = re.compile(rb"<Contents>.*?</Contents>", re.S)
_KEY_RX = re.compile(rb"<Key>(.*?)</Key>", re.S)


# --- classification (pure) ---------------------------------------------------


def path_class(key: str) -> str:
    """commit (`_delta_log/<20 digits>.json`), checkpoint (`*.checkpoint*.parquet`,
    `_last_checkpoint`), log (other `_delta_log/` files: .crc, temp commits)
    or data."""
    if not key:
        return "bucket"
    if "_delta_log/" in key or key.endswith("_delta_log"):
        name = key.rsplit("/", 1)[-1]
        if _COMMIT_RX.search(key):
            return "commit"
        if name == "_last_checkpoint" or (".checkpoint" in name and name.endswith(".parquet")):
            return "checkpoint"
        return "log"
    return "data"


def log_version(key: str) -> int | None:
    """The table version a versioned `_delta_log/` file belongs to (commit,
    checkpoint, crc), else None."""
    m = _VERSIONED_LOG_RX.search(key)
    return int(m.group(1)) if m else None


def split_target(target: str) -> tuple[str, str, dict[str, list[str]]]:
    """(bucket, key, query) of a path-style request target."""
    parts = urlsplit(target)
    path = unquote(parts.path).lstrip("/")
    bucket, _, key = path.partition("/")
    return bucket, key, parse_qs(parts.query, keep_blank_values=True)


def dynamodb_action(headers: Headers) -> str | None:
    """The DynamoDB action of a request (X-Amz-Target: DynamoDB_20120810.UpdateItem), or None."""
    target = headers.get("x-amz-target") or ""
    service, _, action = target.partition(".")
    return action if service.startswith("DynamoDB_") and action else None


def request_kind(method: str, key: str, query: dict[str, list[str]]) -> str:
    if method == "GET" and not key and ("list-type" in query or "prefix" in query or not query):
        return "LIST"
    return method


def access_key_id(headers: Headers, query: dict[str, list[str]]) -> str:
    """The SigV4 access key id (header or presigned query); '-' if unsigned."""
    m = _CREDENTIAL_RX.search(headers.get("authorization") or "")
    if m:
        return m.group(1)
    cred = query.get("X-Amz-Credential", [""])[0]
    return cred.split("/", 1)[0] if cred else "-"


def parse_identity(key: str) -> tuple[str | None, str]:
    """(node, client) a harness access key id encodes: `dj-<node>-<client>`
    (a delta-rs process on a node), `dj-<node>` (a Sail server: one identity
    per node) or `dj-<client>`. Other keys are their own client."""
    if not key.startswith("dj-"):
        return None, key
    rest = key[3:]
    m = re.fullmatch(r"(n\d+)-(.+)", rest)
    if m:
        return m.group(1), m.group(2)
    if re.fullmatch(r"n\d+", rest):
        return rest, rest
    return None, rest


def hidden_by_pin(key: str, version: int) -> bool:
    v = log_version(key)
    return v is not None and v > version


def listed_keys(body: bytes) -> list[str]:
    """The object keys of a ListObjects response, in order."""
    out = []
    for e in _CONTENTS_RX.findall(body):
        m = _KEY_RX.search(e)
        out.append(unquote(m.group(1).decode()) if m else "")
    return out


def drop_listed(body: bytes, drop: Callable[[list[str]], set[int]]) -> tuple[bytes, int]:
    """A ListObjects response without the entries whose indexes `drop` picks
    from the listed keys, KeyCount lowered to match (a client that trusts
    KeyCount must see the same listing). Returns (body, entries dropped)."""
    entries = _CONTENTS_RX.findall(body)
    gone = drop(listed_keys(body))
    if not gone:
        return body, 0
    for i in sorted(gone):
        body = body.replace(entries[i], b"", 1)
    m = re.search(rb"<KeyCount>(\d+)</KeyCount>", body)
    if m:
        body = body[: m.start(1)] + str(int(m.group(1)) - len(gone)).encode() + body[m.end(1) :]
    return body, len(gone)


def filter_listing(body: bytes, version: int) -> tuple[bytes, int]:
    """A ListObjects response without the log files of versions > `version`,
    and without `_last_checkpoint` when a hidden checkpoint shows it points
    past the pin. Returns (body, entries dropped)."""

    def drop(keys: list[str]) -> set[int]:
        out = {i for i, k in enumerate(keys) if hidden_by_pin(k, version)}
        if any(path_class(keys[i]) == "checkpoint" for i in out):
            out |= {i for i, k in enumerate(keys) if k.endswith("_delta_log/_last_checkpoint")}
        return out

    return drop_listed(body, drop)


def filter_young(body: bytes, bucket: str, put_at: dict[tuple[str, str], float], cutoff: float) -> tuple[bytes, int]:
    """A ListObjects response without the keys first PUT after `cutoff` (a
    monotonic time): what an eventually consistent listing has not caught up
    with yet. Returns (body, entries dropped)."""

    def drop(keys: list[str]) -> set[int]:
        return {i for i, k in enumerate(keys) if put_at.get((bucket, k), float("-inf")) > cutoff}

    return drop_listed(body, drop)


def dynamodb_error(status: int, message: str) -> Response:
    """An error as DynamoDB answers one (JSON, its own codes), which its
    clients retry the way they retry the real thing."""
    code = DYNAMODB_ERROR_CODES.get(status, "InternalServerError")
    body = json.dumps({"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message}).encode()
    headers = Headers([("Content-Type", "application/x-amz-json-1.0")])
    return Response(status, _REASONS.get(status, "Error"), headers, body)


def s3_error(status: int, code: str, message: str, resource: str = "") -> Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message><Resource>{resource}</Resource>"
        f"<RequestId>dj-proxy</RequestId></Error>"
    ).encode()
    return Response(status, _REASONS.get(status, "Error"), Headers([("Content-Type", "application/xml")]), body)
