"""An engine release in a Python environment of its own, built on first use
and cached.

`--engine delta-rs==0.8.1` runs its client workers under an interpreter whose
site-packages hold that release and the libraries it was built against, and
nothing of the harness's own environment: the harness's code reaches the
worker through ``PYTHONPATH`` only (the worker imports no third-party package
of its own, ``tests/test_releases.py`` holds it to that).

An environment is built with uv from PyPI, resolving with
``--exclude-newer`` at a fixed date, so the same release resolves to the
same packages on any machine that sees the same registry. Its directory name
carries a digest of what was asked for (release, pinned libraries, Python,
the date), and ``env.json`` inside records what uv resolved. The cache keeps
its size under a limit by removing the environments used longest ago.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, venv_bin

CACHE_ENV = "DJ_ENV_CACHE"  # default ~/.cache/delta-jepsen/envs
LIMIT_ENV = "DJ_ENV_CACHE_LIMIT_MB"
DEFAULT_LIMIT_MB = 8000
# Resolution sees PyPI as it was on this day: a release's environment is the
# same wherever and whenever it is built.
EXCLUDE_NEWER = "2026-11-01T00:00:00Z"
BUILD_TIMEOUT_S = 900.0
IN_USE_S = 3600.0  # an environment used this recently is never removed to make room
_MARKER = "env.json"
# Set in env.json once the environment's modules are compiled. uv installs
# sources only, and an interpreter run with PYTHONDONTWRITEBYTECODE (as CI
# containers often are) never writes the bytecode it compiles: every worker
# of a release then compiled pyspark, pandas and pyarrow again, 4-5 s of CPU
# per process here, against 1.7 s with the bytecode in place.
_BYTECODE = "bytecode"


@dataclass(frozen=True)
class EnvRequest:
    """What one (engine, release) environment holds: exact pins."""

    engine: str
    release: str
    requirements: tuple[str, ...]

    @property
    def key(self) -> str:
        text = json.dumps(
            {
                "requirements": self.requirements,
                "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                "exclude_newer": EXCLUDE_NEWER,
            },
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        return f"{self.engine}-{self.release}-{self.key}"


@dataclass(frozen=True)
class ReleaseEnv:
    """A built environment: its interpreter and what it resolved to."""

    path: Path
    engine: str
    release: str
    resolved: dict[str, str]  # package -> version, as uv installed them
    bytecode: bool = False  # its modules compiled (see _BYTECODE)

    @property
    def python(self) -> str:
        return str(self.path / "bin" / "python")

    def bin(self, name: str) -> str:
        return str(self.path / "bin" / name)

    @property
    def site_packages(self) -> Path:
        found = sorted((self.path / "lib").glob("python*/site-packages"))
        if not found:
            raise HarnessError(f"environment {self.path} has no site-packages")
        return found[0]


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "delta-jepsen" / "envs"


def limit_bytes() -> int:
    raw = os.environ.get(LIMIT_ENV, str(DEFAULT_LIMIT_MB))
    try:
        return int(float(raw) * 1_000_000)
    except ValueError:
        raise HarnessError(f"${LIMIT_ENV}={raw!r} is not a number of megabytes") from None


def _load(path: Path) -> ReleaseEnv | None:
    try:
        meta = json.loads((path / _MARKER).read_text())
        return ReleaseEnv(path, meta["engine"], meta["release"], dict(meta["resolved"]), bool(meta.get(_BYTECODE)))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # half-built or foreign: not an environment


def _touch(env: ReleaseEnv) -> None:
    try:
        os.utime(env.path / _MARKER)  # last use, for the size limit's order
    except OSError:
        pass


@contextmanager
def _lock(name: str) -> Iterator[None]:
    """One builder per environment across processes (parallel tests, cells)."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".lock-{name}", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _uv(args: list[str], log: Path, what: str) -> None:
    code = ManagedProcess("uv", [venv_bin("uv"), *args], log).run(BUILD_TIMEOUT_S, what)
    if code != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
        raise HarnessError(f"{what} failed: {' / '.join(tail) or f'uv exited with code {code}'} (log: {log})")


def _compile(env: ReleaseEnv) -> ReleaseEnv:
    """Compile an environment built before builds compiled their bytecode,
    and mark it so (under its lock)."""
    log = cache_root() / f".compile-{env.path.name}.log"
    argv = [env.python, "-m", "compileall", "-q", "-j", "0", str(env.site_packages)]
    # compileall exits 1 when any module fails to compile (a package may ship
    # a Python 2 test file): what it compiled is kept either way.
    ManagedProcess("compileall", argv, log).run(BUILD_TIMEOUT_S, f"compiling {env.path.name}")
    meta = json.loads((env.path / _MARKER).read_text())
    meta[_BYTECODE] = True
    (env.path / _MARKER).write_text(json.dumps(meta, indent=2))
    return dataclasses.replace(env, bytecode=True)


