"""What the matrices show besides their markdown: conformance.html and
matrix.html (rendered, then opened in a real browser), one JUnit testcase
per cell, and a progress line per cell on stderr."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from harness.check import junit
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.html import render_html as conformance_html
from harness.matrices.conformance.matrix import CellResult, junit_suite
from harness.matrices.conformance.verdict import (
    AVAILABILITY,
    COMMITTED,
    CONFORMS,
    FAILED,
    SAFETY,
    UNCONTROLLED,
    UNSUPPORTED,
    V_ERROR,
    V_UNSUPPORTED,
    Observation,
    TxnResult,
)
from harness.matrices.progress import CellProgress, duration
from harness.matrices.workload import Cell, write_pages
from harness.matrices.workload import junit_suite as matrix_suite
from tests.browser import png_size, static_server, visit
from tests.conftest import run_cli

SCHEMA = Path(__file__).parent / "fixtures" / "junit.xsd"
S, WS = C.SERIALIZABLE, C.WRITE_SERIALIZABLE
THREE_CELLS = r"^unpartitioned/Serializable/(insert>insert|update>update|insert>delete-all)$"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMA))


def _result(cell: C.Cell, loser: TxnResult, verdict: str, why: str = "", controlled: bool = True) -> CellResult:
    obs = Observation(TxnResult(COMMITTED, version=3, read_version=2), loser, controlled, checker_verdict="valid")
    return CellResult(cell, C.expectation(cell), obs, verdict, why)


def synthetic_doc() -> dict:
    results = [
        _result(C.Cell(C.INSERT, C.INSERT, WS, C.UNPARTITIONED), TxnResult(COMMITTED, version=4), CONFORMS),
        _result(
            C.Cell(C.INSERT, C.DELETE_ALL, S, C.UNPARTITIONED),
            TxnResult(COMMITTED, version=4),
            SAFETY,
            "C16: the loser committed at version 4 where a conflict is required",
        ),
        _result(
            C.Cell(C.INSERT, C.INSERT, S, C.SAME_PARTITION),
            TxnResult(FAILED, "ConcurrentAppendException", "<CommitFailedError> a concurrent transaction added"),
            AVAILABILITY,
            "M1: cannot conflict, but the loser failed with E1",
        ),
        _result(
            C.Cell(C.OPTIMIZE, C.OPTIMIZE, WS, C.UNPARTITIONED, dv=True),
            TxnResult(UNSUPPORTED, "unsupported", "no OPTIMIZE"),
            V_UNSUPPORTED,
            "no OPTIMIZE",
        ),
        _result(C.Cell(C.UPDATE, C.UPDATE, S, C.DISJOINT), TxnResult(COMMITTED), UNCONTROLLED, "pin lost", False),
        _result(C.Cell(C.UPDATE, C.DELETE, S, C.DISJOINT), TxnResult("error", "crash", "boom"), V_ERROR, "boom"),
    ]
    cells = [r.to_json() for r in results]
    return {"engine": "delta-rs", "versions": {"deltalake": "1.6.6"}, "seconds": 3.0, "cells": cells}


def test_conformance_html_holds_every_cell_with_its_evidence() -> None:
    doc = synthetic_doc()
    page = conformance_html(doc)
    grid = page.split('id="conformance-grid"')[1].split("<h2>By claim")[0]  # the evidence nests tables
    assert grid.count('class="cell ') == len(doc["cells"])
    assert 'class="cell v-deviates-safety"' in grid and 'class="cell v-unsupported"' in grid
    # The evidence opens from the cell: ops, level, layout, expected, observed, raw error, checker.
    assert "partitioned-same" in grid and "unpartitioned+dv" in grid
    assert "&lt;CommitFailedError&gt; a concurrent transaction added" in grid  # raw error, escaped
    assert "C16: the loser committed at version 4" in grid and ">must conflict (C16" in grid
    assert 'class="badge verdict-valid"' in grid
    assert "http://" not in page and "https://" not in page and "src=" not in page


def test_conformance_junit_one_case_per_cell(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    out = tmp_path / "junit.xml"
    junit.write(out, [junit_suite(synthetic_doc())])
    schema.validate(str(out))
    got = {c.get("name"): c for c in ET.parse(out).getroot().iter("testcase")}
    assert len(got) == 6
    safety = got["unpartitioned/Serializable/insert>delete-all"].find("failure")
    assert safety is not None and safety.get("type") == SAFETY
    assert "expected must conflict, observed committed" in safety.get("message", "")
    assert "claim: C16" in (safety.text or "")
    avail = got["partitioned-same/Serializable/insert>insert"].find("failure")
    assert avail is not None and avail.get("type") == AVAILABILITY and "CommitFailedError" in (avail.text or "")
    unsupported = got["unpartitioned+dv/WriteSerializable/optimize>optimize"].find("skipped")
    assert unsupported is not None and unsupported.get("message") == "unsupported: no OPTIMIZE"
    uncontrolled = got["partitioned-disjoint/Serializable/update>update"].find("skipped")
    assert uncontrolled is not None and "pin lost" in uncontrolled.get("message", "")
    assert got["partitioned-disjoint/Serializable/update>delete"].find("error") is not None
    assert got["unpartitioned/WriteSerializable/insert>insert"].find("*").tag == "system-out"  # type: ignore[union-attr]


def _matrix_cells(root: Path) -> list[Cell]:
    run = root / "cells" / "bank-delta-rs" / "20261124T000000"
    return [
        Cell("bank", "delta-rs", S, "yes", "VALID", 9.8, 0.85, ops=40, ok=30, fail=10, info=0, run_dir=str(run)),
        Cell(
            "bank", "delta-rs", WS, "yes", "INVALID", 9.7, 0.8, anomalies=["lost-write (C7)"], ops=41, run_dir=str(run)
        ),
        Cell("bank", "sail", S, "yes", "UNKNOWN", 3.1, note="unknown: serializability"),
        Cell("bank", "sail", WS, verdict="ERROR", note="exit 2: no Sail"),
    ]


def test_matrix_pages_and_junit(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    cells = _matrix_cells(tmp_path)
    write_pages(cells, tmp_path, 2.0, 2, "local", 12.0)
    page = (tmp_path / "matrix.html").read_text()
    grid = page.split('id="matrix-grid"')[1].split("</table>")[0]
    assert grid.count('class="cell ') == 4
    assert 'href="cells/bank-delta-rs/20261124T000000/report.html"' in grid
    assert "ops 40 (30 ok / 10 fail / 0 info)" in grid and "9.8 ops/s" in grid and "lost-write (C7)" in grid
    assert json.loads((tmp_path / "matrix.json").read_text())[0]["ops"] == 40
    out = tmp_path / "junit.xml"
    junit.write(out, [matrix_suite(cells, 12.0)])
    schema.validate(str(out))
    got = {(c.get("classname"), c.get("name")): c for c in ET.parse(out).getroot().iter("testcase")}
    failure = got[("delta-jepsen.matrix.bank.delta-rs", WS)].find("failure")
    assert failure is not None and failure.get("type") == "lost-write"
    assert "lost-write (C7)" in failure.get("message", "")
    skipped = got[("delta-jepsen.matrix.bank.sail", S)].find("skipped")
    assert skipped is not None and "serializability" in skipped.get("message", "")
    assert got[("delta-jepsen.matrix.bank.sail", WS)].find("error") is not None
    assert got[("delta-jepsen.matrix.bank.delta-rs", S)].find("failure") is None


def test_progress_counts_cells_and_estimates_what_is_left() -> None:
    out = io.StringIO()
    bar = CellProgress(3, stream=out)
    for name in ("a", "b", "c"):
        bar.started(name)
        bar.finished(name, "conforms")
    bar.close()
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == ["[1/3]", "[2/3]", "[3/3]"]
    assert lines[-1].startswith("[3/3] c: conforms  elapsed 0s, ETA 0s")
    silent = io.StringIO()
    quiet = CellProgress(1, enabled=False, stream=silent)
    quiet.started("a")
    quiet.finished("a", "ok")
    assert silent.getvalue() == ""
    assert (duration(5), duration(65), duration(3725)) == ("5s", "1m05s", "1h02m")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_status_line_names_the_running_cells() -> None:
    out = _Terminal()
    bar = CellProgress(2, stream=out)
    bar.started("a")
    bar.started("b")
    bar.finished("a", "VALID")
    text = out.getvalue()
    assert "[0/2] running a, b  elapsed 0s, ETA ?" in text
    assert "\r\x1b[K[1/2] a: VALID  elapsed 0s, ETA 0s\n[1/2] running b" in text  # the status line is rewritten
    bar.finished("b", "VALID")
    bar.close()
    assert out.getvalue().endswith("[2/2] b: VALID  elapsed 0s, ETA 0s\n")


def _page_in_browser(root: Path, name: str, grid: str, shot: Path) -> dict[str, int]:
    with static_server(root) as base:
        v = visit(f"{base}/{name}", shot, [f"{grid} .cell"])
    assert v.console_errors == [] and v.page_errors == [], (v.console_errors, v.page_errors)
    assert v.foreign_requests() == [], v.foreign_requests()
    width, height = png_size(shot)
    assert width >= 1000 and height >= 300, (width, height)
    return v.counts


@pytest.mark.integration
def test_a_small_conformance_run_shows_progress_pages_and_junit(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "junit.xml"
    r = run_cli(
        "conformance",
        "--engine",
        "delta-rs",
        "--cells",
        THREE_CELLS,
        "--results-dir",
        str(tmp_path / "results"),
        "--junit-xml",
        str(out),
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # insert>delete-all under Serializable: delta-rs's C16 deviation
    progress = re.findall(r"^\[(\d)/3\] (\S+): (\S+)  elapsed \d+s, ETA \d+s", r.stderr, re.M)
    assert [p[0] for p in progress] == ["1", "2", "3"], r.stderr
    assert ("unpartitioned/Serializable/insert>delete-all", SAFETY) in {(p[1], p[2]) for p in progress}
    (root,) = list((tmp_path / "results" / "conformance-delta-rs").iterdir())
    page = (root / "conformance.html").read_text()
    assert page.count('class="cell ') == 3 and 'id="conformance-grid"' in page
    schema.validate(str(out))
    assert ET.parse(out).getroot().get("tests") == "3"
    assert ET.parse(out).getroot().get("failures") == "1"
    counts = _page_in_browser(root, "conformance.html", "#conformance-grid", tmp_path / "conformance.png")
    assert counts["#conformance-grid .cell"] == 3

    quiet = run_cli(
        "conformance",
        "--engine",
        "delta-rs",
        "--cells",
        "^unpartitioned/Serializable/insert>insert$",
        "--no-progress",
        "--results-dir",
        str(tmp_path / "quiet"),
        timeout=300,
    )
    assert quiet.returncode == 0 and "[1/1]" not in quiet.stderr, quiet.stderr


@pytest.mark.integration
def test_a_small_matrix_shows_progress_pages_and_junit(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "junit.xml"
    r = run_cli(
        "matrix",
        "--workloads",
        "register",
        "--engines",
        "delta-rs",
        "--time-limit",
        "2",
        "--concurrency",
        "2",
        "--storage",
        "local",
        "--jobs",
        "2",
        "--results-dir",
        str(tmp_path),
        "--junit-xml",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    progress = re.findall(r"^\[(\d)/2\] register delta-rs (\S+): VALID yes  elapsed \d+s, ETA \d+s", r.stderr, re.M)
    assert sorted(progress) == [("1", progress[0][1]), ("2", progress[1][1])] and len(progress) == 2, r.stderr
    [root] = (tmp_path / "matrix").iterdir()
    page = (root / "matrix.html").read_text()
    cells = json.loads((root / "matrix.json").read_text())
    for c in cells:
        rel = Path(c["run_dir"]).relative_to(root).as_posix()
        assert f'href="{rel}/report.html"' in page and rel.startswith("cells/register-delta-rs/")
        assert c["ops"] > 0 and c["ok"] + c["fail"] + c["info"] == c["ops"]
    schema.validate(str(out))
    names = sorted(c.get("name", "") for c in ET.parse(out).getroot().iter("testcase"))
    assert names == [S, WS]
    counts = _page_in_browser(root, "matrix.html", "#matrix-grid", tmp_path / "matrix.png")
    assert counts["#matrix-grid .cell"] == 2
