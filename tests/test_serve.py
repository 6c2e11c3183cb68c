"""`delta-jepsen serve`, the results browser: what the index lists and how
(order, filters, verdicts, anomaly kinds), what the server refuses (paths
out of the root, other methods), where it listens (127.0.0.1 only), how it
stops (Ctrl-C, SIGTERM: no traceback, no process left), and a real
browser's view of it."""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from harness.serve.catalog import NOT_CHECKED, Catalog
from harness.serve.pages import Filters, index_page
from harness.serve.server import content_type, resolve_request
from tests.conftest import REPO, run_cli, still_running

START_TIMEOUT_S = 60  # the CLI's imports take seconds on a loaded 2-core machine
STOP_TIMEOUT_S = 5


# --- fake run folders, shaped as `delta-jepsen run` writes them -------------


def make_run(
    root: Path,
    rel: str,
    workload: str = "append",
    engine: str = "delta-rs",
    verdict: str | None = "valid",
    kinds: tuple[str, ...] = (),
    ok: int = 20,
    fail: int = 3,
    info: int = 1,
    elapsed: float = 10.0,
    nemesis: tuple[str, ...] = (),
) -> Path:
    d = root / rel
    d.mkdir(parents=True)
    spec = {
        "spec": {
            "workload": workload,
            "engine": engine,
            "storage": "local",
            "nodes": 2,
            "concurrency": 2,
            "time_limit": elapsed,
            "seed": 1,
            "isolation": None,
            "nemesis": list(nemesis),
        },
        "repro": f"delta-jepsen run --workload {workload} --engine {engine}",
    }
    (d / "spec.json").write_text(json.dumps(spec))
    run = {"elapsed": elapsed, "interrupted": False, "counts": {"ok": ok, "fail": fail, "info": info}}
    (d / "run.json").write_text(json.dumps(run))
    (d / "history.jsonl").write_text('{"index":0,"type":"invoke","f":"append","process":0}\n')
    if verdict is not None:
        ops = ok + fail + info
        results = {
            "verdict": verdict,
            "run": run,
            "history": {"ops": ops, "ok": ok, "fail": fail, "info": info, "elapsed_s": elapsed, "ops_per_s": 2.4},
            "checkers": [
                {
                    "checker": "durability",
                    "verdict": verdict,
                    "explanation": "...",
                    "anomalies": [{"kind": k, "explanation": "..."} for k in kinds],
                    "stats": {},
                }
            ],
        }
        (d / "results.json").write_text(json.dumps(results))
    (d / "table" / "_delta_log").mkdir(parents=True)
    (d / "logs").mkdir()
    return d


def run_rows(html: str) -> int:
    return html.count('<tr class="run"')


# --- the catalog and the index page -----------------------------------------


def test_index_lists_runs_newest_first_with_verdict_and_kinds(tmp_path: Path) -> None:
    make_run(tmp_path, "append-delta-rs/20261101T100000", verdict="valid")
    make_run(tmp_path, "bank-sail/20261103T090000", "bank", "sail", "invalid", ("lost-write", "lost-write", "G-single"))
    make_run(tmp_path, "register-delta-spark/20261102T120000", "register", "delta-spark", "unknown")
    make_run(tmp_path, "append-delta-rs/20261103T090000-1", verdict=None)  # same second, a later folder
    contents = Catalog(tmp_path).scan()
    assert [r.rel for r in contents.runs] == [
        "bank-sail/20261103T090000",
        "append-delta-rs/20261103T090000-1",
        "register-delta-spark/20261102T120000",
        "append-delta-rs/20261101T100000",
    ]
    bank, unchecked = contents.runs[0], contents.runs[1]
    assert (bank.workload, bank.engine, bank.verdict) == ("bank", "sail", "invalid")
    assert bank.kinds == {"lost-write": 2, "G-single": 1}
    assert (bank.ops, bank.ok, bank.fail, bank.info, bank.ops_per_s, bank.duration_s) == (24, 20, 3, 1, 2.4, 10.0)
    # No results.json: the counts come from run.json, the verdict says so.
    assert unchecked.verdict == NOT_CHECKED and unchecked.ops == 24

    html = index_page(contents, Filters(), "results/")
    assert run_rows(html) == 4
    assert 'id="runs"' in html
    order = [html.index(r.rel + "/") for r in contents.runs]
    assert order == sorted(order)
    assert "<code>lost-write</code> &times;2" in html and "<code>G-single</code>" in html
    assert "INVALID" in html and "UNKNOWN" in html and "NOT CHECKED" in html
    assert "2026-11-03 09:00:00" in html


