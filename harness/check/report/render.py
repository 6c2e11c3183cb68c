"""report.html: one self-contained page per run folder, for the person who
has to decide what a run found. Verdict and commands first, then each
anomaly with its evidence and graph, the checkers, then the pictures of
the run (timeline, latency, throughput, conflicts) and the run's spec."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from checkers.base import Anomaly, CheckResult
from checkers.claims import claim_text
from harness.check.html import VERDICT_COLOURS, esc, page, verdict_badge
from harness.check.report.graphs import graph_html
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
from harness.core.history import History, Op, error_class_label

__all__ = ["MAX_ANOMALIES_PER_KIND", "REPORT_NAME", "render_report", "write_report"]

REPORT_NAME = "report.html"
# A checker that finds thousands of anomalies (one broken commit can make
# every later read stale) would bury the first ones: the rest are in results.json.
MAX_ANOMALIES_PER_KIND = 5
MAX_GRAPHS = 30
_MAX_OPS_PER_ANOMALY = 30

_CSS = """
header .sub { color: #555; margin-top: 4px; }
header .verdict .badge { font-size: 18px; padding: 2px 14px; }
.cmd { display: flex; gap: 8px; align-items: baseline; margin: 4px 0; }
.cmd b { min-width: 70px; }
.cmd code { background: #f3f3f3; padding: 2px 6px; border-radius: 4px; word-break: break-all; }
.warn { background: #fff6e5; border-left: 4px solid #f0ad4e; padding: 6px 10px; margin: 6px 0; }
.anomaly { border-left: 5px solid #d9534f; }
.anomaly h3 code { font-weight: normal; }
.anomaly .claim { color: #555; }
.anomaly table { margin: 6px 0; }
.graph { overflow-x: auto; margin: 8px 0; }
.plot { overflow-x: auto; }
.stats td { padding: 2px 10px; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
nav a { margin-right: 12px; }
#checkers td:first-child { white-space: nowrap; }
"""


def write_report(
    run_dir: Path,
    *,
    doc: dict[str, Any],
    results: Sequence[CheckResult],
    history: History,
    spec: dict[str, Any],
    run: dict[str, Any],
) -> Path:
    """Writes report.html into `run_dir` (after results.json's anomaly graphs,
    whose SVGs it reuses) and returns its path."""
    path = run_dir / REPORT_NAME
    html = render_report(run_dir, doc=doc, results=results, history=history, spec=spec, run=run)
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a page
    return path


def render_report(
    run_dir: Path,
    *,
    doc: dict[str, Any],
    results: Sequence[CheckResult],
    history: History,
    spec: dict[str, Any],
    run: dict[str, Any],
) -> str:
    """The page."""
    t0 = time.monotonic()
    # Drawn here, after the checkers: drawn beside them in a forked process,
    # the plots cost the check more than they took (each page of the
    # history the checkers touched while the fork lived was copied, a
    # million copies in a 1M-commit check).
    got = _draw(history)
    ops = {op.id: op for op in history.ops()}
    anomalous = frozenset(o for r in results for a in r.anomalies for o in a.ops)
    faults, spans = got["faults"], got["spans"]
    verdict = str(doc.get("verdict", "unknown"))
    title = f"{verdict.upper()}: {_run_name(run_dir)}"
    sections = [
        _commands(run_dir, doc, run),
        _anomalies(run_dir, results, ops),
        _checkers(results),
        _claims(results),
        _timeline(
            spans,
            faults,
            anomalous,
            next((a.ops for r in results for a in r.anomalies if a.ops), []),
            None if anomalous else got["timeline"],
        ),
        _plot_section("latency", "Latency", got["latency"]),
        _plot_section("throughput", "Throughput", got["throughput"]),
        _errors(doc, got["conflict_rate"]),
        _spec(spec, doc, run),
    ]
    footer = f'<p class="muted">Drawn in {time.monotonic() - t0:.1f} s from the run folder by delta-jepsen check.</p>'
    body = f"{_header(run_dir, verdict, doc, spec)}<main>{''.join(sections)}{footer}</main>"
    return page(title, body, extra_css=_CSS)


def _draw(history: History) -> dict[str, Any]:
    """The plots drawn from the history alone, the whole-run timeline as it
    is with no op highlighted, and the spans and faults they were drawn from."""
    spans = spans_of(history)
    faults = faults_of(history)
    return {
        "spans": spans,
        "faults": faults,
        "timeline": timeline_svg(spans, faults),
        "latency": latency_svg(spans, faults),
        "throughput": throughput_svg(spans, faults),
        "conflict_rate": conflict_rate_svg(spans, faults),
    }


# -- verdict ---------------------------------------------------------------------


def _names(value: Any) -> str:
    """A spec field that is one name or a list of them (engines, nemeses)."""
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))
    return "" if value is None else str(value)


def _run_name(run_dir: Path) -> str:
    # <workload>-<engine>/<timestamp>: the timestamp alone names no run.
    return f"{run_dir.parent.name}/{run_dir.name}" if run_dir.parent.name else run_dir.name


def _spec_line(spec: dict[str, Any]) -> str:
    s = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
    defaults = sorted(
        {
            str(caps["default_isolation"])
            for e in (spec.get("engines") or {}).values()
            if isinstance(e, dict) and (caps := e.get("capabilities") or {}).get("default_isolation")
        }
    )
    default = "engine default" + (f" ({', '.join(defaults)})" if defaults else "")
    parts = [
        f"workload <b>{esc(s.get('workload', '?'))}</b>",
        f"engine <b>{esc(_names(s.get('engine')) or '?')}</b>",
        f"storage <b>{esc(s.get('storage', '?'))}</b>",
        f"isolation <b>{esc(s.get('isolation') or default)}</b>",
        f"seed {esc(s.get('seed'))}",
        f"nemesis {esc(_names(s.get('nemesis')) or 'none')}",
    ]
    return " · ".join(parts)


def _header(run_dir: Path, verdict: str, doc: dict[str, Any], spec: dict[str, Any]) -> str:
    h = doc.get("history") or {}
    log = doc.get("log") or {}
    rate = f", {h['ops_per_s']:.1f} ops/s" if h.get("ops_per_s") else ""
    counts = (
        f"{h.get('ops', 0)} ops ({h.get('ok', 0)} ok, {h.get('fail', 0)} fail, {h.get('info', 0)} info) "
        f"in {h.get('elapsed_s', 0):.1f} s{rate}; versions committed: "
        f"{log.get('latest_version') if log.get('latest_version') is not None else 'none'}"
    )
    if h.get("conflict_rate") is not None:
        counts += f"; conflict rate {100 * h['conflict_rate']:.1f}% of {h.get('write_ops')} write ops"
    # Whether a lost write is the engine's bug or its LogStore's documented
    # limit (e.g. one JVM's mutual exclusion on S3) turns on this line.
    # Each engine's protocol names its LogStore (delta-spark's --log-store).
    protocols = spec.get("commit_protocols") or doc.get("commit_protocols") or {}
    commit = "; ".join(f"{engine}: {p}" for engine, p in protocols.items())
    return (
        f'<header><h1 id="verdict" class="verdict">{verdict_badge(verdict)} {esc(_run_name(run_dir))}</h1>'
        f'<div class="sub">{_spec_line(spec)}</div>'
        + (f'<div class="sub" id="commit-protocol">commit protocol: {esc(commit)}</div>' if commit else "")
        + _contract_line(doc)
        + _store_line(doc)
        + _replaced_line(doc)
        + f'<div class="sub">{esc(counts)}</div></header>'
    )


def _contract_line(doc: dict[str, Any]) -> str:
    """A run configured outside its engines' or store's documented contract:
    what follows from that is no engine defect, and the page says so next
    to the verdict."""
    outside = (doc.get("contract") or {}).get("outside")
    if not outside:
        return ""
    colour = VERDICT_COLOURS["unknown"]
    return f'<div class="sub" id="outside-contract" style="color:{colour};font-weight:600">{esc(outside)}</div>'


def _store_line(doc: dict[str, Any]) -> str:
    """The S3 store's self-check: a store that let two conditional PUTs win
    would make an engine look like it lost commits."""
    store = doc.get("store_self_check")
    if not isinstance(store, dict):
        return ""
    text = f"store self-check: {store.get('summary', '?')}"
    if store.get("passed") is False:
        text += f"; {store.get('anomalies_excused', 0)} anomalies such a store explains are reported as the store's"
        colour = VERDICT_COLOURS["invalid"]
        return f'<div class="sub" id="store-check" style="color:{colour};font-weight:600">{esc(text)}</div>'
    return f'<div class="sub" id="store-check">{esc(text)}</div>'


def store_replaced_text(doc: dict[str, Any]) -> str:
    """What the store's own log says of commit files written twice (a
    SeaweedFS run), for the summary and the page; "" when it says nothing."""
    replaced = doc.get("store_replaced_commits")
    if not isinstance(replaced, dict):
        return ""
    if not replaced.get("read"):
        return f"the store's log of replaced commit files could not be read: {str(replaced.get('error'))[:200]}"
    versions = replaced.get("versions") or []
    if not versions:
        return ""
    shown = ", ".join(map(str, versions[:10])) + (f" and {len(versions) - 10} more" if len(versions) > 10 else "")
    text = f"the store's own log shows the commit file of version(s) {shown} replaced by a second write"
    if replaced.get("not_excused_because"):
        return f"{text}; {replaced['not_excused_because']}"
    return text + (
        f"; {replaced.get('anomalies_excused', 0)} lost commit(s) at those versions are reported as the store's "
        "(unknown for the engine)"
    )


def _replaced_line(doc: dict[str, Any]) -> str:
    text = store_replaced_text(doc)
    if not text:
        return ""
    colour = VERDICT_COLOURS["invalid"]
    return f'<div class="sub" id="store-replaced" style="color:{colour};font-weight:600">{esc(text)}</div>'


def _commands(run_dir: Path, doc: dict[str, Any], run: dict[str, Any]) -> str:
    h = doc.get("history") or {}
    warns = []
    if run.get("interrupted"):
        warns.append("The run was interrupted (SIGINT/SIGTERM): this checks the partial history.")
    if run.get("refused"):
        warns.append("The engine refused to create the table: " + str(run["refused"]).splitlines()[0][:300])
    if h.get("truncated"):
        warns.append("The history ends in a truncated line: checked as far as it goes.")
    warns += [f"History problem: {p}" for p in h.get("problems", []) if "truncated" not in p]
    warns += [
        f"Harness fault (a bug in delta-jepsen, not the engine's error) in op {f['op']} ({f['f']}): {f['error'][:300]}"
        for f in h.get("harness_faults", [])[:5]
    ]
    commands = []
    if doc.get("repro"):
        commands.append(f'<div class="cmd"><b>re-run</b><code id="repro">{esc(doc["repro"])}</code></div>')
    commands.append(
        f'<div class="cmd"><b>re-check</b><code id="recheck">delta-jepsen check {esc(run_dir)}</code></div>'
    )
    nav = (
        '<nav><a href="#anomalies">anomalies</a><a href="#checkers">checkers</a><a href="#timeline">timeline</a>'
        '<a href="#latency">latency</a><a href="#throughput">throughput</a><a href="#errors">errors</a>'
        '<a href="#spec">spec</a></nav>'
    )
    return f"<section>{''.join(f'<div class=warn>{esc(w)}</div>' for w in warns)}{''.join(commands)}{nav}</section>"


# -- anomalies -------------------------------------------------------------------


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + "…"


def _op_row(op_id: str, ops: dict[str, Op]) -> str:
    op = ops.get(op_id)
    if op is None:
        return f"<tr><td><code>{esc(op_id)}</code></td><td colspan=6 class=muted>not in the history</td></tr>"
    end = f"{op.end / 1e9:.3f}" if op.end is not None else "never"
    err = f"{op.error.cls.value}: {op.error.raw[:200]}" if op.error else ""
    value = json.dumps(op.value, default=str)
    return (
        f"<tr><td><code>{esc(op_id)}</code></td><td>{esc(op.process)}</td><td>{esc(op.f)}</td>"
        f"<td>{esc(op.type)}</td><td class=num>{op.start / 1e9:.3f} .. {end}</td>"
        f"<td>{esc(op.version if op.version is not None else '')}</td>"
        f"<td class=mono>{esc(_clip(value, 200))}{'<br>' if err else ''}{esc(err)}</td></tr>"
    )


def _rows(rows: list[Any]) -> str:
    if all(isinstance(r, int | str | float) for r in rows):
        # Row ids: one wrapped line reads better than a column of numbers.
        more = f" (first 200 of {len(rows)})" if len(rows) > 200 else f" ({len(rows)})"
        return f"<div>rows{more}: <code>{esc(', '.join(map(str, rows[:200])))}</code></div>"
    more = f" (first 20 of {len(rows)})" if len(rows) > 20 else ""
    return f"<div>rows{more}:</div><pre>{esc(chr(10).join(json.dumps(r, default=str) for r in rows[:20]))}</pre>"


def _anomaly(
    run_dir: Path, checker: str, n: int, a: Anomaly, ops: dict[str, Op], with_graph: bool, number: int = 0
) -> str:
    claim = (
        f"breaks spec {_claim_link(a.claim)}: <q>{esc(claim_text(a.claim))}</q>"
        if a.claim
        else "evidence against several claims (no one claim)"
    )
    parts = [
        f'<section class="anomaly" id="anomaly-{esc(checker)}-{n}">',
        f"<h3>{esc(a.title)} <code>{esc(a.kind)}</code></h3>",
        f'<div class="claim">{claim} · found by <code>{esc(checker)}</code></div>',
        f"<p>{esc(a.explanation)}</p>",
    ]
    if number:
        # The same numbering as the summary and `reproduce --list`.
        parts.append(
            f'<div class="reproduce">#{number} · reproduce: <code>delta-jepsen reproduce {esc(run_dir)} '
            f"--anomaly {number}</code></div>"
        )
    if a.ops:
        rows = "".join(_op_row(o, ops) for o in a.ops[:_MAX_OPS_PER_ANOMALY])
        more = f"<p class=muted>... {len(a.ops) - _MAX_OPS_PER_ANOMALY} more ops</p>" if len(a.ops) > 30 else ""
        parts.append(
            "<table class=ops><tr><th>op</th><th>process</th><th>f</th><th>outcome</th><th>t (s)</th>"
            f"<th>version</th><th>value / error</th></tr>{rows}</table>{more}"
        )
    if a.versions:
        parts.append(f"<div>versions: <code>{esc(', '.join(map(str, a.versions[:100])))}</code></div>")
    if a.rows:
        parts.append(_rows(a.rows))
    dot = a.details.get("dot") if a.details else None
    if dot and with_graph:
        svg_file = run_dir / "anomalies" / f"{checker}-{n:03d}-{a.kind}.svg"
        parts.append(graph_html(str(dot), svg_file))
    elif dot:
        parts.append(f"<p class=muted>Graph not drawn here (over {MAX_GRAPHS} on this page): see anomalies/.</p>")
    rest = {k: v for k, v in (a.details or {}).items() if k != "dot"}
    if rest:
        text = json.dumps(rest, indent=1, default=str)
        if len(text) > 20000:
            text = text[:20000] + "\n... (the rest in results.json)"
        parts.append(f"<details><summary>details</summary><pre>{esc(text)}</pre></details>")
    parts.append("</section>")
    return "".join(parts)


def _claim_link(claim: str) -> str:
    """A claim id linked to its text in the page's "Spec claims" section."""
    if not claim_text(claim):
        return esc(claim)
    return f'<a href="#claim-{esc(claim)}" title="{esc(claim_text(claim))}">{esc(claim)}</a>'


def _claims(results: Sequence[CheckResult]) -> str:
    """The text of every claim the page cites, so an anomaly's claim is read
    where it is judged, not looked up elsewhere."""
    cited = sorted({a.claim for r in results for a in r.anomalies if a.claim and claim_text(a.claim)})
    if not cited:
        return ""
    rows = "".join(f'<tr id="claim-{esc(c)}"><th>{esc(c)}</th><td>{esc(claim_text(c))}</td></tr>' for c in cited)
    return (
        '<section id="claims"><h2>Spec claims cited</h2><p class="muted">From the contract under test, as '
        "delta-jepsen cites it (the docs' page <em>The contract under test</em>, "
        "<code>delta-jepsen reference</code>).</p>"
        f"<table>{rows}</table></section>"
    )


def _anomalies(run_dir: Path, results: Sequence[CheckResult], ops: dict[str, Op]) -> str:
    total = sum(len(r.anomalies) for r in results)
    if not total:
        return '<section id="anomalies"><h2>Anomalies</h2><p>None: no checker found an anomaly.</p></section>'
    # One row per kind first: a broken commit can make hundreds of reads
    # stale, and the kinds, not the instances, say what went wrong.
    kinds: dict[tuple[str, str], list[tuple[int, Anomaly]]] = {}
    first: dict[str, int] = {}  # checker -> the number of its first anomaly, counted across checkers
    for r in results:
        first[r.checker] = sum(len(x.anomalies) for x in results[: results.index(r)])
        for n, a in enumerate(r.anomalies, start=1):
            kinds.setdefault((r.checker, a.kind), []).append((n, a))
    rows = "".join(
        f"<tr><td><code>{esc(checker)}</code></td><td><code>{esc(kind)}</code></td><td>{esc(found[0][1].title)}</td>"
        f"<td>{', '.join(_claim_link(c) for c in sorted({a.claim or '-' for _, a in found}))}</td>"
        f"<td class=num>{len(found)}</td>"
        f'<td><a href="#anomaly-{esc(checker)}-{found[0][0]}">first</a></td></tr>'
        for (checker, kind), found in kinds.items()
    )
    out = [
        f'<section id="anomalies"><h2>Anomalies ({total})</h2>'
        "<table id=anomaly-kinds><tr><th>checker</th><th>kind</th><th>what</th><th>spec claim</th><th>found</th>"
        f"<th></th></tr>{rows}</table>"
    ]
    graphs = 0
    for (checker, kind), found in kinds.items():
        for n, a in found[:MAX_ANOMALIES_PER_KIND]:
            has_dot = bool(a.details and a.details.get("dot"))
            number = first[checker] + n
            out.append(_anomaly(run_dir, checker, n, a, ops, with_graph=has_dot and graphs < MAX_GRAPHS, number=number))
            graphs += has_dot
        if len(found) > MAX_ANOMALIES_PER_KIND:
            out.append(
                f"<p class=muted>... {len(found) - MAX_ANOMALIES_PER_KIND} more <code>{esc(kind)}</code> "
                f"anomalies of <code>{esc(checker)}</code> in results.json.</p>"
            )
    out.append("</section>")
    return "".join(out)


# -- checkers --------------------------------------------------------------------


def _checkers(results: Sequence[CheckResult]) -> str:
    rows = "".join(
        f"<tr class=checker-{esc(r.verdict.value)}><td><code>{esc(r.checker)}</code></td>"
        f"<td>{verdict_badge(r.verdict.value)}</td><td class=num>{len(r.anomalies)}</td>"
        f"<td>{esc(r.explanation)}</td></tr>"
        for r in results
    )
    out = [
        '<section id="checkers"><h2>Checkers</h2>'
        f"<table><tr><th>checker</th><th>verdict</th><th>anomalies</th><th>explanation</th></tr>{rows}</table>"
    ]
    findings = next((r.stats.get("deviations") for r in results if r.checker == "exception-classes"), None)
    if findings:
        items = "".join(
            f"<tr><td><code>{esc(f.get('kind'))}</code></td><td>{esc(f.get('claim'))}</td>"
            f"<td>{esc(str(f.get('explanation'))[:400])}</td></tr>"
            for f in findings[:50]
        )
        out.append(
            f"<h3>Exception-class findings ({len(findings)}; not safety, --strict-exceptions fails on them)</h3>"
            f"<table><tr><th>kind</th><th>claim</th><th>explanation</th></tr>{items}</table>"
        )
    out.append("</section>")
    return "".join(out)


# -- pictures --------------------------------------------------------------------


def _plot_section(sid: str, title: str, svg: str, intro: str = "") -> str:
    return f'<section id="{sid}"><h2>{esc(title)}</h2>{intro}<div class="plot">{svg}</div></section>'


def _zoom_window(spans: Sequence[Span], first: Sequence[str]) -> tuple[float, float] | None:
    """The stretch of time around the first anomaly's ops, where a whole-run
    timeline of a long run is too dense to read."""
    by_id = {s.id: s for s in spans}
    mine = [by_id[o] for o in first if o in by_id]
    if not mine or not spans:
        return None
    lo = min(s.start for s in mine)
    hi = max(s.end if s.end is not None else s.start for s in mine)
    pad = max(0.5, (hi - lo) * 0.25)
    return max(lo - pad, min(s.start for s in spans)), hi + pad


def _timeline(
    spans: Sequence[Span],
    faults: Sequence[Fault],
    anomalous: frozenset[str],
    first: Sequence[str],
    drawn: tuple[str, str] | None = None,
) -> str:
    svg, note = drawn if drawn is not None else timeline_svg(spans, faults, highlight=anomalous)
    window = _zoom_window(spans, first)
    zoom = ""
    if window is not None:
        zsvg, znote = timeline_svg(spans, faults, highlight=anomalous, window=window, salt="timeline-zoom")
        zoom = (
            f"<h3>Around the first anomaly: {window[0]:.2f} s to {window[1]:.2f} s</h3>"
            f"{f'<div class=warn>{esc(znote)}</div>' if znote else ''}"
            f'<div class="plot" id="timeline-zoom">{zsvg}</div>'
        )
    intro = (
        "<p class=muted>One lane per process; a bar per op from invoke to completion (green ok, red fail, amber "
        "info; an info bar that never completed runs to the end). Hover a bar for its op; the top lane marks each "
        "version as its op completed. Shaded: nemesis faults. Outlined in black: the ops an anomaly names.</p>"
    )
    if note:
        intro += f"<div class=warn>{esc(note)}</div>"
    if faults:
        rows = "".join(
            f"<tr><td>{esc(f.kind)}</td><td class=num>{f.start:.2f}</td><td class=num>{f.end:.2f}"
            f"{'' if f.stopped else ' (never stopped)'}</td><td class=mono>{esc(f.detail)}</td></tr>"
            for f in faults[:200]
        )
        intro += (
            "<details><summary>nemesis intervals</summary><table><tr><th>fault</th><th>from (s)</th>"
            f"<th>to (s)</th><th>what</th></tr>{rows}</table></details>"
        )
    return _plot_section("timeline", "Timeline", svg, intro).replace("</section>", zoom + "</section>")


def _errors(doc: dict[str, Any], conflict_rate: str) -> str:
    h = doc.get("history") or {}
    by_f: dict[str, dict[str, int]] = h.get("error_classes_by_f") or {}
    ops_by_f: dict[str, int] = h.get("by_f") or {}
    classes = sorted({c for d in by_f.values() for c in d})
    if classes:
        head = "".join(f"<th>{esc(error_class_label(c))}</th>" for c in classes)
        rows = "".join(
            f"<tr><td><code>{esc(f)}</code></td><td class=num>{ops_by_f.get(f, '')}</td>"
            + "".join(f"<td class=num>{by_f.get(f, {}).get(c, '') or ''}</td>" for c in classes)
            + "</tr>"
            for f in sorted(set(ops_by_f) | set(by_f))
        )
        table = f"<table id=error-classes><tr><th>op</th><th>ops</th>{head}</tr>{rows}</table>"
    else:
        table = "<p>No op ended in an error.</p>"
    rate = _plot_section(
        "conflict-rate",
        "Conflict rate over time",
        conflict_rate,
        "<p class=muted>Of the write ops (every op but reads) completing in each interval, the share that failed "
        "because of a concurrent commit (E1-E6 or unclassified).</p>",
    )
    return f'<section id="errors"><h2>Error classes per op kind</h2>{table}</section>{rate}'


# -- the run's spec ----------------------------------------------------------------


def _cell(v: Any) -> str:
    if v is None or v == []:
        return "—"
    return json.dumps(v, default=str) if isinstance(v, list | dict) else str(v)


def _kv(rows: list[tuple[str, Any]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(_cell(v))}</td></tr>" for k, v in rows)
    return f"<table class=stats>{body}</table>"


def _spec(spec: dict[str, Any], doc: dict[str, Any], run: dict[str, Any]) -> str:
    s = spec.get("spec") if isinstance(spec.get("spec"), dict) else {}
    rows: list[tuple[str, Any]] = list(s.items())
    log = doc.get("log") or {}
    rows.append(("isolation level(s) in the log", " -> ".join(log.get("isolation_levels") or []) or None))
    for engine, protocol in (spec.get("commit_protocols") or doc.get("commit_protocols") or {}).items():
        rows.append((f"commit protocol ({engine})", protocol))
    for name, e in (spec.get("engines") or {}).items():
        caps = (e or {}).get("capabilities") or {}
        if caps.get("default_isolation"):
            rows.append((f"{name}: default isolation", caps["default_isolation"]))
        if caps.get("notes"):
            rows.append((f"{name}: notes", caps["notes"]))
    nodes = spec.get("nodes") or []
    if nodes:
        rows.append(("nodes", ", ".join(f"{n.get('name')} ({n.get('engine')})" for n in nodes if isinstance(n, dict))))
    rows += [(f"run: {k}", v) for k, v in run.items() if k != "counts" and not isinstance(v, dict)]
    versions = spec.get("versions") or {}
    vtable = _kv(sorted(versions.items())) if versions else "<p class=muted>not recorded</p>"
    return f'<section id="spec"><h2>Run spec</h2>{_kv(rows)}<h3>Package versions</h3>{vtable}</section>'
