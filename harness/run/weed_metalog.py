"""What SeaweedFS's filer itself logged of a key's writes: the objects one
write replaced the content of, read from the filer's metadata log
(`weed filer.meta.tail`), the store's own record of every entry it created,
updated or deleted, with the entry before and after.

A put-if-absent store never replaces an object a conditional PUT created.
SeaweedFS was seen to: two racing `If-None-Match: *` PUTs of one key both
acknowledged, and its metadata log holds both creates, the second with the
first's entry as the one it replaced. This is the evidence that tells such
a store fault from an engine's lost write."""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.core.procs import venv_bin

_WS = re.compile(r"\s*")
_COMMIT_FILE = re.compile(r"(\d{20})\.json")


@dataclass(frozen=True)
class Replaced:
    """One write that replaced an existing object's content."""

    path: str  # the object's full path on the filer: /buckets/<bucket>/<key>
    ts_ns: int  # when the filer applied the replacing write
    old_fids: tuple[str, ...]  # the content it replaced (volume,key chunk ids)
    new_fids: tuple[str, ...]


def _fid(chunk: dict[str, Any]) -> str:
    """A chunk's id as volume,key,cookie: the log gives it either as a
    `fid` message or as the `fileId` string (volume,<key hex><cookie: 8 hex>)."""
    fid = chunk.get("fid") or {}
    if fid.get("volumeId") is not None:
        return f"{fid['volumeId']},{int(fid.get('fileKey') or 0)},{int(fid.get('cookie') or 0)}"
    text = str(chunk.get("fileId") or "")
    volume, _, rest = text.partition(",")
    try:
        return f"{volume},{int(rest[:-8] or '0', 16)},{int(rest[-8:], 16)}"
    except ValueError:
        return text


def _fids(entry: dict[str, Any]) -> tuple[str, ...]:
    return tuple(_fid(c) for c in entry.get("chunks") or [])


def parse_events(text: str) -> list[dict[str, Any]]:
    """The JSON objects `weed filer.meta.tail` printed, one after another."""
    decoder = json.JSONDecoder()
    events: list[dict[str, Any]] = []
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    while pos < len(text):
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break  # a line that is no event (a warning): what came before stands
        if isinstance(obj, dict):
            events.append(obj)
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    return events


def replaced_in(events: list[dict[str, Any]]) -> list[Replaced]:
    """The events whose write replaced an entry of the same name with other
    content (an attribute update keeps the chunks, and is not one)."""
    out: list[Replaced] = []
    for e in events:
        note = e.get("eventNotification") or {}
        old, new = note.get("oldEntry"), note.get("newEntry")
        if not (isinstance(old, dict) and isinstance(new, dict)) or old.get("name") != new.get("name"):
            continue
        if old.get("isDirectory") or new.get("isDirectory"):
            continue
        directory = str(e.get("directory") or "")
        if note.get("newParentPath") not in (None, "", directory):
            continue  # a rename
        old_fids, new_fids = _fids(old), _fids(new)
        if old_fids == new_fids:
            continue
        path = f"{directory.rstrip('/')}/{new.get('name')}"
        out.append(Replaced(path, int(e.get("tsNs") or 0), old_fids, new_fids))
    return out


def replaced_objects(filer: str, path_prefix: str, since_seconds: float, timeout: float = 30) -> list[Replaced]:
    """The objects under `path_prefix` (a filer path, /buckets/<bucket>/...)
    that a write replaced in the last `since_seconds`, from the metadata log
    of the running filer at `filer` (host:port.grpcport)."""
    argv = [
        venv_bin("weed"),
        "filer.meta.tail",
        f"-filer={filer}",
        f"-pathPrefix={path_prefix}",
        f"-timeAgo={max(1, int(since_seconds) + 1)}s",
        "-untilTimeAgo=1ns",
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise HarnessError(f"seaweedfs: reading the filer's metadata log took over {timeout:.0f} s") from e
    if done.returncode != 0:
        raise HarnessError(f"seaweedfs: filer.meta.tail failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return replaced_in(parse_events(done.stdout))


def replaced_commits(filer: str, table_uri: str, since_seconds: float) -> dict[str, Any]:
    """run.json's `store_replaced_commits`: the versions of the table's
    commit files (`_delta_log/NNN.json`) a second write replaced, and each
    replacing write; `read` False, with the error, when the log could not
    be read."""
    m = re.fullmatch(r"s3a?://([^/]+)/(.*?)/?", table_uri)
    if m is None:
        return {"read": False, "error": f"not an S3 table URI: {table_uri}", "versions": []}
    log_dir = f"/buckets/{m[1]}/{m[2]}/_delta_log/"
    doc: dict[str, Any] = {
        "source": "the SeaweedFS filer's metadata log",
        "read": True,
        "window_s": round(since_seconds, 1),
        "versions": [],
    }
    try:
        got = replaced_objects(filer, log_dir, since_seconds)
    except (HarnessError, OSError) as e:
        return {**doc, "read": False, "error": str(e)}
    commits = [(int(c[1]), x) for x in got if (c := _COMMIT_FILE.fullmatch(x.path[len(log_dir) :]))]
    doc["versions"] = sorted({v for v, _ in commits})
    doc["replacements"] = [{"version": v, "at_ns": x.ts_ns} for v, x in commits]
    return doc


def seconds_since(path: Path) -> float:
    """Seconds since a file was last written, and a few more: how far back
    a recovered run's log is read (from its spec.json, written before the
    run's table was created)."""
    try:
        return max(0.0, time.time() - path.stat().st_mtime) + 5
    except OSError:
        return 7 * 24 * 3600.0