def test_filters_by_engine_workload_and_verdict(tmp_path: Path) -> None:
    make_run(tmp_path, "append-delta-rs/20261101T100000", verdict="valid")
    make_run(tmp_path, "append-delta-rs/20261101T110000", verdict="invalid", kinds=("duplicate",))
    make_run(tmp_path, "append-sail/20261101T120000", engine="sail", verdict="invalid")
    make_run(tmp_path, "bank-sail/20261101T130000", "bank", "sail", "valid")
    make_run(tmp_path, "bank-sail/20261101T140000", "bank", "sail", verdict=None)
    contents = Catalog(tmp_path).scan()

    def shown(query: dict[str, list[str]]) -> int:
        return run_rows(index_page(contents, Filters.from_query(query), "results/"))

    assert shown({}) == 5
    assert shown({"engine": ["delta-rs"]}) == 2
    assert shown({"engine": ["sail"], "verdict": ["invalid"]}) == 1
    assert shown({"workload": ["bank"]}) == 2
    assert shown({"verdict": ["INVALID"]}) == 2
    assert shown(parse_qs("verdict=not+checked")) == 1
    assert shown({"engine": [""], "workload": [""], "verdict": [""]}) == 5  # the form's "(all)"
    html = index_page(contents, Filters(engine="nope"), "results/")
    assert run_rows(html) == 0 and "No runs match these filters" in html
    # The form shows what is chosen, and offers what the root holds.
    html = index_page(contents, Filters(engine="sail", verdict="invalid"), "results/")
    assert '<option value="sail" selected>' in html and '<option value="invalid" selected>' in html
    assert '<option value="delta-rs">' in html and '<option value="not checked">' in html and "1 of 5 runs" in html
    assert '<form class="filters" method="get" action="/">' in html


def test_walk_finds_matrix_cells_and_reports_and_skips_tables_and_symlinks(tmp_path: Path) -> None:
    make_run(tmp_path, "append-delta-rs/20261101T100000")
    (tmp_path / "latest").symlink_to(tmp_path / "append-delta-rs/20261101T100000")
    # A run folder's table copy is never walked, even if something in it looks like a run.
    make_run(tmp_path, "append-delta-rs/20261101T100000/table/x/20261101T100000")
    mx = tmp_path / "matrix/20261102T080000"
    make_run(mx, "cells/bank-delta-rs/20261102T080001", "bank", verdict="invalid")
    (mx / "matrix.md").write_text("| workload |\n")
    cells = [{"workload": "bank", "engine": "delta-rs", "isolation": "Serializable", "verdict": "INVALID"}]
    (mx / "matrix.json").write_text(json.dumps(cells))
    cf = tmp_path / "conformance-delta-rs/20261103T070000"
    cf.mkdir(parents=True)
    (cf / "conformance.json").write_text(json.dumps({"engine": "delta-rs", "seconds": 81.0, "counts": {"conforms": 9}}))
    (cf / "conformance.md").write_text("# conformance\n")
    make_run(cf, "tables/cell-1/20261103T070001")  # conformance cell tables are not runs
    # A matrix still running (no matrix.md yet): listed, its cells too.
    make_run(tmp_path, "matrix/20261104T000000/cells/upsert-sail/20261104T000001", "upsert", "sail", None)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    make_run(outside, "append-sail/20261101T100000", engine="sail")
    (tmp_path / "elsewhere").symlink_to(outside)

    contents = Catalog(tmp_path).scan()
    assert [r.rel for r in contents.runs] == [
        "matrix/20261104T000000/cells/upsert-sail/20261104T000001",
        "matrix/20261102T080000/cells/bank-delta-rs/20261102T080001",
        "append-delta-rs/20261101T100000",
    ]
    running, m = contents.matrices
    assert (running.rel, running.cells, running.files) == ("matrix/20261104T000000", None, ())
    assert (m.rel, m.cells, m.verdicts, m.files) == (
        "matrix/20261102T080000",
        1,
        {"invalid": 1},
        ("matrix.md", "matrix.json"),
    )
    [c] = contents.conformance
    assert (c.engine, c.counts, c.seconds, c.files) == (
        "delta-rs",
        {"conforms": 9},
        81.0,
        ("conformance.md", "conformance.json"),
    )
    html = index_page(contents, Filters(), "results/")
    assert 'href="/conformance-delta-rs/20261103T070000/conformance.md"' in html
    assert 'href="/matrix/20261102T080000/matrix.json"' in html
    assert "conforms 9" in html


