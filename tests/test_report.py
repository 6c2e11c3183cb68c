"""report.html: the plots and the timeline on small synthetic
histories, the page of a real valid run, of a stored run with a planted
lost write, and of a run with a dependency cycle (its graph inline), and
both pages in a real browser: no errors, nothing fetched, every plot drawn."""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import harness.check.pipeline as pipeline
from checkers.base import Anomaly, CheckResult, Verdict
from checkers.claims import claim_text
from harness.bench.synth_run import write_run
from harness.check.pipeline import check_run
from harness.check.report import graphs, render_report
from harness.check.report.plots import (
    Fault,
    Span,
    conflict_rate_svg,
    faults_of,
    latency_svg,
    spans_of,
    throughput_svg,
    timeline_svg,
)
from tests.conftest import load_results, only_run_dir, run_cli
from tests.synth import SynthRun

SVG = "{http://www.w3.org/2000/svg}"
STORED = Path(__file__).parent / "fixtures" / "runs-before-issue-12.tar.gz"
PLOTS = ("#timeline svg", "#latency svg", "#throughput svg", "#conflict-rate svg")
TOOLTIPS = "#timeline #tl-ok > path > title"

# -- the builders, on synthetic histories ----------------------------------------------


def _history_with_a_fault() -> SynthRun:
    run = SynthRun()
    s = 1_000_000_000
    run.append("0.1", [1], start=1 * s, end=2 * s, process=0, version=1)
    run.append("1.1", [2], start=1 * s, end=3 * s, process=1, type="fail")
    run.invoke("nemesis.1", "start-pause", time=4 * s, process="nemesis")
    run.complete("nemesis.1", "ok", time=4 * s + 1000, value={"node": "n1"})
    run.append("0.2", [3], start=5 * s, end=6 * s, process=0, type="info")
    run.invoke("nemesis.2", "stop-pause", time=7 * s, process="nemesis")
    run.complete("nemesis.2", "ok", time=7 * s + 1000)
    run.invoke("nemesis.3", "start-kill", time=8 * s, process="nemesis")
    run.complete("nemesis.3", "ok", time=8 * s + 1000)
    run.append("2.1", [4], start=8 * s, end=None, process=2)  # never completes
    run.read("1.2", [1], start=9 * s, end=10 * s, process=1, version=1)
    return run


def test_spans_and_faults_come_from_the_history() -> None:
    history = _history_with_a_fault().history()
    spans = {s.id: s for s in spans_of(history)}
    assert set(spans) == {"0.1", "1.1", "0.2", "2.1", "1.2"}  # client ops only
    assert (spans["0.1"].start, spans["0.1"].end, spans["0.1"].version) == (1.0, 2.0, 1)
    assert spans["0.1"].commits and not spans["1.2"].commits  # a read's version is the one it read
    assert spans["1.1"].is_conflict and spans["1.1"].error_class == "ConcurrentAppendException"
    assert spans["2.1"].end is None and spans["2.1"].type == "info"
    faults = faults_of(history)
    assert [(f.kind, round(f.start), round(f.end), f.stopped) for f in faults] == [
        ("pause", 4, 7, True),
        ("kill", 8, 10, False),  # never stopped: lasts to the end of the history
    ]


