"""What a results root holds: run folders, conformance reports and workload
matrices, found by walking the folders and summarised from their small
JSON files only (never history.jsonl, which can be hundreds of MB).

A root with hundreds of runs is walked on every index request, so each
folder's summary is cached and re-read only when one of the files it came
from changes (by mtime and size).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["Catalog", "ConformanceInfo", "Contents", "MatrixInfo", "RunInfo", "NOT_CHECKED"]

NOT_CHECKED = "not checked"

# results/<workload>-<engine>/<stamp>/ is depth 2; a matrix cell,
# results/matrix/<stamp>/cells/<workload>-<engine>/<stamp>/, depth 5. One more
# for a root one level up (a results folder kept inside another).
MAX_DEPTH = 6

# Folders that never hold a run: a table copy (thousands of data files), its
# log, a run's logs, the conformance matrix's per-cell tables.
SKIP_DIRS = frozenset({"table", "_delta_log", "delta_log", "logs", "tables"})

_STAMP = re.compile(r"^(\d{8}T\d{6})(?:-\d+)?$")


def stamp_time(name: str) -> datetime | None:
    """The UTC time a folder named by `new_run_dir`'s stamp was made."""
    m = _STAMP.match(name)
    if not m:
        return None
    try:
        return datetime.strptime(m.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _folder_time(path: Path, fallback_file: Path) -> datetime:
    t = stamp_time(path.name)
    if t is not None:
        return t
    for p in (fallback_file, path):
        try:
            return datetime.fromtimestamp(p.stat().st_mtime, UTC)
        except OSError:
            continue
    return datetime.fromtimestamp(0, UTC)


def _read_json(path: Path) -> Any:
    """The document, or None if absent or unreadable (a run still being
    written, a truncated file): a listing never fails on one bad folder."""
    try:
        return json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None


def _signature(folder: Path, names: tuple[str, ...]) -> tuple[tuple[int, int] | None, ...]:
    out: list[tuple[int, int] | None] = []
    for n in names:
        try:
            st = (folder / n).stat()
            out.append((st.st_mtime_ns, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


@dataclass(frozen=True)
class RunInfo:
    rel: str  # the folder, relative to the root, with "/" separators
    time: datetime
    workload: str
    engine: str
    verdict: str  # valid / invalid / unknown / "not checked"
    kinds: dict[str, int] = field(default_factory=dict)
    ops: int | None = None
    ok: int | None = None
    fail: int | None = None
    info: int | None = None
    ops_per_s: float | None = None
    duration_s: float | None = None
    nemesis: tuple[str, ...] = ()
    isolation: str | None = None
    interrupted: bool = False
    has_report: bool = False
    has_summary: bool = False


@dataclass(frozen=True)
class ConformanceInfo:
    rel: str
    time: datetime
    engine: str
    counts: dict[str, int] = field(default_factory=dict)
    seconds: float | None = None
    files: tuple[str, ...] = ()  # which of conformance.html/.md/.json exist


@dataclass(frozen=True)
class MatrixInfo:
    rel: str
    time: datetime
    cells: int | None = None
    verdicts: dict[str, int] = field(default_factory=dict)
    files: tuple[str, ...] = ()  # which of matrix.html/.md/.json exist


@dataclass(frozen=True)
class Contents:
    """A root's runs, conformance reports and matrices, newest first."""

    runs: list[RunInfo]
    conformance: list[ConformanceInfo]
    matrices: list[MatrixInfo]


_RUN_FILES = ("spec.json", "results.json", "run.json", "report.html", "summary.txt")
_CONFORMANCE_FILES = ("conformance.html", "conformance.md", "conformance.json")
_MATRIX_FILES = ("matrix.html", "matrix.md", "matrix.json")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _workload_engine_from_name(name: str) -> tuple[str, str]:
    # "<workload>-<engine>": workloads have dashes too (list-append), engines
    # are one of a few known tails.
    for engine in ("delta-spark", "delta-rs", "spark-connect", "sail"):
        if name.endswith("-" + engine):
            return name[: -len(engine) - 1], engine
    return name, "?"


def summarise_run(root: Path, folder: Path) -> RunInfo:
    spec_doc = _dict(_read_json(folder / "spec.json"))
    results = _dict(_read_json(folder / "results.json"))
    run_doc = _dict(_read_json(folder / "run.json")) or _dict(results.get("run"))
    spec = _dict(spec_doc.get("spec"))
    guess_w, guess_e = _workload_engine_from_name(folder.parent.name)
    history = _dict(results.get("history"))
    kinds: Counter[str] = Counter()
    for checker in results.get("checkers") or ():
        for anomaly in _dict(checker).get("anomalies") or ():
            kinds[str(_dict(anomaly).get("kind", "?"))] += 1
    counts = _dict(run_doc.get("counts"))
    ok = _int(history.get("ok", counts.get("ok")))
    fail = _int(history.get("fail", counts.get("fail")))
    info = _int(history.get("info", counts.get("info")))
    ops = _int(history.get("ops"))
    if ops is None and None not in (ok, fail, info):
        ops = (ok or 0) + (fail or 0) + (info or 0)
    duration = _num(history.get("elapsed_s", run_doc.get("elapsed")))
    rate = _num(history.get("ops_per_s"))
    if rate is None and ops is not None and duration:
        rate = round(ops / duration, 2)
    verdict = results.get("verdict")
    nemesis = spec.get("nemesis") or ()
    return RunInfo(
        rel=folder.relative_to(root).as_posix(),
        time=_folder_time(folder, folder / "run.json"),
        workload=str(spec.get("workload") or guess_w),
        engine=str(spec.get("engine") or guess_e),
        verdict=str(verdict).lower() if verdict else NOT_CHECKED,
        kinds=dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        ops=ops,
        ok=ok,
        fail=fail,
        info=info,
        ops_per_s=rate,
        duration_s=duration,
        nemesis=tuple(str(n) for n in nemesis) if isinstance(nemesis, list | tuple) else (str(nemesis),),
        isolation=str(spec["isolation"]) if spec.get("isolation") else None,
        interrupted=bool(run_doc.get("interrupted")),
        has_report=(folder / "report.html").is_file(),
        has_summary=(folder / "summary.txt").is_file(),
    )


def summarise_conformance(root: Path, folder: Path) -> ConformanceInfo:
    doc = _dict(_read_json(folder / "conformance.json"))
    engine = str(doc.get("engine") or folder.parent.name.removeprefix("conformance-"))
    counts = {str(k): v for k, v in _dict(doc.get("counts")).items() if _int(v) is not None}
    return ConformanceInfo(
        rel=folder.relative_to(root).as_posix(),
        time=_folder_time(folder, folder / "conformance.json"),
        engine=engine,
        counts=dict(sorted(counts.items())),
        seconds=_num(doc.get("seconds")),
        files=tuple(n for n in _CONFORMANCE_FILES if (folder / n).is_file()),
    )


def summarise_matrix(root: Path, folder: Path) -> MatrixInfo:
    doc = _read_json(folder / "matrix.json")
    cells = [c for c in doc if isinstance(c, dict)] if isinstance(doc, list) else None
    verdicts = Counter(str(c.get("verdict", "?")).lower() for c in cells or ())
    return MatrixInfo(
        rel=folder.relative_to(root).as_posix(),
        time=_folder_time(folder, folder / "matrix.json"),
        cells=len(cells) if cells is not None else None,
        verdicts=dict(sorted(verdicts.items())),
        files=tuple(n for n in _MATRIX_FILES if (folder / n).is_file()),
    )


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """("run" | "conformance" | "matrix", folder) for each folder found, by
    an explicit stack: no symlink is followed (`latest` would list the
    newest run twice; another could lead out of the root or round a loop)."""
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        names = {e.name for e in entries}
        if "spec.json" in names and "history.jsonl" in names:
            yield "run", folder
            continue  # a run folder holds no other run
        # A matrix or conformance folder is listed from its first moment (by
        # its stamp), so one still running, or interrupted, shows too.
        stamped = stamp_time(folder.name) is not None
        reports = names & {"conformance.json", "conformance.md"}
        if folder.parent.name.startswith("conformance-") and (stamped or reports):
            yield "conformance", folder
            continue  # its cell tables hold no runs
        if names & {"matrix.json", "matrix.md"} or (stamped and folder.parent.name == "matrix"):
            yield "matrix", folder
        if depth >= MAX_DEPTH:
            continue
        for e in entries:
            if e.name in SKIP_DIRS or e.name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append((Path(e.path), depth + 1))
            except OSError:
                continue


class Catalog:
    """The contents of one results root, re-walked on each `scan` and
    re-summarised per folder only when its files changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, Path], tuple[tuple[Any, ...], Any]] = {}

    def _cached(self, kind: str, folder: Path) -> Any:
        names = {"run": _RUN_FILES, "conformance": _CONFORMANCE_FILES, "matrix": _MATRIX_FILES}[kind]
        sig = _signature(folder, names)
        with self._lock:
            hit = self._cache.get((kind, folder))
        if hit is not None and hit[0] == sig:
            return hit[1]
        summarise = {"run": summarise_run, "conformance": summarise_conformance, "matrix": summarise_matrix}[kind]
        value = summarise(self.root, folder)
        with self._lock:
            self._cache[(kind, folder)] = (sig, value)
        return value

    def scan(self) -> Contents:
        runs: list[RunInfo] = []
        conformance: list[ConformanceInfo] = []
        matrices: list[MatrixInfo] = []
        seen: set[tuple[str, Path]] = set()
        for kind, folder in _walk(self.root):
            seen.add((kind, folder))
            value = self._cached(kind, folder)
            if kind == "run":
                runs.append(value)
            elif kind == "conformance":
                conformance.append(value)
            else:
                matrices.append(value)
        with self._lock:
            for key in [k for k in self._cache if k not in seen]:
                del self._cache[key]  # a deleted folder's summary
        runs.sort(key=lambda r: (r.time, r.rel), reverse=True)
        conformance.sort(key=lambda c: (c.time, c.rel), reverse=True)
        matrices.sort(key=lambda m: (m.time, m.rel), reverse=True)
        return Contents(runs, conformance, matrices)
