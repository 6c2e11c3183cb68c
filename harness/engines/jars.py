"""Delta's jars for a Spark JVM: resolved from Maven Central on first use,
cached, or taken from a directory of jars (offline machines).

pyspark ships Apache Spark's own jars but none of Delta's. The JVM engine
needs, beside them:
- ``delta`` : delta-spark and delta-storage of the release that matches the
  installed ``delta-spark`` Python package;
- ``s3``    : hadoop-aws of the Hadoop release pyspark ships, and the AWS SDK
  bundle it declares (for ``s3a://``);
- ``dynamodb``: delta-storage-s3-dynamodb of the same Delta release (the
  ``S3DynamoDBLogStore``), with the AWS SDK it declares;
- ``coordinator``: the AWS SDK v1 DynamoDB client, which the DynamoDB commit
  coordinator inside delta-spark's own jar (coordinated commits) needs and
  delta-spark declares "provided": the release Delta builds against.

Spark 3.5's pyspark ships no Spark Connect server (Spark 4 does): for it,
``spark-connect`` of the same Spark release joins the coordinates.

Resolution uses Apache Ivy, which pyspark ships (it is what Spark's own
``spark.jars.packages`` runs), in a JVM of its own, once per set of
coordinates: the resolved file list is cached under a key made of the
coordinates and Spark's version, so changing the pyspark or delta-spark pins
resolves anew and never reuses another release's jars. Artifacts that
Spark's own jars already provide (Scala, Jackson, ...) are left out: Spark's
copies win on its class path anyway.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
FEATURES = ("delta", "s3", "dynamodb", "coordinator")
# What delta-spark 4.0 builds its DynamoDB code against (its build.sbt).
AWS_SDK_V1 = "1.12.262"
CACHE_ENV = "DJ_JAR_CACHE"  # where resolved jars are kept (default ~/.cache/delta-jepsen/jars)
JARS_DIR_ENV = "DJ_SPARK_JARS"  # a directory of jars to use instead of Maven Central
RESOLVE_TIMEOUT_S = 900.0

# An artifact file name: <name>-<version>.jar, the version starting with a digit.
_JAR_NAME = re.compile(r"^(?P<name>.+?)-(?P<version>\d[\w.\-]*)\.jar$")


def spark_home() -> Path:
    """The Spark of the harness's own environment (pyspark ships its jars)."""
    import pyspark

    return Path(pyspark.__file__).parent


def _spark_jar_versions(home: Path | None = None) -> dict[str, str]:
    out = {}
    for p in ((home or spark_home()) / "jars").glob("*.jar"):
        m = _JAR_NAME.match(p.name)
        if m:
            out[m.group("name")] = m.group("version")
    return out


def _release_tuple(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release)[:3])


@dataclass(frozen=True)
class Versions:
    """What the installed packages pin; every coordinate follows from it."""

    spark: str
    scala: str  # binary version, e.g. 2.13
    hadoop: str
    delta: str
    home: Path | None = None  # the Spark these jars join; None: the harness's own
    connect: bool = False  # Spark ships no Spark Connect server: fetch it

    @classmethod
    def installed(cls) -> Versions:
        from importlib.metadata import PackageNotFoundError, version

        try:
            delta = version("delta-spark")
        except PackageNotFoundError:
            raise HarnessError("the delta-spark Python package is not installed; pip install -e '.[dev]'") from None
        return cls.of(spark_home(), version("pyspark"), delta)

    @classmethod
    def of(cls, home: Path, spark: str, delta: str) -> Versions:
        """The jars Delta `delta` needs beside the Spark at `home` (a pyspark
        package folder), e.g. a release's own environment's."""
        jars = _spark_jar_versions(home)
        scala, hadoop = jars.get("scala-library"), jars.get("hadoop-client-api")
        if not scala or not hadoop:
            raise HarnessError(f"pyspark at {home} ships no scala-library or hadoop-client-api jar")
        connect = not any(name.startswith("spark-connect_") for name in jars)
        own = home == spark_home()
        return cls(spark, ".".join(scala.split(".")[:2]), hadoop, delta, None if own else home, connect)

    @property
    def delta_artifact(self) -> str:
        """delta-spark's Maven artifact for this Spark: from Delta 4.3 one per
        Spark it is built for (delta-spark_4.0_2.13), before that one only."""
        if _release_tuple(self.delta) >= (4, 3):
            return f"delta-spark_{'.'.join(self.spark.split('.')[:2])}_{self.scala}"
        return f"delta-spark_{self.scala}"

    @property
    def spark_home(self) -> Path:
        return self.home or spark_home()

    def coordinates(self, features: Iterable[str]) -> list[str]:
        fs = set(features) | {"delta"}
        out = [f"io.delta:{self.delta_artifact}:{self.delta}", f"io.delta:delta-storage:{self.delta}"]
        if self.connect:
            out.append(f"org.apache.spark:spark-connect_{self.scala}:{self.spark}")
        if fs & {"s3", "dynamodb", "coordinator"}:
            out.append(f"org.apache.hadoop:hadoop-aws:{self.hadoop}")
        if "dynamodb" in fs:
            out.append(f"io.delta:delta-storage-s3-dynamodb:{self.delta}")
        if "coordinator" in fs:
            out.append(f"com.amazonaws:aws-java-sdk-dynamodb:{AWS_SDK_V1}")
        return out

    def required_files(self, features: Iterable[str]) -> list[str]:
        """The jar file names a directory of jars must hold, as Maven names them."""
        return [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in self.coordinates(features)]