def _bars(svg: str, outcome: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    group = next(g for g in root.iter(f"{SVG}g") if g.get("id") == f"tl-{outcome}")
    return [c for c in group if c.tag != f"{SVG}defs"]


def test_the_timeline_has_a_bar_with_a_tooltip_per_op() -> None:
    history = _history_with_a_fault().history()
    svg, note = timeline_svg(spans_of(history), faults_of(history))
    assert svg.startswith("<svg") and note == ""
    ok, fail, info = _bars(svg, "ok"), _bars(svg, "fail"), _bars(svg, "info")
    assert (len(ok), len(fail), len(info)) == (2, 1, 2)
    tips = [c.find(f"{SVG}title").text or "" for c in ok + fail + info]  # type: ignore[union-attr]
    assert any(t.startswith("op 0.1  process 0  append  OK") and "committed v1" in t for t in tips)
    assert any("error ConcurrentAppendException: synthetic conflict" in t for t in tips)
    assert any("op 2.1" in t and "never completed" in t for t in tips)
    versions = _bars(svg, "versions")
    assert [c.find(f"{SVG}title").text for c in versions] == ["v1 committed by op 0.1 at t = 2.000 s"]  # type: ignore[union-attr]
    # The lanes, the versions lane, and the faults' legend.
    for text in ("process 0", "process 1", "process 2", "versions", "nemesis: pause", "nemesis: kill"):
        assert f">{text}<" in svg, text


def test_a_long_timeline_draws_a_capped_number_of_bars_and_says_so() -> None:
    spans = [Span(i % 3, f"{i % 3}.{i}", "append", "ok", i * 0.1, i * 0.1 + 0.05) for i in range(30)]
    svg, note = timeline_svg(spans, [], max_bars=10)
    assert len(_bars(svg, "ok")) == 10
    assert note.startswith("The first 10 of 30 ops are drawn")


def test_latency_throughput_and_conflict_plots() -> None:
    history = _history_with_a_fault().history()
    spans, faults = spans_of(history), faults_of(history)
    lat = latency_svg(spans, faults)
    assert ">append<" in lat and ">read<" in lat and ">nemesis: pause<" in lat  # markers per op kind, faults
    assert ">4 completed ops<" in lat and "log" in lat
    thr = throughput_svg(spans, faults)
    assert all(f">{o}<" in thr for o in ("ok", "fail", "info"))
    rate = conflict_rate_svg(spans, faults)
    assert ">1 of 3 write ops failed on a concurrent commit (33.3%, dashed)<" in rate
    for svg in (lat, thr, rate):
        ET.fromstring(svg)  # well-formed, inline-able
        assert "<text" in svg and "font-family" in svg  # text a page can search, not glyph paths


def test_a_thinned_latency_plot_keeps_every_failure() -> None:
    spans = [
        Span(0, f"0.{i}", "append", "fail" if i % 50 == 0 else "ok", i * 0.01, i * 0.01 + 0.005) for i in range(1000)
    ]
    svg = latency_svg(spans, [], max_points=100)
    assert ">1000 completed ops (100 drawn: every failed or info op up to 50, ok ops evenly spaced)<" in svg
    assert svg.count("fill: #d9534f") >= 20  # the 20 failures (and the legend's mark)


def test_no_ops_draws_placeholders_not_errors() -> None:
    svg, note = timeline_svg([], [])
    assert "no client ops" in svg and note == ""
    assert "no completed client ops" in latency_svg([], [Fault("kill", 1.0, 2.0)])
    assert "no completed write ops" in conflict_rate_svg([], [])


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_axes_are_labelled_with_round_numbers() -> None:
    # Latencies from 5 ms to 5 s: every decade labelled as a plain number.
    spans = [Span(0, f"0.{i}", "append", "ok", float(i), i + 5 * 10**i / 1000) for i in range(4)]
    texts = _texts(latency_svg(spans, []))
    assert {"10", "100", "1000"} <= set(texts), texts
    assert "0" in texts and "3" in texts  # the time axis, a tick a second
    assert not any("$" in t or "e+" in t for t in texts), texts
    # Less than two decades: the 2s, 3s and 5s between them are labelled too.
    narrow = [Span(0, f"0.{i}", "append", "ok", float(i), i + (20 + 10 * i) / 1000) for i in range(8)]
    assert {"20", "30", "50"} <= set(_texts(latency_svg(narrow, []))), _texts(latency_svg(narrow, []))
    # A conflict rate axis from 0 to 100 percent, and a time axis of tenths.
    quick = [Span(0, f"0.{i}", "append", "ok", i / 10, i / 10 + 0.05) for i in range(10)]
    rate = _texts(conflict_rate_svg(quick, []))
    assert {"0", "20", "40", "60", "80", "100"} <= set(rate), rate
    assert {"0.2", "0.4", "0.8"} <= set(rate), rate


def test_each_op_kind_has_a_marker_of_its_own() -> None:
    kinds = [f"op{k}" for k in range(12)]
    spans = [Span(0, f"0.{i}", kinds[i], "ok", float(i), i + 0.1) for i in range(12)]
    root = ET.fromstring(latency_svg(spans, []))
    shapes = {p.get("id"): p.get("d") for p in root.iter(f"{SVG}path") if (p.get("id") or "").startswith("latency-m")}
    assert len(shapes) == 12 and len(set(shapes.values())) == 12, shapes
    assert {f"op{k}" for k in range(12)} <= set(_texts(ET.tostring(root, encoding="unicode")))


def test_a_timeline_of_many_commits_marks_them_with_one_comb() -> None:
    spans = [Span(i % 4, f"{i % 4}.{i}", "append", "ok", i * 0.01, i * 0.01 + 0.005, version=i) for i in range(1200)]
    svg, _ = timeline_svg(spans, [])
    root = ET.fromstring(svg)
    (comb,) = [p for p in root.iter(f"{SVG}path") if p.get("id") == "tl-versions-comb"]
    assert (comb.get("d") or "").count("M") == 1200
    assert not [g for g in root.iter(f"{SVG}g") if g.get("id") == "tl-versions"]
    assert len(_bars(svg, "ok")) == 1200


def test_without_graphviz_the_dot_source_is_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphs.shutil, "which", lambda name: None)
    out = graphs.graph_html('digraph { "a" -> "b" }')
    assert "not installed" in out and "&quot;a&quot; -&gt; &quot;b&quot;" in out and "<svg" not in out


