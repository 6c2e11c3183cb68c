"""read_log: list a table's ``_delta_log`` once, sort the listing into
commits, checkpoints and the rest, and read and parse the commits (many
GETs in flight on S3, worker processes for a long local log) into a
:class:`TransactionLog`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Any

import harness.deltalog._pool as _pool
from harness.deltalog._pool import Parsed, _BatchStream, parsed_actions
from harness.deltalog.actions import LogProblem, _int, parse_commit_bytes
from harness.deltalog.checkpoints import _Checkpoint
from harness.deltalog.coordinated import (
    COORDINATOR_KEY,
    STAGED_RE,
    Coordination,
    states_by_table_id,
    table_id,
)
from harness.deltalog.datafiles import _DataPrefetch
from harness.deltalog.log import TransactionLog
from harness.deltalog.names import (
    _CKPT_PART_RE,
    _CKPT_RE,
    _CKPT_V2_RE,
    _COMMIT_RE,
    _EXPECTED_OTHER,
    LOG_DIR,
    STAGED_DIR,
)
from harness.deltalog.store import _S3_WORKERS, _LocalStore, _open_store


def _classify(log: TransactionLog, names: list[str]) -> list[tuple[int, str]]:
    """Sort the _delta_log listing into commits (returned), checkpoints (put
    on the log) and the rest."""
    commits: list[tuple[int, str]] = []
    parts: dict[tuple[int, int], dict[int, str]] = {}
    singles: dict[int, str] = {}
    v2: dict[int, str] = {}
    for name in names:
        # What _COMMIT_RE matches (\d is a Unicode decimal, as isdecimal
        # says), without the regular expression: a long log lists a million.
        if len(name) == 25 and name.endswith(".json") and name[:20].isdecimal():
            commits.append((int(name[:20]), name))
        elif m := _COMMIT_RE.match(name):
            commits.append((int(m[1]), name))
        elif m := _CKPT_RE.match(name):
            singles[int(m[1])] = name
        elif m := _CKPT_PART_RE.match(name):
            parts.setdefault((int(m[1]), int(m[3])), {})[int(m[2])] = name
        elif m := _CKPT_V2_RE.match(name):
            v2.setdefault(int(m[1]), name)
        elif not _EXPECTED_OTHER.match(name):
            log.ignored_files.append(name)
    complete_parts: dict[int, list[str]] = {}
    for (v, n), got in parts.items():
        if set(got) == set(range(1, n + 1)):
            complete_parts.setdefault(v, [got[i] for i in range(1, n + 1)])
        elif v not in singles:
            log.problems.append(
                LogProblem(
                    "checkpoint-unreadable",
                    v,
                    f"multi-part checkpoint has parts {sorted(got)} of {n}",
                )
            )
    # Prefer the simplest complete form when several exist for one version.
    for v in {*singles, *complete_parts, *v2}:
        if v in singles:
            log._checkpoints[v] = _Checkpoint(v, [singles[v]], "classic")
        elif v in complete_parts:
            log._checkpoints[v] = _Checkpoint(v, complete_parts[v], "multipart")
        else:
            log._checkpoints[v] = _Checkpoint(v, [v2[v]], "v2")
    # By version alone, ints compare faster than tuples (a million commits
    # come listed in no order); two names of one version are ordered by name.
    commits.sort(key=itemgetter(0))
    if len({v for v, _ in commits}) < len(commits):
        commits.sort()
    return commits


def _parallel_fetch(
    store: _LocalStore, commit_names: list[tuple[int, str]], fetch: Any
) -> Iterator[tuple[int, bytes | Exception | Parsed]]:
    """Commit files read, parsed and validated by worker processes, in
    version order; a file they could not read, parse or accept is fetched
    here, to be judged the ordinary way."""
    stream = _BatchStream("commits", store._root_str, _pool._PARALLEL_WINDOW_COMMITS)
    stream.extend((v, f"{LOG_DIR}/{name}") for v, name in commit_names)
    stream.finish()
    # Batches this thread read itself, by their first item: while the
    # workers have not sent the next batch, it reads the one they would
    # come to last (and parses it once, where a worker's batch is parsed
    # there to be checked and here again to be kept).
    own: dict[int, tuple[int, list[Any]]] = {}
    at = 0
    try:
        while True:
            if at in own:
                n, result = own.pop(at)
            elif not stream.front_ready() and (back := stream.take_back()) is not None:
                start, n = back
                try:
                    own[start] = (n, _pool._pool_read_commits(stream.root, stream.items[start : start + n], keep=True))
                except Exception:  # noqa: BLE001 - each is fetched below, the ordinary way
                    own[start] = (n, [None] * n)
                continue
            elif (batch := stream.next()) is not None:
                _, n, result = batch
            else:
                break
            if not isinstance(result, list) or len(result) != n:
                result = [None] * n
            for item, parsed in zip(commit_names[at : at + n], result, strict=False):
                yield (item[0], parsed) if type(parsed) is tuple else fetch(item)
            at += n
    finally:
        stream.close()


def _parse_bodies(
    log: TransactionLog,
    bodies: Iterable[tuple[int, Any]],
    added: Any = None,
) -> None:
    """Add each commit: its bytes, the exception reading it raised, or what
    a worker process made of it (Parsed, a tuple)."""
    for v, body in bodies:
        if type(body) is tuple:
            log._add_commit(v, parsed_actions(body), body[1])
            if added is not None and v in log.commits:
                added(log.commits[v])
            continue
        if isinstance(body, Exception):
            log._unreadable.add(v)
            log.problems.append(LogProblem("unreadable", v, f"could not read: {type(body).__name__}: {body}"[:500]))
            continue
        try:
            actions = parse_commit_bytes(body)
        except ValueError as e:
            log._unreadable.add(v)
            log.problems.append(LogProblem("unparseable", v, str(e)[:500]))
            continue
        log._add_commit(v, actions)
        if added is not None and v in log.commits:
            added(log.commits[v])


def _latest_configuration(log: TransactionLog) -> dict[str, str]:
    """The configuration of the newest metaData among the commits read so far."""
    for v in sorted(log.commits, reverse=True):
        c = log.commits[v]
        if not c.has("metaData"):  # a long log's first commit has the one metaData
            continue
        md = c.metadata
        if md is not None:
            conf = md.get("configuration")
            return dict(conf) if isinstance(conf, dict) else {}
    return {}


def _read_coordinated(log: TransactionLog, store: Any, coordinator: dict[str, Any] | None) -> None:
    """For a coordinated-commits table (harness.deltalog.coordinated): add
    the ratified commits not yet backfilled, from their staged files, and
    note what the coordinator says beyond the file system."""
    conf = _latest_configuration(log)
    name = conf.get(COORDINATOR_KEY)
    if not name:
        return
    tid = table_id(conf)
    state = states_by_table_id(coordinator).get(tid) if tid else None
    co = log.coordination = Coordination(name, tid, state)
    staged: dict[int, list[str]] = {}
    for n in store.list_staged():
        if m := STAGED_RE.match(n):
            staged.setdefault(int(m[1]), []).append(n)
    backfilled_top = max([*log.commits, *log._unreadable], default=-1)
    frontier = sorted((v, n) for v, names in staged.items() if v > backfilled_top for n in names)
    if state is None:
        co.undecided = [n for _, n in frontier]
        if co.undecided:
            log.problems.append(
                LogProblem(
                    "coordinator-state-missing",
                    frontier[0][0],
                    f"{len(co.undecided)} staged commit(s) past the last backfilled version {backfilled_top} "
                    "(e.g. " + co.undecided[0] + "), and no coordinator state to say which it ratified",
                )
            )
        return
    ratified = {c.version: c for c in state.commits}
    co.orphans = [n for v, n in frontier if v not in ratified or ratified[v].file_name != n]
    bodies: list[tuple[int, Any]] = []
    for v in sorted(ratified):
        c = ratified[v]
        if v in log.commits or v in log._unreadable:
            continue  # backfilled: the file system's copy is the commit
        rel = f"{LOG_DIR}/{STAGED_DIR}/{c.file_name}"
        try:
            bodies.append((v, store.read_rel(rel)))
            co.unbackfilled.append(v)
        except Exception as e:  # noqa: BLE001 - a ratified commit whose file is gone is lost, not an error
            log.problems.append(
                LogProblem(
                    "missing-commit",
                    v,
                    f"the coordinator ratified {c.file_name} as version {v}, but it is neither backfilled nor "
                    f"staged ({type(e).__name__})",
                )
            )
            log._unreadable.add(v)
    _parse_bodies(log, bodies)
    top = state.ratified_version
    have = max([*log.commits, *log._unreadable], default=-1)
    if top is not None and top > have:
        log.problems.append(
            LogProblem(
                "missing-commit",
                have + 1,
                f"the coordinator ratified versions up to {top}, but the log holds commits up to {have} only",
            )
        )


def _timestamp_problems(log: TransactionLog) -> None:
    """In-commit timestamps, where the table records them, must grow with
    the version (the Delta protocol's rule; readers resolve time travel by
    them)."""
    prev: tuple[int, int] | None = None
    for v in sorted(log.commits):
        info = log.commits[v].commit_info
        # Most tables have none: no call for a commit without one.
        ts = _int(info.get("inCommitTimestamp")) if info and "inCommitTimestamp" in info else None
        if ts is None:
            continue
        if prev is not None and prev[0] == v - 1 and ts <= prev[1]:
            log.problems.append(
                LogProblem(
                    "in-commit-timestamp",
                    v,
                    f"inCommitTimestamp {ts} is not greater than version {prev[0]}'s ({prev[1]})",
                )
            )
        prev = (v, ts)


def _kept_files(root: Path) -> set[str]:
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            out.add(os.path.relpath(os.path.join(dirpath, f), root))
    return out


def read_log(
    location: str,
    storage_options: dict | None = None,
    *,
    prefetch_data: bool = False,
    coordinator: dict[str, Any] | None = None,
    kept: str | os.PathLike | None = None,
) -> TransactionLog:
    """Read the transaction log of the table at `location`.

    `location` is a local path, ``file://...`` or ``s3://bucket/prefix``.
    storage_options (S3): endpoint_url, aws_access_key_id,
    aws_secret_access_key, region_name (aws_session_token, and delta-rs'
    upper-case AWS_* names, are accepted too); absent ones fall back to
    boto3's defaults. Data files are read lazily by file_rows / rows_at.

    coordinator: the state of the table's commit coordinator, as a run
    keeps it ({"items": [DynamoDB items]}), for a coordinated-commits
    table (harness.deltalog.coordinated); without it, staged commits past
    the last backfilled version are undecided.

    kept: a local directory holding copies of the table's data files as a
    run saw them appear (harness.deltalog.DataFileKeeper): a data file the
    store no longer has is read from there, and `deleted_files` names the
    kept files the store no longer has (what VACUUM deleted).

    prefetch_data=True says every data file will be read next, in log order
    (a checker replaying the log; see TransactionLog.prefetch_data_files):
    on a local table with many files, worker processes start decoding them
    while the log is still being parsed. Nothing read differs either way.
    """
    store, loc = _open_store(location, storage_options)
    log = TransactionLog()
    log.location = loc
    log._files.store = store
    kept_log: Path | None = None
    if kept is not None and Path(kept).is_dir():
        log._files.kept = Path(kept)
        kept_files = _kept_files(Path(kept))
        log.deleted_files = {f for f in kept_files if not f.startswith(LOG_DIR)} - set(store.list_all())
        kept_log = Path(kept) / LOG_DIR
    names = store.list_log()  # one listing: on S3 each LIST is a round trip
    commit_names = _classify(log, names)
    if kept_log is not None and kept_log.is_dir():
        # Commits log cleanup deleted: the run's copies stand in for them.
        have = {v for v, _ in commit_names}
        expired = [(int(m[1]), p.name) for p in kept_log.iterdir() if (m := _COMMIT_RE.match(p.name))]
        expired = [(v, name) for v, name in expired if v not in have]
        log.expired_commits = {v for v, _ in expired}
        commit_names = sorted(commit_names + expired)

    def fetch(item: tuple[int, str]) -> tuple[int, bytes | Exception]:
        v, name = item
        try:
            if v in log.expired_commits and kept_log is not None:
                return v, (kept_log / name).read_bytes()
            return v, store.read_rel(f"{LOG_DIR}/{name}")
        except Exception as e:  # noqa: BLE001 - e.g. deleted between list and get
            return v, e

    prefetch: _DataPrefetch | None = None
    if store.remote and len(commit_names) > 1:
        # Many GETs in flight, parsed here in version order as they arrive.
        with ThreadPoolExecutor(min(_S3_WORKERS, len(commit_names))) as pool:
            _parse_bodies(log, pool.map(fetch, commit_names))
    else:
        prefetch = _DataPrefetch(store._root_str) if prefetch_data and isinstance(store, _LocalStore) else None
        if isinstance(store, _LocalStore) and len(commit_names) >= _pool._PARALLEL_MIN_FILES:
            _parse_bodies(log, _parallel_fetch(store, commit_names, fetch), prefetch)
        else:
            _parse_bodies(log, map(fetch, commit_names), prefetch)

    _read_coordinated(log, store, coordinator)
    _timestamp_problems(log)
    if "_last_checkpoint" in names:
        try:
            lc = json.loads(store.read_rel(f"{LOG_DIR}/_last_checkpoint"))
            if not isinstance(lc, dict) or _int(lc.get("version")) is None:
                raise ValueError(f"no integer version in {str(lc)[:100]}")
            log.last_checkpoint = lc
            if lc["version"] not in log._checkpoints:
                log.problems.append(
                    LogProblem(
                        "last-checkpoint",
                        lc["version"],
                        f"_last_checkpoint names version {lc['version']}, which has no complete checkpoint",
                    )
                )
        except Exception as e:  # noqa: BLE001
            log.problems.append(LogProblem("last-checkpoint", None, f"unreadable: {e}"[:500]))
    log._finish()
    log.start_checkpoint_summaries()
    if prefetch is not None and prefetch.stream is not None:
        log._files.adopt_stream(prefetch, prefetch.versions == log._versions)
    elif prefetch_data:
        log.prefetch_data_files()
    return log