@dataclass(frozen=True)
class JarSet:
    jars: tuple[Path, ...]
    coordinates: tuple[str, ...]
    source: str  # "maven-central" or "dir:<path>"

    def describe(self) -> dict[str, object]:
        """For spec.json: what was on the class path, never a local path of the cache."""
        return {
            "source": "maven-central" if self.source == "maven-central" else "local directory",
            "coordinates": list(self.coordinates),
            "jars": sorted(p.name for p in self.jars),
        }


def cache_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "delta-jepsen" / "jars"


def _ivy_module(coords: list[str]) -> str:
    deps = "\n".join(
        f'    <dependency org="{g}" name="{a}" rev="{v}" conf="default->default"/>'
        for g, a, v in (c.split(":") for c in coords)
    )
    return (
        '<ivy-module version="2.0">\n  <info organisation="delta-jepsen" module="spark-jars"/>\n'
        '  <configurations><conf name="default"/></configurations>\n'
        f"  <dependencies>\n{deps}\n  </dependencies>\n</ivy-module>\n"
    )


def _ivy_settings(repo: str) -> str:
    # Maven Central only (Ivy's default chain also tries a local ~/.ivy2
    # and a shared folder; a run must not pick up jars from those).
    return (
        '<ivysettings>\n  <settings defaultResolver="central"/>\n  <resolvers>\n'
        f'    <ibiblio name="central" m2compatible="true" root="{repo}"/>\n'
        "  </resolvers>\n</ivysettings>\n"
    )


_DOWNLOAD = re.compile(r"\[SUCCESSFUL \] (\S+?)!(\S+) \(\d+ms\)")
_UNRESOLVED = re.compile(r"::\s+(\S+#\S+;\S+): not found")


def _run_ivy(coords: list[str], work: Path, progress: Callable[[str], None] | None, home: Path) -> list[Path]:
    work.mkdir(parents=True, exist_ok=True)
    (work / "ivy.xml").write_text(_ivy_module(coords))
    repo = os.environ.get("DJ_MAVEN_REPO", MAVEN_CENTRAL)
    (work / "ivysettings.xml").write_text(_ivy_settings(repo))
    ivy = sorted((home / "jars").glob("ivy-*.jar"))
    if not ivy:
        raise HarnessError(f"pyspark at {home} ships no ivy jar to resolve Delta's jars with")
    cp_file = work / "classpath.txt"
    cp_file.unlink(missing_ok=True)
    argv = [
        "java",
        "-cp",
        str(ivy[-1]),
        "org.apache.ivy.Main",
        "-settings",
        str(work / "ivysettings.xml"),
        "-ivy",
        str(work / "ivy.xml"),
        "-cache",
        str(cache_root() / "ivy-cache"),
        "-confs",
        "default",
        "-cachepath",
        str(cp_file),
    ]
    log = work / "ivy.log"

    proc = ManagedProcess("ivy", argv, log, pipes=False).start()
    fetched: list[str] = []
    t0 = time.monotonic()
    deadline = t0 + RESOLVE_TIMEOUT_S
    seen = 0
    try:
        while proc.alive():
            if time.monotonic() > deadline:
                raise HarnessError(f"resolving Delta's jars took over {RESOLVE_TIMEOUT_S:.0f} s (log: {log})")
            text = log.read_text(errors="replace")
            new = _DOWNLOAD.findall(text[seen:])
            seen = len(text)
            for _, f in new:
                fetched.append(f)
                if progress:
                    progress(
                        f"fetching Delta's jars from Maven Central: {len(fetched)} downloaded "
                        f"({time.monotonic() - t0:.0f} s), last {f}"
                    )
            time.sleep(0.2)
        code = proc.proc.wait() if proc.proc is not None else 1
    finally:
        proc.stop(grace=1.0)
    text = log.read_text(errors="replace")
    if code != 0 or not cp_file.exists():
        missing = _UNRESOLVED.findall(text)
        what = f"not found: {', '.join(missing)}" if missing else f"ivy exited with code {code}"
        raise HarnessError(
            f"could not resolve Delta's jars from {repo} ({what}); on an offline machine pass "
            f"a directory of jars with --spark-jars DIR (log: {log})"
        )
    if progress and fetched:
        progress(f"fetched {len(fetched)} jars in {time.monotonic() - t0:.0f} s")
    return [Path(p) for p in cp_file.read_text().strip().split(os.pathsep) if p]