def test_summaries_are_cached_until_a_file_changes(tmp_path: Path) -> None:
    d = make_run(tmp_path, "append-delta-rs/20261101T100000", verdict=None)
    catalog = Catalog(tmp_path)
    first = catalog.scan().runs[0]
    assert catalog.scan().runs[0] is first  # nothing changed: not re-read
    make_run(tmp_path, "x/20261101T100000", verdict="invalid", kinds=("lost-write",))
    shutil.copy(tmp_path / "x/20261101T100000/results.json", d / "results.json")
    shutil.rmtree(tmp_path / "x")
    (d / "report.html").write_text("<!DOCTYPE html><title>r</title>")
    [again] = catalog.scan().runs
    assert (again.verdict, again.kinds, again.has_report) == ("invalid", {"lost-write": 1}, True)
    (d / "results.json").write_text("{ truncated")  # a check being rewritten: listed, never an error
    [broken] = catalog.scan().runs
    assert broken.verdict == NOT_CHECKED and broken.ops == 24


def test_index_stays_cheap_on_hundreds_of_runs(tmp_path: Path) -> None:
    n = 300
    for i in range(n):
        eng = ("delta-rs", "sail", "delta-spark")[i % 3]
        make_run(
            tmp_path, f"append-{eng}/20261101T{i // 60:02d}{i % 60:02d}00", engine=eng, kinds=("duplicate",) * (i % 2)
        )
    catalog = Catalog(tmp_path)
    t0 = time.perf_counter()
    cold = index_page(catalog.scan(), Filters(), "results/")
    t1 = time.perf_counter()
    warm = index_page(catalog.scan(), Filters(), "results/")
    t2 = time.perf_counter()
    assert run_rows(cold) == run_rows(warm) == n
    print(f"index of {n} runs: {1000 * (t1 - t0):.0f} ms cold, {1000 * (t2 - t1):.0f} ms cached")
    assert t2 - t1 < 2.0, "a cached index of 300 runs should take milliseconds"


def test_resolve_request_refuses_every_way_out(tmp_path: Path) -> None:
    root = tmp_path / "results"
    make_run(root, "append-delta-rs/20261101T100000")
    (root / "latest").symlink_to(root / "append-delta-rs/20261101T100000")
    (tmp_path / "secret.txt").write_text("no")
    (root / "leak").symlink_to(tmp_path / "secret.txt")
    (root / "leakdir").symlink_to(tmp_path)
    root = root.resolve()
    assert resolve_request(root, "/latest/spec.json") == root / "append-delta-rs/20261101T100000/spec.json"
    assert resolve_request(root, "/append-delta-rs/20261101T100000/history.jsonl") is not None
    assert resolve_request(root, "/") == root
    for bad in (
        "/../secret.txt",
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/%2E%2E%2Fsecret.txt",
        "/append-delta-rs/../../secret.txt",
        "/leak",
        "/leakdir/secret.txt",
        "/latest/../../../secret.txt",  # latest is two folders down: out by the third ..
        "/a%00b",
    ):
        assert resolve_request(root, bad) is None, bad
    # "//etc/passwd" is a path under the root, not the absolute one.
    assert resolve_request(root, "//etc/passwd") == root / "etc/passwd"


def test_content_types() -> None:
    assert content_type(Path("report.html")) == "text/html; charset=utf-8"
    assert content_type(Path("timeline.svg")) == "image/svg+xml"
    assert content_type(Path("results.json")).startswith("application/json")
    for name in ("history.jsonl", "summary.txt", "conformance.md", "worker-3.log"):
        assert content_type(Path(name)) == "text/plain; charset=utf-8", name
    assert content_type(Path("part-0001.parquet")) == "application/octet-stream"


