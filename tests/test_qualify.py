"""Two releases side by side: the comparison's rules on stored folders, and
a short qualification of deltalake 0.9.0 against 0.8.1 (0.8.1 commits two
overwrites of one snapshot; 0.9.0 fails the later one), read back in a
browser, then swapped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.core.errors import HarnessError
from harness.matrices.qualify import FIX, REGRESSION, SUPPORT, UNCHANGED, UNJUDGED, Stored, compare, exit_code
from tests.conftest import run_cli


def _conformance(path: Path, engine: str, verdicts: dict[str, str]) -> Path:
    path.mkdir(parents=True)
    cells = [
        {"id": cid, "verdict": v, "claim": "M1", "expected": "cannot conflict", "observed": "x", "why": f"why {v}"}
        for cid, v in verdicts.items()
    ]
    (path / "conformance.json").write_text(json.dumps({"engine": engine, "cells": cells}))
    return path


def _matrix(path: Path, engine: str, cells: list[tuple[str, str, str, list[str]]]) -> Path:
    path.mkdir(parents=True)
    docs = [
        {"workload": w, "engine": engine, "isolation": "Serializable", "nemesis": n, "verdict": v, "anomalies": a}
        | {"supported": "yes", "run_dir": None, "repro": f"delta-jepsen run --workload {w}"}
        for w, n, v, a in cells
    ]
    (path / "matrix.json").write_text(json.dumps(docs))
    return path


def test_conformance_rows_are_ordered_by_severity_of_the_change(tmp_path: Path) -> None:
    a = _conformance(
        tmp_path / "a",
        "delta-rs==1.0.0",
        {"c/safety": "conforms", "c/avail": "conforms", "c/fixed": "deviates-safety", "c/same": "conforms"}
        | {"c/new-op": "unsupported", "c/lost": "conforms", "c/retried": "conforms"},
    )
    b = _conformance(
        tmp_path / "b",
        "delta-rs==1.1.0",
        {"c/safety": "deviates-safety", "c/avail": "deviates-availability", "c/fixed": "deviates-exception-class"}
        | {"c/same": "conforms", "c/new-op": "conforms", "c/lost": "error", "c/retried": "conforms (retried)"},
    )
    rows = compare(Stored.load(a), Stored.load(b), tmp_path)
    by = {r.key: r for r in rows}
    assert (by["c/safety"].change, by["c/safety"].safety) == (REGRESSION, True)
    assert (by["c/avail"].change, by["c/avail"].safety) == (REGRESSION, False)
    assert by["c/fixed"].change == FIX
    assert by["c/new-op"].change == SUPPORT
    assert by["c/lost"].change == UNJUDGED
    assert by["c/same"].change == UNCHANGED
    assert [r.key for r in rows][:2] == ["c/safety", "c/avail"]  # safety first
    assert exit_code(rows) == 1
    assert (
        "reproduce" in by["c/safety"].candidate.reproduce and "--cell 'c/safety'" in by["c/safety"].candidate.reproduce
    )
    assert exit_code([r for r in rows if r.key != "c/safety"]) == 3  # availability alone is no exit 1
    assert exit_code([r for r in rows if r.change in (FIX, UNCHANGED, SUPPORT)]) == 0


def test_a_workload_regresses_on_an_anomaly_kind_the_baseline_lacked(tmp_path: Path) -> None:
    a = _matrix(
        tmp_path / "a",
        "delta-rs==0.8.1",
        [("bank", "", "INVALID", ["wrong-total (C6)"]), ("append", "", "VALID", []), ("upsert", "kill", "VALID", [])],
    )
    b = _matrix(
        tmp_path / "b",
        "delta-rs==0.9.0",
        [("bank", "", "VALID", []), ("append", "", "INVALID", ["lost-rows (C7)"]), ("upsert", "kill", "UNKNOWN", [])],
    )
    rows = {r.key: r for r in compare(Stored.load(a), Stored.load(b), tmp_path)}
    assert rows["append on delta-rs, Serializable"].change == REGRESSION
    assert "lost-rows (C7)" in rows["append on delta-rs, Serializable"].what
    assert rows["bank on delta-rs, Serializable"].change == FIX
    assert rows["upsert on delta-rs under kill, Serializable"].change == UNJUDGED


def test_compare_refuses_folders_that_hold_no_results(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(HarnessError, match="neither conformance.json nor matrix.json"):
        Stored.load(tmp_path / "empty")
    proc = run_cli("compare", str(tmp_path / "empty"), str(tmp_path / "nope"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr


def _removed_twice(table: Path) -> dict[int, list[str]]:
    """Commits that remove a file an earlier commit already removed: a
    transaction committed over a snapshot it did not conflict-check."""
    removed: set[str] = set()
    out: dict[int, list[str]] = {}
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in filter(None, f.read_text().splitlines()):
            rm = json.loads(line).get("remove")
            if rm is not None:
                if rm["path"] in removed:
                    out.setdefault(int(f.stem), []).append(rm["path"])
                removed.add(rm["path"])
    return out


def _one_run(matrix: Path) -> tuple[Path, dict, list[dict]]:
    (spec,) = list(matrix.glob("cells/*/*/spec.json"))
    run = spec.parent
    history = [json.loads(x) for x in (run / "history.jsonl").read_text().splitlines() if x.strip()]
    return run, json.loads((run / "results.json").read_text()), history


def _is_the_missing_conflict_check(matrix: Path, side: dict) -> None:
    """0.8.1's anomalies have its known cause, read from its run: the first
    version whose total is wrong removes a file an earlier commit had
    removed (two transfers committed from one snapshot), and no transfer
    ever failed on a conflict."""
    run, doc, history = _one_run(matrix)
    assert json.loads((run / "spec.json").read_text())["versions"]["deltalake"] == "0.8.1"
    bank = next(c for c in doc["checkers"] if c["checker"] == "bank")
    wrong = [a for a in bank["anomalies"] if a["kind"] == "wrong-total"]
    first = min(v for a in wrong for v in a["versions"])
    assert first in _removed_twice(run / "table"), first
    assert not [e for e in history if e["type"] == "fail"], "0.8.1 has no conflict check to fail an op"
    assert side["reproduce"].startswith(f"delta-jepsen reproduce {run}")


def _conflicts_instead(matrix: Path) -> None:
    run, doc, history = _one_run(matrix)
    assert not _removed_twice(run / "table")
    classes = {e["error"]["class"] for e in history if e["type"] == "fail"}
    assert classes == {"ConcurrentDeleteDeleteException"}, classes


def _why_not(run: Path, repro: Any) -> str:
    """What a replay that did not reproduce did: its output, the schedule
    it replayed and each attempt's notes, outcomes and findings."""
    parts = [repro.stdout[-2000:], repro.stderr[-2000:]]
    for f in sorted((run / "repro").glob("*/outcome.json")):
        parts.append(f"{f}: {f.read_text()[:6000]}")
    return "\n".join(parts)


