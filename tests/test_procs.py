"""Child processes: readiness is judged on what this start wrote."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess, owned_tempdir


def _announcer(port: int, then_sleep: bool) -> list[str]:
    code = f"print('listening on {port}', flush=True)" + ("; import time; time.sleep(30)" if then_sleep else "")
    return [sys.executable, "-c", code]


def test_a_restart_on_the_same_log_does_not_read_the_previous_ready_line(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    first = ManagedProcess("first", _announcer(1111, False), log).start()
    assert first.wait_for_log(r"listening on (\d+)", 10).group(1) == "1111"
    first.stop()
    second = ManagedProcess("second", _announcer(2222, True), log).start()
    try:
        assert second.wait_for_log(r"listening on (\d+)", 10).group(1) == "2222"
    finally:
        second.stop()
    # A start that never announces itself is not ready, whatever the log held.
    silent = ManagedProcess("silent", [sys.executable, "-c", "import time; time.sleep(30)"], log).start()
    try:
        with pytest.raises(HarnessError, match="not ready"):
            silent.wait_for_log(r"listening on (\d+)", 1)
    finally:
        silent.stop()


def test_a_new_scratch_dir_removes_those_whose_owner_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        orphan = tmp_path / f"dj-x-{dead.pid}-abc"
        kept = tmp_path / f"dj-x-{alive.pid}-abc"
        other_prefix = tmp_path / f"dj-y-{dead.pid}-abc"
        for d in (orphan, kept, other_prefix):
            (d / "sub").mkdir(parents=True)
        mine = owned_tempdir("dj-x-")
        assert Path(mine).parent == tmp_path and Path(mine).name.startswith(f"dj-x-{os.getpid()}-")
        assert not orphan.exists(), "a dead harness's scratch dir outlives the next start"
        assert kept.exists() and other_prefix.exists()
        assert Path(owned_tempdir("dj-x-")) != Path(mine) and Path(mine).exists()
    finally:
        alive.kill()
        alive.wait()
