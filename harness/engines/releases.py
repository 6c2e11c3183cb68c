"""Engine releases as a parameter: `--engine delta-rs==0.15.3`.

The plain name means the release this project pins (the harness's own
environment). A named release runs in an environment of its own
(:mod:`harness.engines.envs`), with the libraries that release was built
against pinned here, one row per range of releases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.core.errors import HarnessError
from harness.engines.deltars_api import OLDEST as DELTARS_OLDEST
from harness.engines.deltars_api import parse_release
from harness.engines.envs import EnvRequest

# The package each engine's release is the release of.
PACKAGES = {"delta-rs": "deltalake", "sail": "pysail", "delta-spark": "delta-spark", "spark-connect": "pyspark"}
# Engines whose release can be chosen; the others run their pinned release.
SELECTABLE = ("delta-rs", "delta-spark", "sail")
_RELEASE = re.compile(r"^\d+\.\d+(\.\d+)?([a-z]+\d*)?$")

# deltalake's releases and the pyarrow they accept (their own bounds: 0.10-0.12
# require pyarrow <= 12; up to 0.18 pyarrow 15+ breaks their writer), numpy
# below 2 for the pyarrow builds of that time. First matching row wins.
_DELTARS_LIBS: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...] = (
    ((0, 10, 0), ("pyarrow==14.0.2", "numpy==1.26.4")),
    ((0, 13, 0), ("pyarrow==12.0.0", "numpy==1.26.4")),
    ((0, 19, 0), ("pyarrow==14.0.2", "numpy==1.26.4")),
    ((99,), ("pyarrow==17.0.0", "numpy==1.26.4")),
)

# delta-spark's releases: the Spark each runs on (the lower bound its Python
# package declares, the Spark it was built against; its server runs from that
# pyspark's jars, its Scala from them too) and the Spark Connect client's
# libraries of that time. Spark 3.5 ships its Connect server as a separate
# artifact, and Maven Central serves it for 3.5.0, 3.5.1, 3.5.4 and later but
# not 3.5.2-3.5.3: releases built on 3.5.3 run on 3.5.4, the next patch.
DELTA_SPARK_OLDEST = "3.2.0"
_DELTA_SPARK_LIBS: tuple[tuple[tuple[int, ...], str, tuple[str, ...]], ...] = (
    ((3, 2, 1), "3.5.0", ("pandas==2.2.3", "pyarrow==14.0.2", "numpy==1.26.4")),
    ((4, 0, 0), "3.5.4", ("pandas==2.2.3", "pyarrow==14.0.2", "numpy==1.26.4")),
    ((4, 1, 0), "4.0.0", ("pandas==2.2.3", "pyarrow==17.0.0", "numpy==1.26.4")),
    # From 4.3 each release comes built for several Sparks, one artifact
    # each (delta-spark_4.0_2.13 is the Spark 4.0.1 build): these run on
    # the Spark 4.0 patch release the harness itself runs (its wheel is then
    # at hand).
    ((4, 5, 0), "4.0.5", ("pandas==2.2.3", "pyarrow==17.0.0", "numpy==1.26.4")),
)
# delta-spark 4.1 and 4.2 are built for Spark 4.1 only, which the harness
# does not run.
DELTA_SPARK_GAP = ((4, 1), (4, 2))
# What the harness's own code needs beside a Spark Connect client where a
# conformance worker runs in the release's environment and starts that
# release's servers itself: the store's client (copying template tables), the
# log reader and the process tools. None of it is on the engine's path (the
# engine is the JVM).
_SPARK_WORKER_LIBS = ("boto3", "networkx", "psutil")
# pysail's releases: Delta tables from 0.3.2 (0.3.0 and 0.3.1 refuse the
# format, 0.1-0.2 have no Delta at all).
# Before 0.7 the Spark Connect client is pyspark 3.5's: pyspark 4.0 cannot
# read those servers' DML results (a uint64 row count, after the commit); 0.7
# speaks pyspark 4.0's protocol. pyspark 3.5 wants numpy < 2, so pyarrow 17.
SAIL_OLDEST = "0.3.2"
_SAIL_LIBS: tuple[tuple[tuple[int, ...], str, tuple[str, ...]], ...] = (
    ((0, 7, 0), "3.5.4", ("pandas==2.2.3", "pyarrow==17.0.0", "numpy==1.26.4")),
    ((0, 8, 0), "4.0.1", ("pandas==2.2.3", "pyarrow==17.0.0", "numpy==1.26.4")),
)
OLDEST = {"delta-rs": DELTARS_OLDEST, "delta-spark": DELTA_SPARK_OLDEST, "sail": SAIL_OLDEST}
NEWEST_SERIES = {"delta-spark": (4, 4), "sail": (0, 7)}


@dataclass(frozen=True)
class EngineRelease:
    """`delta-rs` (the pinned release) or `delta-rs==0.8.1`."""

    name: str
    release: str | None = None

    def __str__(self) -> str:
        return self.name if self.release is None else f"{self.name}=={self.release}"


def parse_engine_release(entry: str, names: tuple[str, ...]) -> EngineRelease:
    name, sep, release = entry.strip().partition("==")
    name = name.strip()
    if name not in names:
        raise HarnessError(
            f"unknown engine {name!r}; valid: {', '.join(names)} (or several, comma-separated; "
            "a release as delta-rs==0.15.3)"
        )
    if not sep:
        return EngineRelease(name)
    release = release.strip()
    if not _RELEASE.match(release):
        raise HarnessError(f"--engine {entry.strip()}: {release!r} is not a release number (e.g. 0.15.3)")
    if name not in SELECTABLE:
        raise HarnessError(
            f"--engine {entry.strip()}: a release can be chosen for {', '.join(SELECTABLE)}; "
            f"{name} runs the release this project pins"
        )
    if parse_release(release) < parse_release(OLDEST[name]):
        raise HarnessError(f"--engine {entry.strip()}: the oldest {PACKAGES[name]} release supported is {OLDEST[name]}")
    newest = NEWEST_SERIES.get(name)
    if newest is not None and parse_release(release)[:2] > newest:
        raise HarnessError(
            f"--engine {entry.strip()}: {PACKAGES[name]} releases up to the {'.'.join(map(str, newest))} series "
            "are supported"
        )
    if name == "delta-spark" and parse_release(release)[:2] in DELTA_SPARK_GAP:
        raise HarnessError(
            f"--engine {entry.strip()}: delta-spark 4.1 and 4.2 are built for Spark 4.1, which the harness does "
            "not run; releases from 4.3 run on their Spark 4.0 build"
        )
    return EngineRelease(name, release)


def env_request(er: EngineRelease) -> EnvRequest:
    """The environment `er` runs in (er names a release)."""
    assert er.release is not None
    v = parse_release(er.release)
    package = f"{PACKAGES[er.name]}=={er.release}"
    if er.name == "delta-rs":
        libs = next(libs for below, libs in _DELTARS_LIBS if v < below)
        return EnvRequest(er.name, er.release, (package, *libs))
    spark_rows = {"delta-spark": _DELTA_SPARK_LIBS, "sail": _SAIL_LIBS}.get(er.name)
    if spark_rows is not None:
        spark, libs = next((spark, libs) for below, spark, libs in spark_rows if v < below)
        return EnvRequest(er.name, er.release, (package, f"pyspark[connect]=={spark}", *libs, *_SPARK_WORKER_LIBS))
    raise HarnessError(f"no environment recipe for {er}")
