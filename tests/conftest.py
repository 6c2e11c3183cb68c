from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable

import pytest

import harness  # noqa: F401  (before any test imports gRPC: see harness/__init__.py)

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


def load_results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def only_run_dir(results: Path) -> Path:
    runs = [p.parent for p in results.glob("*/*/spec.json") if not p.parent.parent.is_symlink() and p.parent.parent.name != "latest"]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    d = tmp_path / "results"
    d.mkdir()
    return d
