"""A class-data sharing archive (AppCDS) for the Spark Connect JVMs.

A delta-spark node loads some 20,000 classes of Spark, Delta and the AWS SDK
before it answers and over its warm-up. Java 17 can record the classes a JVM
loaded into an archive at its exit (`-XX:ArchiveClassesAtExit`) and map that
archive into later JVMs (`-XX:SharedArchiveFile`), which then skip parsing
and verifying them. Measured here, one node: ready in 2-3 s instead of 5,
warmed in 13-15 s instead of 15-17, 20-24 CPU-seconds instead of 25-29.

One archive per JDK, jar set and JVM options, in the jar cache. The first
JVM to find none records it (that JVM runs slower, once per machine) under a
lock, to a file of its own, renamed into place only after a clean exit; a
JVM that was killed leaves nothing. A stale or mismatched archive is
ignored by the JVM (it runs without one), never an error.

Recording is dear: a 2-node run that records costs about 2x the CPU of one
that maps the archive (measured here: 137 CPU-seconds against 66). The test
suite alone starts JVMs on six jar sets (the harness's Spark on a local
directory, S3 and the commit coordinator; delta-spark 3.3 on two; 4.4 on
one), so the cache keeps more archives than that, and prunes first those
whose class path is gone (a removed checkout's virtualenv): a cap of three
had the suite record one jar set's archive again after another's evicted it.

A JVM maps an archive only on the class path it was recorded on: the same
paths, and files of the same size and modification time. The harness's own
Spark lives in its virtualenv, which a fresh checkout installs anew; so its
JVMs start from a copy of that Spark made of hard links in the cache, named
by the files it holds (`stable_spark_home`), and a new virtualenv of the same
pyspark finds the copy, and the archives recorded on it, already there.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from harness.engines.jars import cache_root

# DJ_SPARK_CDS=0 turns the archive off (say, to time a JVM without it);
# DJ_SPARK_CDS_DIR puts it elsewhere than the jar cache.
ENV = "DJ_SPARK_CDS"
DIR_ENV = "DJ_SPARK_CDS_DIR"
# A lock older than this is a dead recorder's (a SIGKILLed harness).
STALE_LOCK_S = 900.0
# Seconds a recording JVM gets to write the archive as it stops.
DUMP_GRACE_S = 60.0
# Archives kept per cache (some 210 MB each): a new venv or jar set is a new
# key; when one is recorded, those whose class path is gone go, then the
# least recently used beyond these.
KEEP_ARCHIVES = 8
# Linked copies of the harness's Spark kept (another pyspark is another).
KEEP_HOMES = 2


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java") or "java"
    return os.path.realpath(java)


class ClassArchive:
    def __init__(self, classpath: list[str], java_opts: str):
        java = _java()
        try:
            stamp = os.stat(java).st_mtime_ns
        except OSError:
            stamp = 0
        key = hashlib.sha256(json.dumps([java, stamp, classpath, java_opts]).encode()).hexdigest()[:16]
        self.classpath = list(classpath)
        root = Path(os.environ[DIR_ENV]) if os.environ.get(DIR_ENV) else cache_root() / "cds"
        self.path = root / f"spark-connect-{key}.jsa"
        self.lock = self.path.with_suffix(".lock")
        self.recording: dict[str, Path] = {}  # node -> the file its JVM records to

    @staticmethod
    def enabled() -> bool:
        return os.environ.get(ENV, "1") != "0"

    def java_option(self, node: str) -> str:
        """The JVM option for node `node`'s start: map the archive, record
        it, or (another JVM is recording) nothing."""
        if not self.enabled():
            return ""
        self.discard(node)  # a restarted node: its killed JVM recorded nothing
        if self.path.is_file():
            try:
                os.utime(self.path)  # used now: the last to be pruned
            except OSError:
                pass
            return f"-XX:SharedArchiveFile={self.path}"
        if self.recording or not self._take_lock():
            return ""
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.{node}.tmp")
        self.recording[node] = tmp
        return f"-XX:ArchiveClassesAtExit={tmp}"

    def finish(self, node: str, exited_cleanly: bool) -> None:
        """After node `node`'s JVM ended: keep what it recorded, if whole."""
        tmp = self.recording.pop(node, None)
        if tmp is None:
            return
        try:
            if exited_cleanly and tmp.is_file() and tmp.stat().st_size > 0:
                classpath_file(self.path).write_text(json.dumps(self.classpath))
                os.replace(tmp, self.path)
                self._prune()
        finally:
            tmp.unlink(missing_ok=True)
            self.lock.unlink(missing_ok=True)

    def _prune(self) -> None:
        """Drop the archives whose class path is gone, then keep the
        KEEP_ARCHIVES most recently used. A JVM that has one mapped keeps
        its pages after the unlink."""
        others = []
        for p in self.path.parent.glob("spark-connect-*.jsa"):
            if p == self.path:
                continue
            if _class_path_gone(p):
                _remove(p)
            else:
                others.append(p)
        for p in _beyond_most_recent(others, KEEP_ARCHIVES - 1):
            _remove(p)

    def discard(self, node: str) -> None:
        self.finish(node, exited_cleanly=False)

    def _take_lock(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                os.close(os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return True
            except FileExistsError:
                try:
                    if time.time() - self.lock.stat().st_mtime < STALE_LOCK_S:
                        return False
                    self.lock.unlink()
                except FileNotFoundError:
                    pass
        return False


def classpath_file(archive: Path) -> Path:
    return archive.with_suffix(".classpath.json")


def _class_path_gone(archive: Path) -> bool:
    """Whether an entry of the class path `archive` was recorded on is gone
    (an archive from before these were kept: not known, so not gone)."""
    try:
        classpath = json.loads(classpath_file(archive).read_text())
    except (OSError, ValueError):
        return False
    return not isinstance(classpath, list) or not all(os.path.exists(str(p)) for p in classpath)


def _remove(archive: Path) -> None:
    archive.unlink(missing_ok=True)
    classpath_file(archive).unlink(missing_ok=True)


_stable_homes: dict[Path, Path] = {}


def stable_spark_home(home: Path) -> Path:
    """`home` (a pyspark folder) as a folder of hard links in the cache,
    named by the files it holds; `home` itself where links cannot be made
    (the cache on another file system) or the archive is off."""
    if not ClassArchive.enabled():
        return home
    if home in _stable_homes and _stable_homes[home].is_dir():
        return _stable_homes[home]
    files = sorted(
        p.relative_to(home).as_posix() for p in home.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    key = _contents_key(home, files)
    root = cache_root() / "spark-homes"
    dest = root / f"{home.name}-{key}"
    if not dest.is_dir():
        tmp = root / f".{dest.name}.{os.getpid()}.tmp"
        try:
            for rel in files:
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(home / rel, tmp / rel)
            os.rename(tmp, dest)
        except OSError:
            if not dest.is_dir():  # not another process's copy that won the race
                return home
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        _prune_homes(root, dest)
    try:
        os.utime(dest)  # used now: the last to be pruned
    except OSError:
        pass
    _stable_homes[home] = dest
    return dest


def _contents_key(home: Path, files: list[str]) -> str:
    """What names a Spark's files: the small ones (the launchers, pyspark's
    version) by content, the jars by name and size."""
    h = hashlib.sha256()
    for rel in files:
        path = home / rel
        size = path.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if size <= 65536:
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _prune_homes(root: Path, keep: Path) -> None:
    homes = [p for p in root.iterdir() if p != keep and p.is_dir() and not p.name.startswith(".")]
    for p in _beyond_most_recent(homes, KEEP_HOMES - 1):
        shutil.rmtree(p, ignore_errors=True)


def _beyond_most_recent(paths: list[Path], keep: int) -> list[Path]:
    """`paths` but the `keep` most recently used (modified); one gone
    meanwhile is left out."""
    used = []
    for p in paths:
        try:
            used.append((p.stat().st_mtime, p))
        except OSError:
            continue
    return [p for _, p in sorted(used, reverse=True)[keep:]]
