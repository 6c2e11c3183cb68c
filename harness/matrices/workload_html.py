"""matrix.html: the workload matrix as one self-contained page.

Rows are workloads, columns engine x isolation level; each cell is
coloured by its run's verdict, shows ops (ok / fail / info), ops/s, the
conflict rate and the anomaly kinds found, and links to its run folder's
report.html and summary.txt (relative links, so the matrix folder can be
moved or served as a whole). Built from matrix.json's cells.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

from harness.check.html import VERDICT_COLOURS, esc, page

__all__ = ["COLOURS", "render_html"]

COLOURS = {
    "VALID": VERDICT_COLOURS["valid"],
    "INVALID": VERDICT_COLOURS["invalid"],
    "UNKNOWN": VERDICT_COLOURS["unknown"],
    # The harness did not get a verdict: never a colour a verdict has.
    "ERROR": "#555555",
    "HUNG": "#555555",
    "SKIPPED": "#b8b8b8",
}

_CSS = """
#matrix-grid td.cell { color: #fff; min-width: 170px; font-size: 12.5px; }
#matrix-grid td.cell .verdict { font-weight: 700; font-size: 14px; }
#matrix-grid td.cell a { color: #fff; text-decoration: underline; }
#matrix-grid td.cell .kinds { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 11.5px; }
#matrix-grid th.col { text-align: center; }
#matrix-grid td.empty { background: #f4f4f4; }
.legend span.swatch { display: inline-block; padding: 1px 8px; margin: 2px 6px 2px 0; border-radius: 10px;
  color: #fff; font-weight: 600; }
"""


def _link(run_dir: str | None, root: Path, name: str) -> str:
    if not run_dir:
        return ""
    rel = Path(os.path.relpath(Path(run_dir) / name, root)).as_posix()
    return f'<a href="{esc(rel)}">{esc(name)}</a>'


def _cell(c: dict[str, Any], root: Path) -> str:
    verdict = str(c.get("verdict", "?"))
    colour = COLOURS.get(verdict, "#888888")
    lines = [f'<div class="verdict">{esc(verdict)}</div>']
    if c.get("note"):
        lines.append(f"<div>{esc(c['note'])}</div>")
    if c.get("ops") is not None:
        lines.append(
            f"<div>ops {esc(c['ops'])} ({esc(c.get('ok', 0))} ok / {esc(c.get('fail', 0))} fail / "
            f"{esc(c.get('info', 0))} info)</div>"
        )
    rate = c.get("ops_per_s")
    conflicts = c.get("conflict_rate")
    figures = [f"{rate:.1f} ops/s" if isinstance(rate, (int, float)) else "n/a ops/s"]
    if isinstance(conflicts, (int, float)):
        figures.append(f"conflicts {100 * conflicts:.1f}%")
    lines.append(f"<div>{esc(', '.join(figures))}</div>")
    if c.get("supported") not in (None, "yes", "?"):
        lines.append(f"<div>supported: {esc(c['supported'])}</div>")
    kinds = c.get("anomalies") or []
    lines.append(f'<div class="kinds">{esc(", ".join(kinds)) if kinds else "no anomalies"}</div>')
    links = " &middot; ".join(filter(None, (_link(c.get("run_dir"), root, n) for n in ("report.html", "summary.txt"))))
    if links:
        lines.append(f"<div>{links}</div>")
    tip = f"{c.get('workload')} / {c.get('engine')} / {c.get('isolation')}: {verdict}"
    attrs = f'class="cell v-{esc(verdict.lower())}" style="background:{colour}" title="{esc(tip)}"'
    return f"<td {attrs}>{''.join(lines)}</td>"


def _column(c: dict[str, Any]) -> str:
    """The engine, and the faults it ran under (as Cell.column)."""
    return f"{c.get('engine')} under {c['nemesis']}" if c.get("nemesis") else str(c.get("engine"))


def _grid(cells: list[dict[str, Any]], root: Path) -> str:
    workloads = list(dict.fromkeys(str(c.get("workload")) for c in cells))
    engines = list(dict.fromkeys(_column(c) for c in cells))
    levels = list(dict.fromkeys(str(c.get("isolation")) for c in cells))
    at = {(str(c.get("workload")), _column(c), str(c.get("isolation"))): c for c in cells}
    head = '<tr><th rowspan="2">workload</th>' + "".join(
        f'<th class="col" colspan="{len(levels)}">{esc(e)}</th>' for e in engines
    )
    head += "</tr><tr>" + "".join(f'<th class="col">{esc(lvl)}</th>' for _ in engines for lvl in levels) + "</tr>"
    rows = []
    for w in workloads:
        tds = [
            _cell(at[(w, e, lvl)], root) if (w, e, lvl) in at else '<td class="empty"></td>'
            for e in engines
            for lvl in levels
        ]
        rows.append(f"<tr><th>{esc(w)}</th>{''.join(tds)}</tr>")
    return f'<table id="matrix-grid"><thead>{head}</thead><tbody>{"".join(rows)}</tbody></table>'


def render_html(cells: list[dict[str, Any]], root: Path, setup: str, seconds: float | None = None) -> str:
    """The page for matrix.json's cells; `root` is the matrix folder the
    page is written into (links are relative to it), `setup` one line on
    how each cell ran."""
    counts = Counter(str(c.get("verdict")) for c in cells)
    legend = "".join(
        f'<span class="swatch" style="background:{COLOURS.get(v, "#888888")}">{esc(v)} {n}</span>'
        for v, n in sorted(counts.items())
    )
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    body = (
        "<header><h1>Workload matrix</h1>"
        f'<div class="muted">{len(cells)} cells{esc(took)} &middot; {esc(setup)}</div></header><main>'
        f'<section class="legend"><h2>Verdicts</h2>{legend}'
        '<p class="muted">Each cell is one <code>delta-jepsen run</code>; its report and summary are in its '
        "run folder, which also holds the command that re-runs it.</p></section>"
        f"<section><h2>Cells</h2>{_grid(cells, root)}</section></main>"
    )
    return page("Workload matrix", body, _CSS)