def test_with_graphviz_the_graph_is_inline_svg() -> None:
    if shutil.which("dot") is None:
        pytest.skip("needs Graphviz's dot (apt-get install graphviz)")
    out = graphs.graph_html('digraph { "T1" -> "T2" }')
    assert out.startswith('<div class="graph"><svg') and "<?xml" not in out and "T1" in out


def test_many_anomalies_of_a_kind_show_a_few_and_a_count(tmp_path: Path) -> None:
    """A page from the least a folder may hold (no results beyond the
    verdict, an empty spec): many instances of one kind are summarised."""
    history = _history_with_a_fault().history()
    stale = [Anomaly("stale-read", "C12", f"read {n} was stale", ops=["1.2"], versions=[1]) for n in range(8)]
    lost = Anomaly("lost-write", "C7", "op 0.1 is not in the log", ops=["0.1"], rows=[1])
    results = [
        CheckResult("read-validity", Verdict.INVALID, "8 stale reads", stale),
        CheckResult("durability", Verdict.INVALID, "1 lost write", [lost]),
    ]
    html = render_report(tmp_path, doc={"verdict": "invalid"}, results=results, history=history, spec={}, run={})
    assert html.count('<section class="anomaly"') == 5 + 1
    assert "... 3 more <code>stale-read</code> anomalies of <code>read-validity</code> in results.json." in html
    kinds = re.search(r"<table id=anomaly-kinds>.*?</table>", html, re.S)
    assert kinds and re.search(
        r'<td>Stale read</td><td><a href="#claim-C12"[^>]*>C12</a></td><td class=num>8</td>', kinds.group(0)
    )
    assert '<a href="#anomaly-durability-1">first</a>' in html and 'id="anomaly-durability-1"' in html
    assert "rows (1): <code>1</code>" in html
    # The anomalies' ops are outlined on the timeline.
    assert 'id="tl-anomaly"' in html


def _without_timing(html: str) -> str:
    # When the page and each plot were drawn: all else is the same.
    html = re.sub(r"<dc:date>[^<]*</dc:date>", "<dc:date/>", html)
    return re.sub(r"Drawn in [0-9.]+ s", "Drawn in - s", html)


def test_spans_read_the_events_as_the_ops_properties_do() -> None:
    """spans_of reads each op's events directly (a long run has millions of
    ops): what it builds is what Op's properties say, for completed, failed,
    indeterminate and never-completed ops, and a completion without a value."""
    run = _history_with_a_fault()
    run.invoke("3.1", "read", time=11_000_000_000, process=3)
    run.complete("3.1", "ok", time=12_000_000_000)
    history = run.history()
    by_properties = [
        Span(
            op.process,
            op.id,
            op.f,
            op.type,
            op.start / 1e9,
            None if op.end is None else op.end / 1e9,
            op.version,
            op.value,
            op.error.cls.value if op.error else None,
            op.error.raw if op.error else None,
        )
        for op in history.client_ops()
    ]
    assert spans_of(history) == by_properties
    assert {s.type for s in by_properties} == {"ok", "fail", "info"}
    assert any(s.end is None for s in by_properties) and any(s.value is None for s in by_properties)


# -- pages of run folders -----------------------------------------------------------


