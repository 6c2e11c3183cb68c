"""A workload and a checker of your own (docs/examples/pairs.py, the
how-to's example), run and judged by `delta-jepsen run` on a real engine:
valid on the real run, invalid once a read is made to see half a pair."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, load_results, only_run_dir, run_cli

EXAMPLES = {"PYTHONPATH": str(REPO / "docs" / "examples")}


@pytest.mark.integration
def test_the_example_workload_and_checker_run_and_judge(results_dir: Path) -> None:
    res = run_cli(
        "run",
        "--workload",
        "pairs:PairsWorkload",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--time-limit",
        "4",
        "--results-dir",
        str(results_dir),
        "--no-progress",
        env=EXAMPLES,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = only_run_dir(results_dir)
    assert run_dir.parent.name == "pairs.PairsWorkload-delta-rs"
    by = {c["checker"]: c for c in load_results(run_dir)["checkers"]}
    assert list(by) == ["log-sanity", "durability", "pairs-whole", "exception-classes", "liveness"], list(by)
    assert by["pairs-whole"]["verdict"] == "valid" and "ok reads saw whole pairs" in by["pairs-whole"]["explanation"]

    # A read that saw half a pair, planted in the history: the checker of
    # your own catches it, through `check`, with its claim.
    path = run_dir / "history.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines()]
    read = next(e for e in events if e["f"] == "read" and e["type"] == "ok" and len(e["value"]["ids"]) >= 2)
    read["value"]["ids"] = read["value"]["ids"][1:]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    res = run_cli("check", str(run_dir), env=EXAMPLES)
    assert res.returncode == 1, res.stdout + res.stderr
    pw = next(c for c in load_results(run_dir)["checkers"] if c["checker"] == "pairs-whole")
    assert pw["verdict"] == "invalid" and [a["ops"] for a in pw["anomalies"]] == [[read["id"]]], pw
    assert pw["anomalies"][0]["kind"] == "partial-op" and pw["anomalies"][0]["claim"] == "C6"

    # Without the module on the path, `check` says so in one line (exit 2).
    res = run_cli("check", str(run_dir), env={"PYTHONPATH": ""})
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "pairs:pairs_whole" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "workload, why",
    [
        ("nosuch:Thing", "cannot be loaded: ModuleNotFoundError"),
        ("pairs:Nope", "cannot be loaded: AttributeError"),
        ("pairs:pairs_whole", "is not a subclass of workloads.base.Workload"),
        ("nosuch", "unknown workload 'nosuch'"),
    ],
)
def test_a_workload_of_your_own_that_does_not_load_is_one_line_and_exit_2(
    workload: str, why: str, results_dir: Path
) -> None:
    args = ("run", "--workload", workload, "--engine", "delta-rs", "--results-dir", str(results_dir))
    res = run_cli(*args, env=EXAMPLES)
    assert res.returncode == 2, res.stdout + res.stderr
    assert why in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
