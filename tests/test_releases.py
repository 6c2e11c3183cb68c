"""Engine releases as a parameter: parsing, environments, the API table, and
a bug of an old release found again by running it.

deltalake 0.8.1 checks no conflicts (fixed in 0.9.0): two transfers that
each read the table and overwrite it both commit, and every account is then
in the table twice. The harness, run on each release in an environment of
its own, must say so of 0.8.1 and not of 0.9.0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.engines import ENGINE_NAMES, parse_engine_releases
from harness.engines.deltars import DELTARS_CAPABILITIES, capabilities_of
from harness.engines.deltars_api import DeltaRsApi
from harness.engines.releases import EngineRelease, env_request, parse_engine_release
from tests.conftest import REPO, load_results, only_run_dir, run_cli


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


def _run(results_dir: Path, release: str) -> tuple[subprocess.CompletedProcess[str], Path, dict]:
    proc = run_cli(
        "run",
        "--workload",
        "bank-overwrite",
        "--engine",
        f"delta-rs=={release}",
        "--storage",
        "local",
        "--time-limit",
        "6",
        "--seed",
        "7",
        "--no-progress",
        "--results-dir",
        str(results_dir),
        timeout=600,
    )
    run_dir = only_run_dir(results_dir)
    return proc, run_dir, load_results(run_dir)


def _removed_twice(table: Path) -> dict[int, list[str]]:
    """Commits that remove a file an earlier commit already removed: a
    transaction committed over a snapshot it did not conflict-check."""
    removed: set[str] = set()
    out: dict[int, list[str]] = {}
    for f in sorted((table / "_delta_log").glob("*.json")):
        version = int(f.stem)
        for line in f.read_text().splitlines():
            rm = json.loads(line).get("remove") if line.strip() else None
            if rm is None:
                continue
            if rm["path"] in removed:
                out.setdefault(version, []).append(rm["path"])
            removed.add(rm["path"])
    return out


@pytest.mark.integration
def test_deltalake_0_8_1_commits_concurrent_overwrites_and_duplicates_rows(results_dir: Path) -> None:
    proc, run_dir, doc = _run(results_dir, "0.8.1")
    assert proc.returncode == 1, proc.stderr[-2000:]
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["versions"]["deltalake"] == "0.8.1", spec["versions"]
    checks = {c["checker"]: c for c in doc["checkers"]}
    wrong = [a for a in checks["bank"]["anomalies"] if a["kind"] == "wrong-total"]
    assert wrong, checks["bank"]["explanation"]
    assert any(a["kind"] == "duplicate-row" for a in checks["duplicates"]["anomalies"])
    # The cause, read from the log: the first version whose total is wrong
    # removes a file an earlier commit had removed (both overwrote one
    # snapshot), and no transfer ever failed on a conflict.
    stale = _removed_twice(run_dir / "table")
    first = min(v for a in wrong for v in a["versions"])
    assert first in stale, (first, sorted(stale)[:10])
    history = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines() if x.strip()]
    assert not [e for e in history if e["type"] == "fail"], "0.8.1 has no conflict check to fail an op"


@pytest.mark.integration
def test_deltalake_0_9_0_fails_the_later_overwrite_and_keeps_the_total(results_dir: Path) -> None:
    proc, run_dir, doc = _run(results_dir, "0.9.0")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), [
        (c["checker"], c["verdict"]) for c in doc["checkers"]
    ]
    assert not _removed_twice(run_dir / "table")
    history = [json.loads(x) for x in (run_dir / "history.jsonl").read_text().splitlines() if x.strip()]
    classes = {e["error"]["class"] for e in history if e["type"] == "fail"}
    assert classes == {"ConcurrentDeleteDeleteException"}, classes