def ensure(req: EnvRequest, progress: Callable[[str], None] | None = None) -> ReleaseEnv:
    """The environment for `req`, built now if the cache lacks it."""
    final = cache_root() / req.name
    env = _load(final)
    if env is not None and env.bytecode:
        _touch(env)
        return env
    with _lock(req.name):
        env = _load(final)  # another process built it while this one waited
        if env is not None:
            if not env.bytecode:
                env = _compile(env)
            _touch(env)
            return env
        t0 = time.monotonic()
        if progress:
            progress(f"building the environment of {req.engine}=={req.release}: {' '.join(req.requirements)}")
        # Built in place under the lock: a venv's scripts name their
        # interpreter by absolute path, so it must not move once built. The
        # marker is written last; a directory without it is a failed build.
        shutil.rmtree(final, ignore_errors=True)
        log = cache_root() / f".build-{req.name}.log"
        log.unlink(missing_ok=True)
        try:
            _uv(["venv", "--quiet", "--python", sys.executable, str(final)], log, f"creating {req.name}")
            _uv(
                [
                    "pip",
                    "install",
                    "--python",
                    str(final / "bin" / "python"),
                    "--exclude-newer",
                    EXCLUDE_NEWER,
                    "--compile-bytecode",
                    *req.requirements,
                ],
                log,
                f"installing {req.engine}=={req.release}",
            )
            meta = {
                "engine": req.engine,
                "release": req.release,
                "requirements": list(req.requirements),
                "python": sys.version.split()[0],
                "exclude_newer": EXCLUDE_NEWER,
                "resolved": _installed(final),
                _BYTECODE: True,
            }
            (final / _MARKER).write_text(json.dumps(meta, indent=2))
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
        if progress:
            progress(f"built {req.engine}=={req.release} in {time.monotonic() - t0:.0f} s ({final})")
    env = _load(final)
    assert env is not None
    keep_within_limit(protect=final)
    _prune_uv_cache()
    return env


def _prune_uv_cache() -> None:
    """uv keeps every wheel it built or fetched (a pyspark build is some
    300 MB): what no environment links any more goes, so that the cache's
    limit bounds the disk the builds take, not only the environments."""
    log = cache_root() / ".uv-prune.log"
    try:
        ManagedProcess("uv", [venv_bin("uv"), "cache", "prune"], log).run(BUILD_TIMEOUT_S, "pruning uv's cache")
    except HarnessError:
        pass  # a cache left as it was is only a larger one


def _installed(path: Path) -> dict[str, str]:
    """Package -> version, read from the environment's dist-info folders."""
    out: dict[str, str] = {}
    for meta in sorted((path / "lib").glob("python*/site-packages/*.dist-info")):
        name, _, version = meta.name[: -len(".dist-info")].partition("-")
        out[name.lower().replace("_", "-")] = version
    return out


def listed() -> list[tuple[ReleaseEnv, int, float]]:
    """Every built environment, with its size in bytes and last use (epoch s),
    most recently used first. A file hard-linked into several environments
    (uv links what it installs from its cache) counts once, in the first."""
    root = cache_root()
    if not root.is_dir():
        return []
    found = []
    for d in sorted(root.iterdir()):
        env = _load(d) if d.is_dir() and not d.name.startswith(".") else None
        if env is not None:
            found.append((env, (d / _MARKER).stat().st_mtime))
    found.sort(key=lambda t: -t[1])
    seen: set[tuple[int, int]] = set()
    return [(env, _size(env.path, seen), used) for env, used in found]


def _size(path: Path, seen: set[tuple[int, int]]) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                st = os.lstat(os.path.join(root, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


def remove(engine: str | None = None, release: str | None = None) -> list[ReleaseEnv]:
    """Remove the environments of `engine` (and `release`), all when both are None."""
    gone = []
    for env, _size_b, _used in listed():
        if engine is not None and env.engine != engine:
            continue
        if release is not None and env.release != release:
            continue
        with _lock(env.path.name):
            shutil.rmtree(env.path, ignore_errors=True)
        gone.append(env)
    return gone


def keep_within_limit(protect: Path | None = None) -> list[ReleaseEnv]:
    """Remove the least recently used environments until the cache fits its
    limit: never `protect` (the one a run is about to use), nor one used in
    the last hour (a run or a matrix may still be using it)."""
    envs = listed()
    total = sum(size for _env, size, _used in envs)
    gone = []
    for env, size, used in reversed(envs):
        if total <= limit_bytes():
            break
        if env.path == protect or used > time.time() - IN_USE_S:
            continue
        with _lock(env.path.name):
            shutil.rmtree(env.path, ignore_errors=True)
        total -= size
        gone.append(env)
    return gone
