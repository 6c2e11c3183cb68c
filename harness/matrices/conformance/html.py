"""conformance.html: the conformance matrix as one self-contained page.

A grid of every cell run, rows the ordered op pairs (winner > loser),
columns isolation level x layout, each cell coloured by its verdict and
opening, on a click, its evidence: ops, order, level, layout, what the spec
expects and why, what happened to each transaction with its raw error, and
the serializability checker's verdict on the committed table. Built from
the same document as conformance.json, so a stored matrix can be re-rendered.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.check.html import VERDICT_COLOURS, esc, page, verdict_badge
from harness.core.isolation import LEVELS
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.verdict import (
    AVAILABILITY,
    CONFORMS,
    EXCEPTION_CLASS,
    PASSES,
    RETRIED,
    SAFETY,
    UNCONTROLLED,
    UNJUDGED,
    V_ERROR,
    V_UNSUPPORTED,
    VERDICTS,
)

__all__ = ["COLOURS", "render_html"]

# Red only for what breaks a guarantee; the cells the harness could not
# judge are in colours of their own, never green.
COLOURS = {
    CONFORMS: VERDICT_COLOURS["valid"],
    # A pass, in a darker green: the engine retried the loser.
    RETRIED: "#3d8b40",
    SAFETY: VERDICT_COLOURS["invalid"],
    AVAILABILITY: "#e8743b",
    EXCEPTION_CLASS: "#c9a227",
    V_UNSUPPORTED: "#b8b8b8",
    UNCONTROLLED: "#8e6fbf",
    V_ERROR: "#555555",
    UNJUDGED: VERDICT_COLOURS["unknown"],
}
# What a grid cell shows beside its claim; the full name is in its tooltip.
SHORT = {
    CONFORMS: "ok",
    RETRIED: "ok retry",
    SAFETY: "SAFETY",
    AVAILABILITY: "avail",
    EXCEPTION_CLASS: "class",
    V_UNSUPPORTED: "n/a",
    UNCONTROLLED: "unctl",
    V_ERROR: "error",
    UNJUDGED: "unjudged",
}
OP_ORDER = (
    C.INSERT,
    C.APP_TXN,
    C.INSERT_SELECT,
    C.UPDATE,
    C.DELETE,
    C.DELETE_ALL,
    C.MERGE,
    C.MERGE_NOLIT,
    C.OPTIMIZE,
    C.ZORDER,
    C.SET_PROPERTIES,
    C.ADD_COLUMNS,
    C.CREATE,
)

_CSS = """
#conformance-grid { font-size: 12px; }
#conformance-grid th.row { white-space: nowrap; font-weight: 600; }
#conformance-grid th.col { text-align: center; font-size: 11.5px; }
#conformance-grid td { padding: 0; min-width: 74px; }
td.cell summary { list-style: none; padding: 3px 6px; color: #fff; font-weight: 600; white-space: nowrap; }
td.cell summary::-webkit-details-marker { display: none; }
td.cell details[open] > summary { outline: 3px solid #0b62a4; outline-offset: -3px; }
td.cell .evidence { position: fixed; z-index: 10; top: 8vh; left: 50%; transform: translateX(-50%);
  width: min(760px, 92vw); max-height: 80vh; overflow: auto; background: #fff; color: #222;
  border: 1px solid #999; border-radius: 6px; box-shadow: 0 8px 30px rgba(0,0,0,.35); padding: 10px 16px; }
.evidence table { width: 100%; font-size: 12.5px; }
.evidence th { width: 150px; }
.evidence pre { max-height: 220px; overflow: auto; margin: 0; }
.legend span.swatch { display: inline-block; padding: 1px 8px; margin: 2px 6px 2px 0; border-radius: 10px;
  color: #fff; font-weight: 600; }
td.empty { background: #f4f4f4; }
.close { float: right; cursor: pointer; border: 1px solid #ccc; background: #f6f6f6; border-radius: 4px; }
"""

# One evidence panel open at a time; a click outside or Escape closes it,
# and a link to #cell-N (the deviation list) opens that cell. No resource
# is fetched from anywhere.
_SCRIPT = """<script>
(function () {
  function closeAll(except) {
    document.querySelectorAll('#conformance-grid details[open]').forEach(function (d) {
      if (d !== except) d.open = false;
    });
  }
  document.querySelectorAll('#conformance-grid details').forEach(function (d) {
    d.addEventListener('toggle', function () { if (d.open) closeAll(d); });
  });
  document.addEventListener('click', function (e) {
    if (e.target.classList && e.target.classList.contains('close')) { closeAll(null); return; }
    if (!e.target.closest || !e.target.closest('#conformance-grid details')) closeAll(null);
  });
  document.addEventListener('keydown', function (e) { if (e.key === 'Escape') closeAll(null); });
  function openHash() {
    var d = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (d && d.tagName === 'DETAILS') { d.open = true; d.scrollIntoView({block: 'center'}); }
  }
  window.addEventListener('hashchange', openHash);
  openHash();
})();
</script>"""


def _column(cell: dict[str, Any]) -> tuple[str, str]:
    return str(cell.get("level")), str(cell.get("layout")) + ("+dv" if cell.get("dv") else "")


def _column_key(col: tuple[str, str]) -> tuple[int, int, str]:
    level, layout = col
    base = layout.removesuffix("+dv")
    lvl = LEVELS.index(level) if level in LEVELS else 99
    lay = C.LAYOUTS.index(base) if base in C.LAYOUTS else 99
    return lvl, lay, layout


def _op_key(op: str) -> tuple[int, str]:
    return (OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER), op)


def _pre(text: object) -> str:
    return f"<pre>{esc(text)}</pre>" if text not in (None, "") else '<span class="muted">-</span>'


def _txn(label: str, t: dict[str, Any]) -> str:
    parts = [f"<b>{esc(t.get('status', '?'))}</b>"]
    if t.get("cls"):
        parts.append(f"class <code>{esc(t['cls'])}</code>")
    if t.get("version") is not None:
        parts.append(f"committed version {esc(t['version'])}")
    if t.get("read_version") is not None:
        source = f" ({esc(t['read_version_source'])})" if t.get("read_version_source") else ""
        parts.append(f"read version {esc(t['read_version'])}{source}")
    if t.get("scheduled_read_version") not in (None, t.get("read_version")):
        parts.append(f"put on version {esc(t['scheduled_read_version'])} by the schedule")
    raw = f"<details><summary>raw error</summary>{_pre(t['raw'])}</details>" if t.get("raw") else ""
    return f"<tr><th>{esc(label)}</th><td>{', '.join(parts)}{raw}</td></tr>"


def _evidence(cell: dict[str, Any]) -> str:
    obs = cell.get("observation") or {}
    level = str(cell.get("judged_level") or cell.get("level"))
    if level != cell.get("level"):
        level += f" (asked {cell.get('level')}; {obs.get('level_source') or 'from the log'})"
    elif obs.get("level_source"):
        level += f" ({obs['level_source']})"
    expected = f"{esc(cell.get('expected'))} ({esc(cell.get('claim'))}, rule {esc(cell.get('rule'))})"
    if cell.get("allowed_classes"):
        expected += f"; conflict classes allowed: {esc(', '.join(cell['allowed_classes']))}"
    if cell.get("spec_ambiguous"):
        expected += f'<br><span class="muted">spec-ambiguous: {esc(cell["spec_ambiguous"])}</span>'
    checker = obs.get("checker_verdict")
    checker_html = verdict_badge(checker) if checker else '<span class="muted">not run (no committed table)</span>'
    if obs.get("checker_note"):
        checker_html += _pre(obs["checker_note"])
    for a in obs.get("checker_anomalies") or []:
        checker_html += _pre(a)
    rows = [
        ("cell", f"<code>{esc(cell.get('id'))}</code>"),
        ("operations", esc(cell.get("operations"))),
        ("order", f"{esc(cell.get('order'))}: {esc(cell.get('winner'))} commits v0+1, then {esc(cell.get('loser'))}"),
        ("level", esc(level)),
        ("layout", esc(cell.get("layout")) + (" + deletion vectors" if cell.get("dv") else "")),
        ("expected", expected),
        ("observed", f"<b>{esc(cell.get('observed'))}</b>"),
        ("verdict", f'<b style="color:{COLOURS.get(cell.get("verdict", ""), "#333")}">{esc(cell.get("verdict"))}</b>'),
        ("why", _pre(cell.get("why"))),
        ("checker", checker_html),
    ]
    if obs.get("retry"):
        rows.append(("retry", _pre("\n".join(obs["retry"]))))
    elif obs.get("loser_engine_log"):
        rows.append(("loser's engine log", _pre("\n".join(obs["loser_engine_log"]))))
    if obs.get("data_violation"):
        rows.append(("data", _pre(obs["data_violation"])))
    if not obs.get("controlled", True) or obs.get("control_note"):
        took = "taken effect" if obs.get("controlled") else "NOT taken effect"
        rows.append(("control", took + _pre(obs.get("control_note"))))
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in rows)
    body += _txn("winner", obs.get("winner") or {}) + _txn("loser", obs.get("loser") or {})
    if obs.get("seconds"):
        body += f"<tr><th>seconds</th><td>{float(obs['seconds']):.2f}</td></tr>"
    return f'<div class="evidence"><button class="close" type="button">close</button><table>{body}</table></div>'


def _grid(cells: list[dict[str, Any]]) -> str:
    columns = sorted({_column(c) for c in cells}, key=_column_key)
    by_row: dict[tuple[str, str], dict[tuple[str, str], tuple[int, dict[str, Any]]]] = {}
    for n, c in enumerate(cells):
        by_row.setdefault((str(c.get("winner")), str(c.get("loser"))), {})[_column(c)] = (n, c)
    levels = Counter(level for level, _ in columns)
    head = '<tr><th rowspan="2">winner &gt; loser</th>' + "".join(
        f'<th class="col" colspan="{n}">{esc(level)}</th>' for level, n in levels.items()
    )
    head += "</tr><tr>" + "".join(f'<th class="col">{esc(layout)}</th>' for _, layout in columns) + "</tr>"
    rows = []
    for pair in sorted(by_row, key=lambda p: (_op_key(p[0]), _op_key(p[1]))):
        tds = []
        for col in columns:
            hit = by_row[pair].get(col)
            if hit is None:
                tds.append('<td class="empty"></td>')
                continue
            n, c = hit
            verdict = str(c.get("verdict"))
            colour = COLOURS.get(verdict, "#888")
            tip = f"{c.get('id')}: {verdict} (expected {c.get('expected')}, observed {c.get('observed')})"
            tds.append(
                f'<td class="cell v-{esc(verdict)}" style="background:{colour}" title="{esc(tip)}">'
                f'<details id="cell-{n}"><summary>{esc(c.get("claim"))} {esc(SHORT.get(verdict, verdict))}</summary>'
                f"{_evidence(c)}</details></td>"
            )
        rows.append(f'<tr><th class="row">{esc(pair[0])} &gt; {esc(pair[1])}</th>{"".join(tds)}</tr>')
    return f'<table id="conformance-grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def _claims_table(cells: list[dict[str, Any]]) -> str:
    per: dict[str, Counter[str]] = {}
    for c in cells:
        per.setdefault(str(c.get("claim")), Counter())[str(c.get("verdict"))] += 1
    shown = [v for v in VERDICTS if any(n[v] for n in per.values())]

    def key(claim: str) -> tuple[str, int]:
        return claim[:1], int(claim[1:]) if claim[1:].isdigit() else 0

    head = "<tr><th>claim</th><th>cells</th>" + "".join(f"<th>{esc(v)}</th>" for v in shown) + "</tr>"
    rows = [
        f"<tr><td>{esc(claim)}</td><td>{sum(per[claim].values())}</td>"
        + "".join(f"<td>{per[claim][v] or ''}</td>" for v in shown)
        + "</tr>"
        for claim in sorted(per, key=key)
    ]
    return f'<table class="claims">{head}{"".join(rows)}</table>'


def _deviations(cells: list[dict[str, Any]]) -> str:
    items = [
        f'<li><a href="#cell-{n}"><code>{esc(c.get("id"))}</code></a> '
        f'<b style="color:{COLOURS.get(str(c.get("verdict")), "#333")}">{esc(c.get("verdict"))}</b> '
        f"({esc(c.get('claim'))}): {esc(str(c.get('why') or '')[:300])}</li>"
        for n, c in enumerate(cells)
        if c.get("verdict") not in PASSES
    ]
    return f"<ul>{''.join(items)}</ul>" if items else "<p>none</p>"


def render_html(doc: dict[str, Any]) -> str:
    """The page for a conformance.json document."""
    cells = list(doc.get("cells") or [])
    engine = str(doc.get("engine", "?"))
    versions = ", ".join(f"{k} {v}" for k, v in (doc.get("versions") or {}).items())
    counts = Counter(str(c.get("verdict")) for c in cells)
    legend = "".join(
        f'<span class="swatch" style="background:{COLOURS[v]}">{esc(v)} {counts[v]}</span>' for v in VERDICTS
    )
    seconds = float(doc.get("seconds") or 0)
    body = (
        f"<header><h1>Conformance matrix: {esc(engine)}</h1>"
        f'<div class="muted">{esc(versions)} &middot; {len(cells)} cells in {seconds:.0f} s</div>'
        "</header><main>"
        f'<section class="legend"><h2>Verdicts</h2>{legend}'
        '<p class="muted">Rows: the op that commits first (winner) &gt; the op that read the same version and '
        "commits second (loser). Columns: the isolation level the cell asked for, and the layout. Each cell "
        "shows its spec claim; click it for the evidence.</p></section>"
        f"<section><h2>Cells</h2>{_grid(cells)}</section>"
        f"<section><h2>By claim</h2>{_claims_table(cells)}</section>"
        f"<section><h2>Cells that do not conform</h2>{_deviations(cells)}</section>"
        f"</main>{_SCRIPT}"
    )
    return page(f"Conformance matrix: {engine}", body, _CSS)