@pytest.fixture(scope="module")
def cycle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stored run (the simulator's, harness/bench/synth_run.py) with a G2
    cycle spliced in: an anomaly that carries a DOT graph."""
    run_dir = tmp_path_factory.mktemp("cycle") / "run"
    write_run(run_dir, 200, concurrency=5, seed=11, inject="G2", checkpoint_interval=0)
    res = run_cli("check", str(run_dir), timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    return run_dir


def test_a_failing_report_leaves_the_verdict(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    write_run(run_dir, 60, concurrency=3, seed=2, inject="G2", checkpoint_interval=0)

    def broken(*a: object, **k: object) -> Path:
        raise RuntimeError("no room on the page")

    monkeypatch.setattr(pipeline, "write_report", broken)
    (run_dir / "report.html").write_text("an earlier check's page")
    report = check_run(run_dir)
    doc = load_results(run_dir)
    assert report.verdict.value == doc["verdict"] == "invalid" and report.exit_code == 1
    assert doc["report_error"] == "RuntimeError: no room on the page" and "report" not in doc
    assert not (run_dir / "report.html").exists()  # no page with an earlier verdict left behind


def test_the_report_of_a_cycle_shows_its_graph(cycle_run: Path) -> None:
    doc = load_results(cycle_run)
    assert doc["report"] == "report.html" and "report_error" not in doc
    html = (cycle_run / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and "INVALID" in html
    [section] = re.findall(r'<section class="anomaly".*?</section>', html, re.S)
    assert "<code>G2</code>" in section and 'breaks spec <a href="#claim-C15"' in section
    assert '<div class="graph"><svg' in section and "rw-predicate" in section
    assert html.index('id="anomalies"') < html.index('id="checkers"') < html.index('id="timeline"')
    # A second timeline, zoomed to the cycle's two transactions, outlined.
    zoom = re.search(r'<div class="plot" id="timeline-zoom">(<svg.*?</svg>)</div>', html, re.S)
    assert zoom and 'id="tl-anomaly"' in zoom.group(1)
    _offline(html)


def _offline(html: str) -> None:
    """Nothing the page could fetch: no script, stylesheet, image or font from anywhere."""
    assert "<script" not in html and "<img" not in html and '<link rel="stylesheet"' not in html
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)
    assert "@import" not in html and "url(http" not in html


def test_a_stored_run_with_a_lost_write_gets_a_report_on_check(tmp_path: Path) -> None:
    with tarfile.open(STORED) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("append-delta-rs_lost-write")]
        tar.extractall(tmp_path, members=members)
    run_dir = tmp_path / "append-delta-rs_lost-write"
    assert not (run_dir / "report.html").exists()  # no page with an earlier verdict left behind
    res = run_cli("check", str(run_dir), timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    html = (run_dir / "report.html").read_text()
    sections = re.findall(r'<section class="anomaly".*?</section>', html, re.S)
    lost = next(s for s in sections if "<code>lost-write</code>" in s)
    assert "Lost write" in lost and "<td>append</td>" in lost
    # The claim is linked to its text, which the page carries.
    assert 'breaks spec <a href="#claim-C7"' in lost and claim_text("C7") in html
    assert re.search(r'<tr id="claim-C7"><th>C7</th><td>A committed change is permanent', html)
    assert "delta-jepsen run --workload append --engine delta-rs" in html  # the re-run command
    assert f"delta-jepsen check {run_dir}" in html
    _offline(html)


# -- a real run, and a real browser ----------------------------------------------------


@pytest.fixture
def valid_run(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    res = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--workload",
        "append",
        "--time-limit",
        "5",
        "--concurrency",
        "3",
        "--results-dir",
        str(results),
        "--no-progress",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return only_run_dir(results)


@pytest.mark.integration
def test_a_real_run_writes_its_report_and_a_browser_shows_it(valid_run: Path, tmp_path: Path) -> None:
    doc = load_results(valid_run)
    assert doc["verdict"] == "valid" and doc["report"] == "report.html"
    html = (valid_run / "report.html").read_text()
    assert 'class="badge verdict-valid"' in html and html.index("VALID") < html.index('id="timeline"')
    assert "None: no checker found an anomaly." in html
    assert "engine <b>delta-rs</b>" in html and "storage <b>local</b>" in html and "workload <b>append</b>" in html
    assert json.loads((valid_run / "spec.json").read_text())["repro"] in html.replace("&#x27;", "'")
    assert "deltalake" in html  # package versions
    assert '<div class="sub" id="commit-protocol">commit protocol: delta-rs: ' in html
    for checker in doc["checkers"]:
        assert f"<code>{checker['checker']}</code>" in html
    _offline(html)
    # Re-checking the folder writes the page again, and quickly.
    t0 = time.monotonic()
    assert run_cli("check", str(valid_run), timeout=120).returncode == 0
    assert time.monotonic() - t0 < 30
    _browse(valid_run, tmp_path / "valid.png", "valid", anomalies=0)


@pytest.mark.integration
def test_a_browser_shows_the_report_of_a_cycle(cycle_run: Path, tmp_path: Path) -> None:
    _browse(cycle_run, tmp_path / "invalid.png", "invalid", anomalies=1)


def _browse(run_dir: Path, shot: Path, verdict: str, anomalies: int) -> None:
    """The page in headless chromium: no errors, nothing fetched from
    anywhere, every plot in the DOM, a full-page screenshot."""
    from tests.browser import chromium_path, png_size, static_server, visit

    chromium_path()
    with static_server(run_dir) as base:
        v = visit(f"{base}/report.html", shot, [*PLOTS, ".anomaly", ".anomaly .graph svg", "#checkers", TOOLTIPS])
    assert not v.console_errors and not v.page_errors, (v.console_errors, v.page_errors)
    assert not v.foreign_requests(), v.foreign_requests()
    assert all(v.counts[p] >= 1 for p in PLOTS), v.counts
    assert v.counts["#checkers"] == 1 and v.counts[TOOLTIPS] >= 1  # the bars' hover text is in the DOM
    assert v.counts[".anomaly"] == anomalies and v.counts[".anomaly .graph svg"] == anomalies, v.counts
    assert v.title.startswith(verdict.upper())
    width, height = png_size(shot)
    assert width >= 1000 and height >= 800, (width, height)
