"""The tutorial's commands, run in order in an empty folder as a reader
would, give the output the tutorial shows: each shown line, in order,
matches a line of the real output (`...` stands for what differs from run
to run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TUTORIAL = REPO / "docs" / "src" / "tutorial.md"


def steps(page: str) -> list[tuple[str, list[str]]]:
    """(command, the output lines shown after it) of each `$ ` line of the
    page's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", page, flags=re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            elif out:
                out[-1][1].append(line)
    return out


def pattern(shown: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in shown.strip().split("...")))


def unmatched(shown: list[str], actual: list[str]) -> list[str]:
    """The shown lines (other than a bare `...`) not found in order in `actual`."""
    missing, at = [], 0
    for line in shown:
        if line.strip() in ("", "..."):
            continue
        p = pattern(line)
        hit = next((i for i in range(at, len(actual)) if p.fullmatch(actual[i].strip())), None)
        if hit is None:
            missing.append(line)
        else:
            at = hit + 1
    return missing


def test_shown_lines_match_in_order_with_wildcards() -> None:
    verdict, checker = "verdict: INVALID   (results/...)", "  list-append       invalid  ...duplicate-position..."
    actual = ["verdict: INVALID   (results/x/1)", "noise", "  list-append       invalid  3 duplicate-position."]
    assert unmatched([verdict, "...", checker], actual) == []
    assert unmatched([checker, verdict], actual) == [verdict]  # out of order


@pytest.mark.integration
def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    todo = steps(TUTORIAL.read_text())
    assert [c.split()[:2] for c, _ in todo] == [
        ["delta-jepsen", "list"],
        ["delta-jepsen", "run"],
        ["delta-jepsen", "reproduce"],
        ["python", "results/latest/repro/anomaly-*/reproduce.py"],
    ]
    bin_dir = str(Path(sys.executable).parent)  # delta-jepsen and python of this install
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("DJ_RESULTS_DIR", None)
    for command, shown in todo:
        res = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        assert res.returncode in (0, 1), (command, res.stdout[-3000:], res.stderr[-3000:])
        actual = (res.stdout + res.stderr).splitlines()
        missing = unmatched(shown, actual)
        assert not missing, (command, missing, "\n".join(actual)[-4000:])
    # The reference page of results files names everything a run folder holds.
    from harness.run.results import RUN_FILES

    run = (tmp_path / "results" / "latest").resolve()
    held = {p.name + ("/" if p.is_dir() else "") for p in run.iterdir()}
    assert held - set(RUN_FILES) == set(), held - set(RUN_FILES)
