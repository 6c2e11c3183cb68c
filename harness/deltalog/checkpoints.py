"""Checkpoints: the parquet and JSON files (classic, multi-part, v2 with
sidecars) a reader may start from instead of replaying every commit; read in
full or, to compare them with the JSON replay, for just their file paths,
metaData and protocol; and the gaps in the commits that they do or do not
cover."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.deltalog.actions import LogProblem, _check_actions, parse_commit_bytes
from harness.deltalog.names import _SCHEME_RE, LOG_DIR
from harness.deltalog.readahead import _opened_ahead, _take
from harness.deltalog.schema import _THREADED_READ_BYTES
from harness.deltalog.store import _Store

_fastpq: ModuleType | None
try:  # built with the project (pyproject.toml); without it Arrow reads every checkpoint
    import harness.deltalog._fastpq as _fastpq
except ImportError:  # pragma: no cover - a build without a C compiler
    _fastpq = None

_CHECKPOINT_ACTIONS = (
    "add", "remove", "metaData", "protocol", "txn", "domainMetadata",
    "sidecar", "checkpointMetadata",
)  # fmt: skip


@dataclass
class _Checkpoint:
    version: int
    files: list[str]  # names inside _delta_log, in part order
    kind: str  # "classic" | "multipart" | "v2" | "memory"
    actions: list[dict] | None = None
    failed: str | None = None  # why it could not be read, once tried
    source: list[dict] | None = None  # the actions of an in-memory checkpoint


class _NeedFullRead(Exception):
    """A checkpoint the column-only read cannot summarize (v2 sidecars)."""


def _table_actions(table: pa.Table) -> list[dict]:
    cols = [c for c in _CHECKPOINT_ACTIONS if c in table.column_names]
    rows = table.select(cols).to_pylist(maps_as_pydicts="strict")
    actions = []
    for row in rows:
        for kind in cols:
            inner = row[kind]
            if inner is not None:
                # Parquet gives every absent optional field as None; JSON
                # commits omit them. Drop them so both look alike.
                actions.append({kind: {k: v for k, v in inner.items() if v is not None}})
    return actions


def _read_checkpoint(ck: _Checkpoint, store: _Store | None) -> list[dict]:
    if ck.source is not None:
        return list(ck.source)
    if store is None:
        raise ValueError("log has no storage location")
    actions: list[dict] = []
    for name in ck.files:
        data = store.read_rel(f"{LOG_DIR}/{name}")
        if name.endswith(".json"):
            actions.extend(parse_commit_bytes(data))
        else:
            actions.extend(_table_actions(pq.read_table(pa.BufferReader(data))))
    # v2 checkpoints keep file actions in sidecars under _delta_log/_sidecars.
    for a in [a for a in actions if "sidecar" in a]:
        path = a["sidecar"].get("path", "")
        data = (
            store.read_path(path) if _SCHEME_RE.match(path) else store.read_rel(f"{LOG_DIR}/_sidecars/{unquote(path)}")
        )
        actions.extend(_table_actions(pq.read_table(pa.BufferReader(data))))
    return actions


def _cut_off(e: Exception) -> bool:
    """A parquet file with no valid footer: written in part (a checkpoint
    must appear whole), not a format this reader does not know."""
    text = str(e)
    return isinstance(e, pa.ArrowInvalid) and ("magic bytes" in text or "file size is 0" in text or "footer" in text)


def _load_checkpoint(ck: _Checkpoint, store: _Store | None) -> list[dict] | LogProblem:
    """Read a checkpoint into ck.actions and return them; or, when it cannot
    be read or its actions cannot be trusted, set ck.failed and return the
    problem."""
    try:
        actions = _read_checkpoint(ck, store)
    except Exception as e:  # noqa: BLE001 - any failure is evidence
        ck.failed = f"{type(e).__name__}: {e}"
        return LogProblem(
            "checkpoint-broken" if _cut_off(e) else "checkpoint-unreadable",
            ck.version,
            f"{ck.kind} checkpoint {ck.files}: {ck.failed}"[:500],
        )
    err, _problems = _check_actions(ck.version, actions)
    if err:
        ck.failed = err
        return LogProblem("checkpoint-unreadable", ck.version, f"{ck.kind} checkpoint: {err}")
    ck.actions = actions
    # Its other problems repeat what the JSON commits said.
    return actions


def _column_summary(ck: _Checkpoint, store: _Store | None) -> tuple[set[str], list[dict]] | None:
    """A classic parquet checkpoint's file paths and its metaData/protocol
    actions, read for just those columns (turning every add into a dict made
    checking all checkpoints cost as much as the rest of log-sanity). None
    when this read does not apply or fails: then the full reader decides."""
    if not (ck.actions is None and store is not None and _summarizable(ck)):
        return None
    return _read_summary(store.read_rel, [f"{LOG_DIR}/{name}" for name in ck.files])


def _summarizable(ck: _Checkpoint) -> bool:
    return ck.source is None and ck.kind in ("classic", "multipart") and all(n.endswith(".parquet") for n in ck.files)


def _read_summary(read: Callable[[str], bytes], rels: list[str]) -> tuple[set[str], list[dict]] | None:
    try:
        paths: set[str] = set()
        actions: list[dict] = []
        for rel in rels:
            got, acts = _summary_of(read(rel))
            if paths:
                paths.update(got)
            else:
                paths = got
            actions += acts
        return paths, actions
    except Exception:  # noqa: BLE001 - _NeedFullRead, or a failure the full reader records
        return None


# For _fastpq.checkpoint: by footer key, whether its add paths were what
# Arrow read of the first checkpoint with that footer; by footer key and
# metaData/protocol key, the actions Arrow read there.
_fast_footers: dict[bytes, bool] = {}
_fast_actions: dict[tuple[bytes, bytes], list[dict]] = {}
_FAST_KEPT = 256


def _summary_of(data: bytes) -> tuple[set[str], list[dict]]:
    """One checkpoint file's add paths and metaData/protocol actions. A
    long run compares thousands of checkpoints of thousands of adds, at
    milliseconds each through Arrow: where _fastpq reads the file, Arrow
    decodes only the first file of each footer (and _fastpq is trusted for
    that footer only if it read the same paths) and each distinct
    metaData/protocol content once."""
    fast = _fastpq.checkpoint(data) if _fastpq is not None else None
    if fast is not None:
        key, paths, meta = fast
        trusted = _fast_footers.get(key)
        cached = _fast_actions.get((key, meta)) if trusted else None
        if cached is not None:
            return paths, list(cached)
        if trusted:
            actions = _arrow_summary(data, with_paths=False)[1]
        else:
            got, actions = _arrow_summary(data, with_paths=True)
            if len(_fast_footers) >= _FAST_KEPT:
                _fast_footers.clear()
            _fast_footers[key] = trusted = got == paths
            paths = got
        if trusted:
            if len(_fast_actions) >= _FAST_KEPT:
                _fast_actions.clear()
            _fast_actions[(key, meta)] = actions
        return paths, list(actions)
    return _arrow_summary(data, with_paths=True)


def _arrow_summary(data: bytes, with_paths: bool) -> tuple[set[str], list[dict]]:
    # Arrow's thread pool and pre-buffering cost a checkpoint of
    # thousands of files more than they save (_THREADED_READ_BYTES).
    big = len(data) >= _THREADED_READ_BYTES
    f = pq.ParquetFile(pa.BufferReader(data), pre_buffer=big)
    names = f.schema_arrow.names  # built anew on each access
    cols = [c for c in ("add", "metaData", "protocol", "sidecar") if c in names and (with_paths or c != "add")]
    # Of each add only its path: decoding the rest (stats, tags,
    # partition values) took half of reading a checkpoint.
    t = f.read(columns=["add.path" if c == "add" else c for c in cols], use_threads=big)
    if "sidecar" in cols and t["sidecar"].null_count < len(t):
        raise _NeedFullRead()
    paths: set[str] = set()
    if "add" in cols:
        # A set of the whole column, then its null (the rows that are no
        # add) taken out: filtering first cost twice as much.
        paths = set(pc.struct_field(t["add"], "path").to_pylist())
        paths.discard(None)
    actions: list[dict] = []
    for kind in ("metaData", "protocol"):
        if kind in cols:
            col = t[kind].filter(t[kind].is_valid())
            actions += _table_actions(pa.table({kind: col}))
    return paths, actions


def checkpoint_problems(
    version: int,
    ck_files: set[str],
    ck_actions: list[dict],
    json_files: set[str],
    json_meta: dict | None,
    json_proto: dict | None,
) -> list[LogProblem]:
    """How a checkpoint (its files' paths, its metaData and protocol
    actions) differs from the JSON replay at its version (spec C4, C7)."""
    new: list[LogProblem] = []
    if json_files != ck_files:
        extra, lost = sorted(ck_files - json_files), sorted(json_files - ck_files)
        new.append(
            LogProblem(
                "checkpoint-mismatch",
                version,
                f"checkpoint has {len(extra)} file(s) JSON does not {extra[:3]} and lacks {len(lost)} {lost[:3]}",
            )
        )
    for kind, json_value in (("metaData", json_meta), ("protocol", json_proto)):
        found = [a[kind] for a in ck_actions if kind in a]
        if found and json_value is not None and not _same_action(found[-1], json_value):
            new.append(LogProblem("checkpoint-mismatch", version, f"{kind} differs from JSON"))
    return new


# What a worker process is given to compare one checkpoint (_pool_compare):
# its version and files, the JSON replay's live paths (whole for the first
# of a task, else what entered and left since the one before), metaData
# and protocol.
_CompareItem = tuple[int, list[str], "list[str] | None", list[str], list[str], "dict | None", "dict | None"]


def _pool_compare(root: str, items: list[_CompareItem]) -> list[list[LogProblem] | None]:
    """Worker side (harness.deltalog._pool): compare checkpoints with the JSON
    replay, as check_checkpoints does; None for one it cannot read (the
    parent then compares that one itself)."""

    # A long run's checkpoints are mostly not in the page cache: the disk
    # reads a task's at once while the first is compared.
    names = [rel for item in items for rel in item[1]]
    opened = dict(zip(names, _opened_ahead([os.path.join(root, rel) for rel in names]), strict=True))

    def read(rel: str) -> bytes:
        return _take(opened.pop(rel))  # an open that failed raises here: the parent compares that one

    live: set[str] = set()
    out: list[list[LogProblem] | None] = []
    try:
        for version, rels, whole, entered, left, meta, proto in items:
            if whole is not None:
                live = set(whole)
            live.difference_update(left)
            live.update(entered)
            got = _read_summary(read, rels)
            out.append(None if got is None else checkpoint_problems(version, got[0], got[1], live, meta, proto))
    finally:
        for fd in opened.values():
            if isinstance(fd, int):
                os.close(fd)
    return out


def _gap_problems(present: set[int], checkpoints: dict[int, _Checkpoint]) -> list[LogProblem]:
    """The versions without a commit file (`present`: those with one,
    readable or not): a "gap" where no checkpoint covers them, so the table
    state from there on is unknown; a "missing-commit" where one does; none
    for the prefix log cleanup removes."""
    problems: list[LogProblem] = []
    tops = [*present, *checkpoints]
    if not tops:
        problems.append(LogProblem("empty-log", None, "no commits and no checkpoints"))
        return problems
    top = max(tops)
    # Not yet loaded counts as covering; known-unreadable does not.
    max_ckpt = max((c for c, ck in checkpoints.items() if ck.failed is None), default=-1)
    first_present = min(present, default=top + 1)
    runs: list[list[int]] = []
    for v in range(top + 1):
        if v in present:
            continue
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    for lo, hi in runs:
        span = f"version {lo}" if lo == hi else f"versions {lo}..{hi}"
        if hi <= max_ckpt:
            if lo < first_present:
                continue  # log cleanup removes a prefix; the checkpoint covers it
            problems.append(
                LogProblem(
                    "missing-commit",
                    lo,
                    f"{span}: no commit file after earlier ones exist;"
                    f" checkpoint {max_ckpt} still covers the table state",
                )
            )
        else:
            problems.append(
                LogProblem(
                    "gap",
                    lo,
                    f"{span}: no commit file and no checkpoint at or after it; the table state from here on is unknown",
                )
            )
    return problems


def _same_action(a: dict, b: dict) -> bool:
    # Checkpoints drop nulls and JSON may spell them out; compare without them.
    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if v is not None}
        return x

    return clean(a) == clean(b)