# --- a real run --------------------------------------------------------------


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real 3 s run (delta-rs, local storage), shared read-only by the
    tests of this module; each copies it into its own root."""
    results = tmp_path_factory.mktemp("serve-real") / "results"
    args = ("run", "--engine", "delta-rs", "--storage", "local", "--workload", "append", "--time-limit", "3")
    res = run_cli(*args, "--concurrency", "2", "--no-progress", "--results-dir", str(results), timeout=180)
    assert res.returncode in (0, 1, 3), (res.stdout[-2000:], res.stderr[-2000:])
    [spec] = [p for p in results.glob("append-delta-rs/*/spec.json")]
    return spec.parent


def copy_run(run: Path, root: Path) -> Path:
    dest = root / run.parent.name / run.name
    shutil.copytree(run, dest, symlinks=True)
    return dest


@pytest.mark.integration
def test_a_real_run_is_listed_as_its_results_say(real_run: Path, tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = copy_run(real_run, root)
    doc = json.loads((run / "results.json").read_text())
    [info] = Catalog(root).scan().runs
    assert (info.workload, info.engine, info.verdict) == ("append", "delta-rs", doc["verdict"])
    assert info.ops == doc["history"]["ops"] and info.ok == doc["history"]["ok"]
    assert info.duration_s and 2 <= info.duration_s < 30
    expected_kinds = {a["kind"] for c in doc["checkers"] for a in c["anomalies"]}
    assert set(info.kinds) == expected_kinds
    assert info.has_report == (run / "report.html").is_file()


# --- the live server -----------------------------------------------------------


@dataclass
class Live:
    proc: subprocess.Popen[str]
    url: str
    port: int
    stderr: Path

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace")


def _read_url_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            return ""
    return ""


@contextlib.contextmanager
def serving(root: Path, tmp_path: Path) -> Iterator[Live]:
    err = tmp_path / "serve.stderr"
    with open(err, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "serve", "--port", "0", "--results-dir", str(root)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
        )
    try:
        line = _read_url_line(proc, time.monotonic() + START_TIMEOUT_S)
        assert line.startswith(f"serving {root}/ at http://127.0.0.1:"), (line, err.read_text())
        assert line.rstrip().endswith("/ (Ctrl-C stops)"), line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        yield Live(proc, url, int(urlsplit(url).port or 0), err)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def raw_get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    """A request sent as written: http.client does not normalise the path."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_live_server_serves_the_root_and_nothing_outside_it(tmp_path: Path) -> None:
    root = tmp_path / "results"
    run = make_run(root, "bank-sail/20261101T100000", "bank", "sail", "invalid", ("lost-write",))
    (run / "report.html").write_text("<!DOCTYPE html><title>report</title><p>the report</p>")
    (run / "plot.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    (root / "latest").symlink_to(run)
    (tmp_path / "secret.txt").write_text("SECRET")
    (root / "leak").symlink_to(tmp_path / "secret.txt")
    with serving(root, tmp_path) as live:
        status, headers, body = raw_get(live.port, "/")
        assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
        assert headers["cache-control"] == "no-store"
        html = body.decode()
        assert run_rows(html) == 1 and "<code>lost-write</code>" in html
        assert 'href="/bank-sail/20261101T100000/report.html"' in html

        status, _, body = raw_get(live.port, "/?engine=delta-rs")
        assert status == 200 and run_rows(body.decode()) == 0

        for path, ctype in (
            ("/bank-sail/20261101T100000/report.html", "text/html; charset=utf-8"),
            ("/bank-sail/20261101T100000/plot.svg", "image/svg+xml"),
            ("/bank-sail/20261101T100000/results.json", "application/json; charset=utf-8"),
            ("/latest/history.jsonl", "text/plain; charset=utf-8"),
        ):
            status, headers, body = raw_get(live.port, path)
            assert (status, headers["content-type"]) == (200, ctype), path
            assert int(headers["content-length"]) == len(body) > 0
        status, headers, body = raw_get(live.port, "/latest/history.jsonl", "HEAD")
        assert status == 200 and body == b"" and int(headers["content-length"]) > 0

        status, _, body = raw_get(live.port, "/bank-sail/20261101T100000/")
        assert status == 200 and 'href="/bank-sail/20261101T100000/history.jsonl"' in body.decode()
        status, headers, _ = raw_get(live.port, "/bank-sail")
        assert status == 301 and headers["location"] == "/bank-sail/"
        status, _, body = raw_get(live.port, "/_files/")
        assert status == 200 and 'href="/bank-sail/"' in body.decode() and "leak" not in body.decode()

        for path in (
            "/../../etc/passwd",
            "/%2e%2e/%2e%2e/etc/passwd",
            "/%2e%2e/secret.txt",
            "/bank-sail/../../secret.txt",
            "/leak",
            "/no-such-file",
        ):
            status, _, body = raw_get(live.port, path)
            assert status in (403, 404), path
            assert b"SECRET" not in body and b"root:" not in body, path
        assert raw_get(live.port, "/", "POST")[0] == 405
        assert "Traceback" not in live.stderr_text()


def test_live_server_listens_on_loopback_only(tmp_path: Path) -> None:
    import psutil

    root = tmp_path / "results"
    make_run(root, "append-delta-rs/20261101T100000")
    with serving(root, tmp_path) as live:
        listening = [c for c in psutil.Process(live.proc.pid).net_connections("inet") if c.status == psutil.CONN_LISTEN]
        assert [(c.laddr.ip, c.laddr.port) for c in listening] == [("127.0.0.1", live.port)]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_it_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    root = tmp_path / "results"
    make_run(root, "append-delta-rs/20261101T100000")
    with serving(root, tmp_path) as live:
        assert raw_get(live.port, "/")[0] == 200
        t0 = time.monotonic()
        live.proc.send_signal(sig)
        code = live.proc.wait(timeout=STOP_TIMEOUT_S)
        assert time.monotonic() - t0 < STOP_TIMEOUT_S
        assert code == 130, live.stderr_text()
        assert "Traceback" not in live.stderr_text()
        assert not still_running([live.proc.pid])
        with pytest.raises(ConnectionRefusedError):  # the socket is closed with it
            socket.create_connection(("127.0.0.1", live.port), timeout=2).close()


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    root = tmp_path / "results"
    root.mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = run_cli("serve", "--port", str(port), "--results-dir", str(root), timeout=60)
    assert res.returncode == 2, (res.stdout, res.stderr)
    [line] = res.stderr.strip().splitlines()
    assert line == f"delta-jepsen: error: port {port} on 127.0.0.1 is in use (--port 0 picks a free one)"
    res = run_cli("serve", "--port", "0", "--results-dir", str(tmp_path / "missing"), timeout=60)
    assert res.returncode == 2 and "no results folder at" in res.stderr and "Traceback" not in res.stderr


# --- a real browser ------------------------------------------------------------


@pytest.mark.integration
def test_a_browser_sees_the_index_and_follows_the_report(real_run: Path, tmp_path: Path) -> None:
    from tests.browser import chromium_path, png_size, visit

    chromium_path()  # skips, naming the package, where chromium is missing
    root = tmp_path / "results"
    run = copy_run(real_run, root)
    make_run(root, "bank-sail/20201101T100000", "bank", "sail", "invalid", ("lost-write",))
    with serving(root, tmp_path) as live:
        shot = tmp_path / "index.png"
        v = visit(live.url, shot, ["table#runs tr.run", "select[name=engine]", "section#conformance"])
        assert not v.console_errors and not v.page_errors, (v.console_errors, v.page_errors)
        assert not v.foreign_requests(), v.foreign_requests()
        assert v.counts["table#runs tr.run"] == 2 and v.counts["select[name=engine]"] == 1
        width, height = png_size(shot)
        assert width >= 1000 and height >= 300, (width, height)

        filtered = visit(live.url + "?engine=delta-rs", tmp_path / "filtered.png", ["table#runs tr.run"])
        assert filtered.counts["table#runs tr.run"] == 1

        if (run / "report.html").is_file():
            # The link as the index gives it, followed.
            link = f'href="/{run.relative_to(root).as_posix()}/report.html"'
            assert link in raw_get(live.port, "/")[2].decode()
            report = visit(live.url + link[len('href="/') : -1], tmp_path / "report.png", ["body"])
            assert not report.page_errors, report.page_errors
            assert not report.foreign_requests(), report.foreign_requests()
            assert report.counts["body"] == 1
        assert "Traceback" not in live.stderr_text()
