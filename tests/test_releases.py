"""Engine releases as a parameter: parsing, environments and the API table.
Real runs of old releases are in tests/test_qualify.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.engines import ENGINE_NAMES, parse_engine_releases
from harness.engines.deltars import DELTARS_CAPABILITIES, capabilities_of
from harness.engines.deltars_api import DeltaRsApi
from harness.engines.releases import EngineRelease, env_request, parse_engine_release
from tests.conftest import REPO, run_cli


def test_an_engine_entry_names_a_release_or_the_pinned_one() -> None:
    assert parse_engine_releases("delta-rs==0.15.3,sail") == (
        EngineRelease("delta-rs", "0.15.3"),
        EngineRelease("sail"),
    )
    assert str(parse_engine_release(" delta-rs == 1.5.1 ", ENGINE_NAMES)) == "delta-rs==1.5.1"
    for bad, why in (
        ("delta-rs==latest", "not a release number"),
        ("delta-rs==0.7.0", "oldest deltalake release supported is 0.8.1"),
        ("deltars==1.0.0", "unknown engine"),
        ("delta-rs==1.0.0,delta-rs", "listed twice"),
    ):
        with pytest.raises(HarnessError, match=why):
            parse_engine_releases(bad)


def test_each_release_series_gets_the_pyarrow_it_accepts() -> None:
    def libs(release: str) -> tuple[str, ...]:
        return env_request(EngineRelease("delta-rs", release)).requirements

    assert libs("0.8.1") == ("deltalake==0.8.1", "pyarrow==14.0.2", "numpy==1.26.4")
    assert libs("0.11.0")[1] == "pyarrow==12.0.0"  # its own bound: pyarrow <= 12
    assert libs("0.18.2")[1] == "pyarrow==14.0.2"
    assert libs("1.5.1")[1] == "pyarrow==17.0.0"
    # The cache key is the request: another release or pin is another environment.
    assert env_request(EngineRelease("delta-rs", "0.9.0")).key != env_request(EngineRelease("delta-rs", "0.8.1")).key


def test_a_delta_spark_release_runs_on_the_spark_it_was_built_against() -> None:
    def req(release: str) -> tuple[str, ...]:
        return env_request(EngineRelease("delta-spark", release)).requirements

    assert req("3.2.0")[:2] == ("delta-spark==3.2.0", "pyspark[connect]==3.5.0")
    # Built on 3.5.3, whose Spark Connect server Maven Central does not serve: the next patch.
    assert req("3.3.2")[:2] == ("delta-spark==3.3.2", "pyspark[connect]==3.5.4")
    assert req("4.0.1")[:2] == ("delta-spark==4.0.1", "pyspark[connect]==4.0.0")
    assert "pyarrow==14.0.2" in req("3.3.2") and "pyarrow==17.0.0" in req("4.0.1")
    # From 4.3: the release's Spark 4.0 build, on the Spark 4.0 the harness runs.
    assert req("4.4.0")[:2] == ("delta-spark==4.4.0", "pyspark[connect]==4.0.5")
    from harness.engines.jars import Versions

    assert (
        Versions("4.0.1", "2.13", "3.4.1", "4.4.0").coordinates(["delta"])[0] == "io.delta:delta-spark_4.0_2.13:4.4.0"
    )
    assert Versions("4.0.0", "2.13", "3.4.1", "4.0.1").coordinates(["delta"])[0] == "io.delta:delta-spark_2.13:4.0.1"
    for bad, why in (
        ("delta-spark==3.1.0", "oldest delta-spark release supported is 3.2.0"),
        ("delta-spark==4.1.0", "built for Spark 4.1"),
        ("delta-spark==4.5.0", "up to the 4.4 series"),
    ):
        with pytest.raises(HarnessError, match=why):
            parse_engine_release(bad, ENGINE_NAMES)


def test_a_sail_release_gets_the_client_that_can_read_its_answers_and_the_ops_it_has() -> None:
    from harness.engines.sail import SAIL_CAPABILITIES, capabilities_of

    def req(release: str) -> tuple[str, ...]:
        return env_request(EngineRelease("sail", release)).requirements

    # pyspark 4.0 cannot read the DML results of Sail before 0.7.
    assert req("0.6.6")[:2] == ("pysail==0.6.6", "pyspark[connect]==3.5.4")
    assert req("0.7.2")[:2] == ("pysail==0.7.2", "pyspark[connect]==4.0.1")
    assert capabilities_of("0.3.7").ops == {
        "create-table",
        "create-table-at",
        "append",
        "read",
        "insert_select",
        "read-tables",
    }
    assert "update" not in capabilities_of("0.6.6").ops and "merge" in capabilities_of("0.6.6").ops
    assert "sail 0.5.3 lacks merge, read-as-of-time, set-properties, update" in capabilities_of("0.5.3").notes
    assert capabilities_of("0.7.2").ops == SAIL_CAPABILITIES.ops
    for bad, why in (("sail==0.3.1", "oldest pysail release supported is 0.3.2"), ("sail==0.8.0", "0.7 series")):
        with pytest.raises(HarnessError, match=why):
            parse_engine_release(bad, ENGINE_NAMES)


def test_an_old_delta_spark_release_refuses_the_coordinator_it_lacks() -> None:
    from harness.engines.deltaspark import COORDINATED, DeltaSparkEngine
    from harness.run.plan import RunSpec, resolve_log_store

    with pytest.raises(HarnessError, match="3.3.2 has no DynamoDB commit coordinator"):
        DeltaSparkEngine(COORDINATED, release="3.3.2")
    # Two clusters on S3: the coordinator where the release has one, else the
    # single-driver LogStore (the run then says it is outside the contract).
    assert resolve_log_store(RunSpec(engine="delta-spark==4.0.1", storage="s3", nodes=2)) == COORDINATED
    assert resolve_log_store(RunSpec(engine="delta-spark==3.3.2", storage="s3", nodes=2)) == "single-driver"


def test_a_release_keeps_its_engines_contract() -> None:
    from harness.core.contract import breaches

    found = breaches({"engine": "delta-spark==3.3.2", "storage": "s3", "nodes": 2, "log_store": "single-driver"})
    assert [b.engines for b in found] == [("delta-spark",)]


def test_the_loopback_shim_turns_a_wildcard_bind_into_loopback(tmp_path) -> None:
    from harness.engines.loopback import preload

    probe = (
        "import socket\n"
        "for fam, any_ in ((socket.AF_INET, '0.0.0.0'), (socket.AF_INET6, '::')):\n"
        "    s = socket.socket(fam); s.bind((any_, 0)); print(s.getsockname()[0]); s.close()\n"
        "s = socket.socket(); s.bind(('127.0.0.2', 0)); print(s.getsockname()[0])\n"
    )
    env = preload({k: v for k, v in os.environ.items() if k != "LD_PRELOAD"})
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # Wildcards become loopback; an address asked for is kept.
    assert out.stdout.split() == ["127.0.0.1", "::ffff:127.0.0.1", "127.0.0.2"]


def test_the_api_table_narrows_capabilities_to_what_a_release_has() -> None:
    oldest = capabilities_of(DeltaRsApi.of("0.8.1"))
    assert oldest.ops == {"create-table", "create-table-at", "append", "read", "overwrite"}
    assert not oldest.commit_version_known
    assert "no custom commit metadata" in oldest.notes
    assert capabilities_of(DeltaRsApi.of("0.12.0")).ops >= {"update", "delete", "merge", "optimize"}
    assert "insert_select" not in capabilities_of(DeltaRsApi.of("0.21.0")).ops  # no QueryBuilder yet
    newest = capabilities_of(DeltaRsApi.of("1.6.6"))
    assert newest.ops == DELTARS_CAPABILITIES.ops and newest.commit_version_known
    assert DeltaRsApi.of("0.9.0").write_refreshes and not DeltaRsApi.of("1.1.0").write_refreshes


def test_a_worker_imports_no_third_party_package_of_its_own() -> None:
    """A release's environment holds the engine and its libraries only: the
    worker's own imports must be the standard library and the project."""
    code = (
        "import sys, harness.run.worker_main\n"
        "own = ('harness', 'workloads', 'checkers', 'nemeses', '__main__')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names) - set(own)))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().replace("'", '"')) == []


def _fake_env(root: Path, release: str, size: int, used: float) -> Path:
    """A cached environment as `ensure` leaves one (its marker last)."""
    d = root / f"delta-rs-{release}-000000000000"
    (d / "lib").mkdir(parents=True)
    (d / "lib" / "blob").write_bytes(b"x" * size)
    marker = d / "env.json"
    marker.write_text(json.dumps({"engine": "delta-rs", "release": release, "resolved": {"deltalake": release}}))
    os.utime(marker, (used, used))
    return d


def test_the_cache_lists_and_keeps_within_its_limit_removing_the_least_recently_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.engines import envs

    monkeypatch.setenv(envs.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(envs.LIMIT_ENV, "2.5")  # MB
    now = time.time()
    old = _fake_env(tmp_path, "0.8.1", 1_000_000, now - 3 * 86400)
    older = _fake_env(tmp_path, "0.9.0", 1_000_000, now - 4 * 86400)
    recent = _fake_env(tmp_path, "1.5.1", 1_000_000, now - 60)  # in use: never removed
    (tmp_path / "delta-rs-1.0.0-000000000000").mkdir()  # a failed build: no marker, not listed
    assert [e.release for e, _s, _u in envs.listed()] == ["1.5.1", "0.8.1", "0.9.0"]
    new = _fake_env(tmp_path, "1.6.6", 1_000_000, now)
    gone = envs.keep_within_limit(protect=new)
    assert [e.release for e in gone] == ["0.9.0", "0.8.1"]
    assert recent.is_dir() and new.is_dir() and not old.exists() and not older.exists()
    out = run_cli("envs", env={envs.CACHE_ENV: str(tmp_path)})
    assert out.returncode == 0 and "2 environment(s), 2 MB of 2 MB" in out.stdout, out.stdout
    assert run_cli("envs", "--remove", "delta-rs==1.5.1", env={envs.CACHE_ENV: str(tmp_path)}).returncode == 0
    assert not recent.exists() and new.is_dir()


def test_an_environment_built_without_bytecode_is_compiled_once_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.engines import envs

    monkeypatch.setenv(envs.CACHE_ENV, str(tmp_path))
    req = envs.EnvRequest("delta-rs", "0.8.1", ("deltalake==0.8.1",))
    d = tmp_path / req.name
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True, timeout=120)
    (site,) = (d / "lib").glob("python*/site-packages")
    (site / "engine_mod.py").write_text("VALUE = 1\n")
    (d / "env.json").write_text(json.dumps({"engine": "delta-rs", "release": "0.8.1", "resolved": {}}))
    env = envs.ensure(req)
    (pyc,) = (site / "__pycache__").glob("engine_mod.*.pyc")
    assert json.loads((d / "env.json").read_text())["bytecode"] is True
    # Read, not compiled again, by an interpreter that writes no bytecode.
    stamp = pyc.stat().st_mtime_ns
    out = subprocess.run(
        [env.python, "-v", "-c", "import engine_mod"],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and f"code object from '{pyc}'" in out.stderr, out.stderr[-2000:]
    assert envs.ensure(req).path == d and pyc.stat().st_mtime_ns == stamp


# The by-hand reproduction of the findings on older releases (docs:
# findings, older releases of delta-rs), against each release alone.
_STALE_DELETE = """
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
uri = {uri!r}
schema = pa.schema([("k", pa.int64())])
write_deltalake(uri, pa.table({{"k": [1, 2, 3, 4]}}, schema=schema))
write_deltalake(uri, pa.table({{"k": [10, 11, 12, 13]}}, schema=schema), mode="append")
a = DeltaTable(uri)
DeltaTable(uri).delete("k = 10")
try:
    a.delete("k = 1")
    first = "ok"
except Exception as e:
    first = type(e).__name__ + ": " + str(e)
a.update_incremental()
a.delete("k = 11")
print(first)
print(sorted(DeltaTable(uri).to_pyarrow_table().column("k").to_pylist()))
"""


@pytest.mark.soak
@pytest.mark.parametrize(
    "release,first,rows",
    [
        ("0.12.0", "ok", [2, 3, 4, 10, 11, 12, 12, 13, 13]),
        ("0.14.0", "ok", [2, 3, 4, 10, 11, 12, 12, 13, 13]),
        ("0.15.3", "DeltaError: Generic DeltaTable error: Version mismatch", [2, 3, 4, 12, 13]),
        ("0.16.4", "DeltaError: Generic DeltaTable error: Version mismatch", [2, 3, 4, 12, 13]),
        ("0.17.4", "ok", [2, 3, 4, 12, 13]),
    ],
)
def test_a_delete_past_a_concurrent_commit_on_older_releases(
    release: str, first: str, rows: list[int], tmp_path: Path
) -> None:
    from harness.engines.envs import ensure

    env = ensure(env_request(EngineRelease("delta-rs", release)))
    out = subprocess.run(
        [env.python, "-c", _STALE_DELETE.format(uri=str(tmp_path / "t"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout.splitlines()[:2] == [first, str(rows)], out.stdout + out.stderr