def _not_in_spark(jars: Iterable[Path], home: Path) -> list[Path]:
    spark = _spark_jar_versions(home)
    out = []
    for p in jars:
        m = _JAR_NAME.match(p.name)
        if m and m.group("name") in spark:
            continue
        out.append(p)
    return out


def _from_dir(d: Path, versions: Versions, features: Iterable[str]) -> JarSet:
    if not d.is_dir():
        raise HarnessError(f"--spark-jars {d}: no such directory")
    jars = sorted(d.glob("*.jar"))
    names = {p.name for p in jars}
    missing = [n for n in versions.required_files(features) if n not in names]
    if missing:
        # A stale directory (another Delta or Hadoop release) must not be used.
        found = sorted(n for n in names if n.startswith(("delta-spark_", "delta-storage", "hadoop-aws")))
        raise HarnessError(
            f"--spark-jars {d} lacks {', '.join(missing)} (pyspark {versions.spark}, delta-spark "
            f"{versions.delta}); it has {', '.join(found) or 'no Delta jar'}"
        )
    return JarSet(tuple(_not_in_spark(jars, versions.spark_home)), tuple(versions.coordinates(features)), f"dir:{d}")


def resolve(
    features: Iterable[str] = ("delta",),
    jar_dir: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    versions: Versions | None = None,
) -> JarSet:
    """The jars a Delta Spark JVM needs for `features`, fetched on first use;
    `versions`: another Delta and Spark than the harness's own."""
    features = sorted(set(features) | {"delta"})
    bad = [f for f in features if f not in FEATURES]
    if bad:
        raise HarnessError(f"unknown jar feature {bad[0]!r}; valid: {', '.join(FEATURES)}")
    versions = versions or Versions.installed()
    jar_dir = jar_dir or os.environ.get(JARS_DIR_ENV)
    if jar_dir:
        return _from_dir(Path(jar_dir), versions, features)
    coords = versions.coordinates(features)
    key = hashlib.sha256(json.dumps([versions.spark, coords]).encode()).hexdigest()[:16]
    manifest = cache_root() / "resolved" / f"{key}.json"
    with cache_lock():
        try:
            doc = json.loads(manifest.read_text())
            jars = [Path(p) for p in doc["jars"]]
            if doc.get("coordinates") == coords and all(p.is_file() for p in jars):
                return JarSet(tuple(jars), tuple(coords), "maven-central")
        except (OSError, ValueError, KeyError, TypeError):
            pass
        home = versions.spark_home
        jars = _not_in_spark(_run_ivy(coords, cache_root() / "work" / key, progress, home), home)
        manifest.parent.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"spark": versions.spark, "coordinates": coords, "jars": [str(p) for p in jars]}, indent=2)
            + "\n"
        )
        os.replace(tmp, manifest)
        return JarSet(tuple(jars), tuple(coords), "maven-central")


_LOCK = threading.Lock()


@contextmanager
def cache_lock() -> Iterator[None]:
    """One resolver at a time per cache, across processes (parallel tests,
    matrix cells): Ivy's cache is not safe for concurrent writers."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with _LOCK, open(root / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def print_progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


__all__ = ["FEATURES", "JarSet", "Versions", "cache_root", "print_progress", "resolve", "spark_home"]
