"""The browser's own pages: the index of runs (with its filters) and a
folder's file listing, both on the shell of harness/check/html.py."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

from harness.check.html import esc, page, verdict_badge
from harness.serve.catalog import NOT_CHECKED, ConformanceInfo, Contents, MatrixInfo, RunInfo

__all__ = ["FILES_PATH", "Filters", "index_page", "listing_page"]

# The root folder's own listing: "/" is the index.
FILES_PATH = "/_files/"

_CSS = """
form.filters { margin: 4px 0 10px; display: flex; gap: 14px; align-items: center; flex-wrap: wrap; }
form.filters label { font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.run td, tr.cf td, tr.mx td { white-space: nowrap; }
td.kinds { white-space: normal !important; max-width: 360px; }
.badge.verdict-not { background: #888 !important; }
"""

_VERDICT_ORDER = ("invalid", "unknown", "valid", NOT_CHECKED)


@dataclass(frozen=True)
class Filters:
    engine: str = ""
    workload: str = ""
    verdict: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, Sequence[str]]) -> Filters:
        def one(name: str) -> str:
            values = query.get(name) or [""]
            return values[-1].strip()

        return cls(engine=one("engine"), workload=one("workload"), verdict=one("verdict").lower())

    def keep(self, run: RunInfo) -> bool:
        return (
            (not self.engine or run.engine == self.engine)
            and (not self.workload or run.workload == self.workload)
            and (not self.verdict or run.verdict == self.verdict)
        )


def href(rel: str, name: str = "") -> str:
    """The URL path of a file or folder under the root (a folder ends in /)."""
    path = "/" + (rel.strip("/") + "/" if rel.strip("/") else "") + name
    return quote(path)


def _when(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _duration(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    return f"{m} min {sec:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


def _badge(verdict: str) -> str:
    return verdict_badge(verdict if verdict != NOT_CHECKED else "not checked")


def _select(name: str, label: str, values: list[str], chosen: str) -> str:
    if chosen and chosen not in values:
        values = [*values, chosen]
    opts = [f'<option value=""{"" if chosen else " selected"}>(all)</option>']
    opts += [f'<option value="{esc(v)}"{" selected" if v == chosen else ""}>{esc(v)}</option>' for v in values]
    return f'<label for="f-{name}">{esc(label)}</label><select id="f-{name}" name="{name}">{"".join(opts)}</select>'


def _kinds(kinds: dict[str, int]) -> str:
    if not kinds:
        return '<span class="muted">-</span>'
    return ", ".join(f"<code>{esc(k)}</code>" + (f" &times;{n}" if n > 1 else "") for k, n in kinds.items())


def _ops(r: RunInfo) -> str:
    if r.ops is None:
        return '<span class="muted">-</span>'
    detail = f" ({r.ok} ok, {r.fail} fail, {r.info} info)" if None not in (r.ok, r.fail, r.info) else ""
    return f'{r.ops}<span class="muted">{esc(detail)}</span>'


def _run_row(r: RunInfo) -> str:
    report = f'<a href="{href(r.rel, "report.html")}">report</a>' if r.has_report else ""
    if not report and r.has_summary:
        report = f'<a href="{href(r.rel, "summary.txt")}">summary</a>'
    nemesis = ", ".join(r.nemesis) or "none"
    extra = f' <span class="muted">{esc(r.isolation)}</span>' if r.isolation else ""
    if r.interrupted:
        extra += ' <span class="muted">(interrupted)</span>'
    return (
        f'<tr class="run" data-verdict="{esc(r.verdict)}" data-engine="{esc(r.engine)}" '
        f'data-workload="{esc(r.workload)}">'
        f"<td>{esc(_when(r.time))}</td><td>{esc(r.workload)}{extra}</td><td>{esc(r.engine)}</td>"
        f'<td>{esc(nemesis)}</td><td>{_badge(r.verdict)}</td><td class="kinds">{_kinds(r.kinds)}</td>'
        f'<td class="num">{_ops(r)}</td>'
        f'<td class="num">{esc(f"{r.ops_per_s:.2f}") if r.ops_per_s is not None else "-"}</td>'
        f'<td class="num">{esc(_duration(r.duration_s))}</td>'
        f"<td>{report}</td>"
        f'<td><a class="mono" href="{href(r.rel)}">{esc(r.rel)}/</a></td></tr>'
    )


def _files_links(rel: str, files: tuple[str, ...]) -> str:
    links = [f'<a href="{href(rel, n)}">{esc(n.rpartition(".")[2])}</a>' for n in files]
    return " &middot; ".join(links) or '<span class="muted">none yet</span>'


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{esc(k)} {v}" for k, v in counts.items()) or "-"


def _conformance_section(items: list[ConformanceInfo]) -> str:
    if not items:
        return '<section id="conformance"><h2>Conformance matrices</h2><p class="muted">none</p></section>'
    rows = [
        f'<tr class="cf"><td>{esc(_when(c.time))}</td><td>{esc(c.engine)}</td><td>{_counts(c.counts)}</td>'
        f'<td class="num">{esc(_duration(c.seconds))}</td><td>{_files_links(c.rel, c.files)}</td>'
        f'<td><a class="mono" href="{href(c.rel)}">{esc(c.rel)}/</a></td></tr>'
        for c in items
    ]
    return (
        '<section id="conformance"><h2>Conformance matrices</h2><table id="conformance-runs">'
        '<tr><th>time (UTC)</th><th>engine</th><th>cells</th><th class="num">duration</th><th>report</th>'
        f"<th>folder</th></tr>{''.join(rows)}</table></section>"
    )


def _matrix_section(items: list[MatrixInfo]) -> str:
    if not items:
        return '<section id="matrices"><h2>Workload matrices</h2><p class="muted">none</p></section>'
    rows = [
        f'<tr class="mx"><td>{esc(_when(m.time))}</td>'
        f'<td class="num">{m.cells if m.cells is not None else "-"}</td><td>{_counts(m.verdicts)}</td>'
        f'<td>{_files_links(m.rel, m.files)}</td><td><a class="mono" href="{href(m.rel)}">{esc(m.rel)}/</a></td></tr>'
        for m in items
    ]
    return (
        '<section id="matrices"><h2>Workload matrices</h2><table id="matrix-runs">'
        '<tr><th>time (UTC)</th><th class="num">cells</th><th>verdicts</th><th>report</th><th>folder</th></tr>'
        f"{''.join(rows)}</table></section>"
    )


def index_page(contents: Contents, filters: Filters, root_label: str) -> str:
    runs = [r for r in contents.runs if filters.keep(r)]
    engines = sorted({r.engine for r in contents.runs})
    workloads = sorted({r.workload for r in contents.runs})
    present = {r.verdict for r in contents.runs}
    verdicts = [v for v in _VERDICT_ORDER if v in present] + sorted(present - set(_VERDICT_ORDER))
    form = (
        '<form class="filters" method="get" action="/">'
        + _select("engine", "engine", engines, filters.engine)
        + _select("workload", "workload", workloads, filters.workload)
        + _select("verdict", "verdict", verdicts, filters.verdict)
        + '<button type="submit">filter</button> <a href="/">clear</a></form>'
    )
    if runs:
        table = (
            '<table id="runs"><tr><th>time (UTC)</th><th>workload</th><th>engine</th><th>nemesis</th>'
            '<th>verdict</th><th>anomalies</th><th class="num">ops</th><th class="num">ops/s</th>'
            '<th class="num">duration</th><th>report</th><th>folder</th></tr>'
            + "".join(_run_row(r) for r in runs)
            + "</table>"
        )
    else:
        what = "match these filters" if contents.runs else "here yet (delta-jepsen run writes one)"
        table = f'<table id="runs"></table><p class="muted">No runs {what}.</p>'
    noun = "run" if len(contents.runs) == 1 else "runs"
    tally = f"{len(runs)} of {len(contents.runs)} {noun}" if len(runs) != len(contents.runs) else f"{len(runs)} {noun}"
    body = (
        f"<header><h1>delta-jepsen results</h1>"
        f'<div class="muted"><code>{esc(root_label)}</code> &middot; {tally} &middot; '
        f'<a href="{FILES_PATH}">all files</a></div></header><main>'
        f'<section id="runs-section"><h2>Runs</h2>{form}{table}</section>'
        + _conformance_section(contents.conformance)
        + _matrix_section(contents.matrices)
        + "</main>"
    )
    return page("delta-jepsen results", body, _CSS)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


def listing_page(root: Path, folder: Path, root_label: str) -> str:
    """`folder` (inside `root`, already checked) as a table of its entries;
    an entry whose target lies outside the root is left out."""
    rel = folder.relative_to(root).as_posix() if folder != root else ""
    rows: list[str] = []
    entries: list[tuple[bool, str, int, float]] = []
    with os.scandir(folder) as it:
        for e in it:
            try:
                target = Path(e.path).resolve()
                if target != root and root not in target.parents:
                    continue
                st = os.stat(e.path)
            except OSError:
                continue
            entries.append((e.is_dir(), e.name, st.st_size, st.st_mtime))
    entries.sort(key=lambda x: (not x[0], x[1]))
    if rel:
        parent = rel.rpartition("/")[0]
        rows.append(f'<tr><td><a href="{href(parent) if parent else FILES_PATH}">../</a></td><td></td><td></td></tr>')
    for is_dir, name, size, mtime in entries:
        link = href(f"{rel}/{name}" if rel else name) if is_dir else href(rel, name)
        shown = name + ("/" if is_dir else "")
        when = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(
            f'<tr class="entry"><td><a class="mono" href="{link}">{esc(shown)}</a></td>'
            f'<td class="num">{"" if is_dir else esc(_size(size))}</td><td>{esc(when)}</td></tr>'
        )
    crumbs = ['<a href="/">index</a>', f'<a href="{FILES_PATH}">{esc(root_label)}</a>']
    parts = rel.split("/") if rel else []
    for i, part in enumerate(parts):
        crumbs.append(f'<a href="{href("/".join(parts[: i + 1]))}">{esc(part)}</a>')
    is_run = (folder / "spec.json").is_file() and (folder / "history.jsonl").is_file()
    note = ""
    if is_run and (folder / "report.html").is_file():
        note = f'<p><a href="{href(rel, "report.html")}">report.html</a>: this run\'s report</p>'
    body = (
        f"<header><h1>{' / '.join(crumbs)}</h1></header><main><section>{note}"
        '<table id="files"><tr><th>name</th><th class="num">size</th><th>modified (UTC)</th></tr>'
        f"{''.join(rows)}</table></section></main>"
    )
    return page(f"{root_label}/{rel}", body, _CSS)
