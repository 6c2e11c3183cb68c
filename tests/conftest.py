from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import harness  # noqa: F401  (before any test imports gRPC: see harness/__init__.py)
from tests.known import DELTA_SPARK_COORDINATOR_AGAIN, DELTA_SPARK_SINGLE_DRIVER, EXPECTED_XFAILS, assert_only_known

REPO = Path(__file__).resolve().parent.parent


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `delta-jepsen ARGS` as a user would, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def still_running(pids: Iterable[int]) -> list[int]:
    """Those of `pids` still alive; a zombie counts as gone (it has exited,
    only its exit status waits to be collected)."""
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def connect_servers(procs: Iterable[Any]) -> list[Any]:
    """The Spark Connect server JVMs among `procs` (psutil processes)."""
    import psutil

    from harness.engines.deltaspark import CONNECT_SERVER

    out = []
    for p in procs:
        try:
            if CONNECT_SERVER in p.cmdline():
                out.append(p)
        except psutil.Error:
            pass
    return out


def load_results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def only_run_dir(results: Path) -> Path:
    runs = [
        p.parent
        for p in results.glob("*/*/spec.json")
        if not p.parent.parent.is_symlink() and p.parent.parent.name != "latest"
    ]
    assert len(runs) == 1, runs
    return runs[0]


def assert_valid_run_folder(res: subprocess.CompletedProcess[str], results_dir: Path) -> tuple[Path, dict]:
    """A run that exited 0 with every checker valid left a folder a re-run
    and a re-check need, and no secret; checking it again without any
    engine gives the same verdict. Its folder and results.json."""
    assert res.returncode == 0, res.stdout + res.stderr
    assert "verdict: VALID" in res.stdout
    run_dir = only_run_dir(results_dir)
    doc = load_results(run_dir)
    assert doc["verdict"] == "valid"
    assert doc["history"]["ok"] > 0
    assert doc["log"]["latest_version"] >= 1
    assert all(c["verdict"] == "valid" for c in doc["checkers"]), doc["checkers"]
    spec = json.loads((run_dir / "spec.json").read_text())
    assert spec["spec"]["seed"] is not None and "delta-jepsen run" in spec["repro"]
    for f in run_dir.rglob("*"):
        if f.is_file() and f.suffix in (".json", ".jsonl", ".txt", ".html", ".svg"):
            assert "delta-jepsen-secret" not in f.read_text(errors="replace"), f
    assert doc["report"] == "report.html" and (run_dir / "report.html").is_file(), doc.get("report_error")
    assert (results_dir / "latest").resolve() == run_dir.resolve()
    again = run_cli("check", str(run_dir))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "verdict: VALID" in again.stdout
    return run_dir, doc


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    return d


def assert_only_known_findings(doc: dict, run_dir: Path, engine: str) -> None:
    """A run under faults that keep put-if-absent (kill, pause, s3-errors,
    latency, partition, clock, ambiguous) explains no anomaly by its faults:
    every checker is valid, or the run shows a known deviation of `engine`
    with its evidence (tests/known.py), and is xfailed naming it."""
    assert_only_known(doc, run_dir, KNOWN_UNDER_FAULTS.get(engine, ()), pinned=False)


# The engines' known deviations a run under faults may show.
KNOWN_UNDER_FAULTS = {"delta-spark": (DELTA_SPARK_SINGLE_DRIVER, DELTA_SPARK_COORDINATOR_AGAIN)}


# -- what CI did not run, and xfails nobody declared --------------------------------------

# CI must run everything: a skip there is a failure unless the test is
# marked `may_skip` with the reason it may skip on CI's machine too.
ON_CI = bool(os.environ.get("CI"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "may_skip(reason): the test may skip in CI too (e.g. it needs what a fresh clone lacks)"
    )
    if sys.dont_write_bytecode and not hasattr(config, "workerinput"):
        _compile_project()


def _compile_project() -> None:
    """The project's modules compiled once, before the workers start. Under
    PYTHONDONTWRITEBYTECODE (set in CI's containers) no interpreter writes
    the bytecode it compiles, and an editable install ships none: each of
    the suite's hundreds of harness processes compiled the modules it
    imports again (0.3 s of CPU for `delta-jepsen --help`, 0.8 s for all)."""
    import compileall

    for pkg in ("harness", "checkers", "workloads", "nemeses"):
        compileall.compile_dir(REPO / pkg, quiet=1, workers=0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    outcome = yield
    report = outcome.get_result()
    if ON_CI and report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("may_skip") is None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run it (mark it may_skip with a reason if it may not): {reason}"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Every xfail of the session is one tests/known.py declares, and a test
    declared to xfail in every run that ran and passed is news: either fails
    the session, with one line each."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:  # an xdist worker: the controller judges the whole session
        return
    for line in xfail_notes(reporter.stats):
        reporter.write_line(f"xfail note: {line}", yellow=True)
    problems = xfail_problems(reporter.stats)
    if problems:
        reporter.write_line("")
        for line in problems:
            reporter.write_line(f"xfail check: {line}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def xfail_problems(stats: dict[str, list[Any]]) -> list[str]:
    """What the session's xfailed and passed reports break of EXPECTED_XFAILS."""
    out = []
    for r in stats.get("xfailed", []):
        declared = EXPECTED_XFAILS.get(r.nodeid)
        if declared is None:
            out.append(f"{r.nodeid} xfailed, and tests/known.py declares no xfail for it: {r.wasxfail[:200]}")
        elif KNOWN_ID.fullmatch(declared.reason) and not any(
            f"[{i}]" in r.wasxfail for i in (declared.reason, *declared.also)
        ):
            out.append(f"{r.nodeid} xfailed without naming [{declared.reason}]: {r.wasxfail[:200]}")
    for r in stats.get("passed", []):
        declared = EXPECTED_XFAILS.get(r.nodeid)
        if declared is not None and declared.always and getattr(r, "when", "call") == "call":
            out.append(f"{r.nodeid} passed, but it is declared to xfail in every run ({declared.reason})")
    return out


def xfail_notes(stats: dict[str, list[Any]]) -> list[str]:
    """Declared xfails of deviations that may not show in every run, which
    passed this time: no failure, but CI's summary says so."""
    return [
        f"{r.nodeid} passed; its known deviation ({EXPECTED_XFAILS[r.nodeid].reason}) did not show in this run"
        for r in stats.get("passed", [])
        if r.nodeid in EXPECTED_XFAILS and not EXPECTED_XFAILS[r.nodeid].always and getattr(r, "when", "call") == "call"
    ]


# A known deviation's id, as tests/known.py names them: "<engine>:<claims>:<what>".
KNOWN_ID = re.compile(r"[a-z-]+:[A-Z0-9,]+:[a-z0-9-]+")
