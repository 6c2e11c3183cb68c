"""Child processes: readiness is judged on what this start wrote."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.procs import HarnessError, ManagedProcess


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