@pytest.mark.integration
def test_qualify_shows_0_8_1_s_duplicated_rows_fixed_in_0_9_0_and_swapped_a_regression(tmp_path: Path) -> None:
    from tests.browser import static_server, visit

    results = tmp_path / "results"
    junit_path = tmp_path / "qualify.xml"
    proc = run_cli(
        "qualify",
        "--engine",
        "delta-rs",
        "--baseline",
        "0.8.1",
        "--candidate",
        "0.9.0",
        "--workloads",
        "bank-overwrite",
        "--nemesis",
        "none",
        "--time-budget",
        "22",
        "--cells",
        "^unpartitioned/Serializable/(insert>insert|update>update)$",
        "--no-progress",
        "--results-dir",
        str(results),
        "--junit-xml",
        str(junit_path),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (root,) = list(results.glob("qualify-delta-rs-0.8.1-vs-0.9.0/*/"))
    doc = json.loads((root / "qualify.json").read_text())
    fixed = [r for r in doc["rows"] if r["change"] == FIX]
    assert [r["key"] for r in fixed] == ["bank-overwrite on delta-rs, Serializable"], doc["counts"]
    assert {"duplicate-row", "wrong-total (C6)"} <= set(fixed[0]["baseline"]["kinds"])
    assert fixed[0]["candidate"]["verdict"] == "VALID"
    # update>update: 0.8.1 has no UPDATE, 0.12 brings it; insert>insert conforms on both.
    keys = {r["key"]: r["change"] for r in doc["rows"]}
    assert keys["unpartitioned/Serializable/update>update"] == UNCHANGED  # unsupported on both
    assert "junit" not in proc.stderr and junit_path.read_text().count("<testcase") == len(doc["rows"])
    # The pages say what each side ran.
    assert doc["scope"].startswith("conformance: 2 of 796 cells (ids matching")
    assert "workloads: bank-overwrite, each with no faults" in (root / "qualify.md").read_text()
    _is_the_missing_conflict_check(root / "baseline" / "matrix", fixed[0]["baseline"])
    _conflicts_instead(root / "candidate" / "matrix")

    # The reproduce command the page gives replays the schedule on 0.8.1, in
    # its own environment: two transfers from one snapshot both commit.
    run, _doc, _history = _one_run(root / "baseline" / "matrix")
    repro = run_cli("reproduce", str(run), "--anomaly", "G-single", "--no-shrink", "--repeat", "1", timeout=300)
    assert repro.returncode == 1 and "REPRODUCED in 1 of 1" in repro.stdout, _why_not(run, repro)
    (report,) = list((run / "repro").glob("*/REPORT.md"))
    assert "versions: deltalake 0.8.1" in report.read_text()

    # The same results, the releases swapped: the fix is a regression in safety.
    swapped = run_cli(
        "compare", str(root / "candidate"), str(root / "baseline"), "--out", str(tmp_path / "swapped"), timeout=120
    )
    assert swapped.returncode == 1, swapped.stdout + swapped.stderr
    assert "regression (safety): workload bank-overwrite on delta-rs, Serializable" in swapped.stdout
    assert "wrong-total (C6)" in swapped.stdout

    with static_server(root) as base:
        v = visit(f"{base}/qualify.html", tmp_path / "qualify.png", ["section#fix tr.fix", "section#unchanged"])
    assert not v.page_errors and not v.console_errors, (v.page_errors, v.console_errors)
    assert v.counts == {"section#fix tr.fix": 1, "section#unchanged": 1}, v.counts
    assert v.title == "delta-rs 0.9.0 against 0.8.1"
