"""Two releases of an engine side by side: what the candidate breaks that
the baseline kept (regressions), what it mends (fixes), and what stayed.

The input is what `conformance` and `matrix` store (conformance.json,
matrix.json), one folder per release; `qualify` runs both, `compare` reads
two stored folders. A row is a conformance cell or a workload run (workload,
faults, isolation level), with each side's verdict, its explanation and the
command that reproduces it. Output: qualify.md, qualify.json, qualify.html.

A conformance cell regresses when the candidate's verdict is more severe
(conforms < wrong exception class < availability < safety); a workload row
when the candidate's run shows an anomaly kind the baseline's did not. Exit
1 on a regression in safety (a safety deviation, or any anomaly of a run:
every checker of a run judges a guarantee), 3 where a row could not be
judged on a side (and no safety regression), 0 otherwise.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.check import junit
from harness.check.html import VERDICT_COLOURS, esc, page
from harness.core.errors import HarnessError
from harness.matrices.conformance.verdict import (
    AVAILABILITY,
    CONFORMS,
    EXCEPTION_CLASS,
    PASSES,
    RETRIED,
    SAFETY,
    V_UNSUPPORTED,
)

REGRESSION, FIX, UNJUDGED, SUPPORT, UNCHANGED = "regression", "fix", "not judged", "support changed", "unchanged"
ORDER = (REGRESSION, FIX, UNJUDGED, SUPPORT, UNCHANGED)
_SEVERITY = {CONFORMS: 0, RETRIED: 0, EXCEPTION_CLASS: 1, AVAILABILITY: 2, SAFETY: 3}


@dataclass
class Side:
    verdict: str
    explanation: str = ""
    kinds: list[str] = field(default_factory=list)
    reproduce: str = ""
    link: str = ""  # the run's or the conformance page, relative to the output folder


@dataclass
class Row:
    part: str  # conformance | workload
    key: str
    claim: str
    baseline: Side
    candidate: Side
    change: str = UNCHANGED
    safety: bool = False  # a regression in safety
    what: str = ""


# -- stored folders ----------------------------------------------------------------------


@dataclass
class Stored:
    """One release's stored results: a conformance folder, a matrix folder,
    or a qualify side holding both (conformance/ and matrix/)."""

    path: Path
    engine: str = ""
    conformance: dict[str, Any] | None = None
    conformance_dir: Path | None = None
    matrix: list[dict[str, Any]] | None = None

    @classmethod
    def load(cls, path: Path) -> Stored:
        if not path.is_dir():
            raise HarnessError(f"{path}: no such folder")
        out = cls(path)
        for d in (path, path / "conformance"):
            f = d / "conformance.json"
            if f.is_file():
                out.conformance, out.conformance_dir = _json(f), d
                out.engine = str(out.conformance.get("engine", ""))
        for d in (path, path / "matrix"):
            f = d / "matrix.json"
            if f.is_file():
                cells = _json(f)
                if not isinstance(cells, list):
                    raise HarnessError(f"{f}: not a workload matrix (a list of cells)")
                out.matrix = cells
                out.engine = out.engine or next((str(c.get("engine")) for c in cells), "")
        if out.conformance is None and out.matrix is None:
            raise HarnessError(f"{path}: neither conformance.json nor matrix.json (a conformance or matrix folder)")
        return out


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"{path}: not readable JSON ({e})") from None


# -- rows --------------------------------------------------------------------------------


def _conformance_side(cell: dict[str, Any] | None, folder: Path | None, out: Path) -> Side:
    if cell is None:
        return Side("absent", "the cell is not in this matrix")
    verdict = str(cell.get("verdict"))
    text = f"expected {cell.get('expected')}, observed {cell.get('observed')}"
    if cell.get("why"):
        text += f"; {cell['why']}"
    repro = (
        f"delta-jepsen reproduce {folder} --cell '{cell.get('id')}'"
        if folder and verdict not in _NOTHING_TO_REPRODUCE
        else ""
    )
    link = _rel(folder / "conformance.html", out) if folder else ""
    return Side(verdict, text, [], repro, link)


_NOTHING_TO_REPRODUCE = (*PASSES, V_UNSUPPORTED)


def compare_conformance(a: Stored, b: Stored, out: Path) -> list[Row]:
    if a.conformance is None or b.conformance is None:
        return []
    cells_a = {str(c["id"]): c for c in a.conformance.get("cells", [])}
    cells_b = {str(c["id"]): c for c in b.conformance.get("cells", [])}
    rows = []
    for cid in list(dict.fromkeys([*cells_a, *cells_b])):
        ca, cb = cells_a.get(cid), cells_b.get(cid)
        row = Row(
            "conformance",
            cid,
            str((ca or cb or {}).get("claim", "")),
            _conformance_side(ca, a.conformance_dir, out),
            _conformance_side(cb, b.conformance_dir, out),
        )
        va, vb = row.baseline.verdict, row.candidate.verdict
        if va == vb or (va in PASSES and vb in PASSES):
            row.change = UNCHANGED
        elif V_UNSUPPORTED in (va, vb) or "absent" in (va, vb):
            row.change = SUPPORT
            row.what = f"{va} -> {vb}"
        elif va not in _SEVERITY or vb not in _SEVERITY:
            row.change = UNJUDGED
            row.what = f"{va} -> {vb}"
        elif _SEVERITY[vb] > _SEVERITY[va]:
            row.change, row.safety = REGRESSION, vb == SAFETY
            row.what = f"{va} -> {vb}"
        elif _SEVERITY[vb] < _SEVERITY[va]:
            row.change, row.what = FIX, f"{va} -> {vb}"
        rows.append(row)
    return rows


def _workload_key(c: dict[str, Any]) -> str:
    name = str(c.get("engine", "")).partition("==")[0]
    faults = f" under {c['nemesis']}" if c.get("nemesis") else ""
    return f"{c.get('workload')} on {name}{faults}, {c.get('isolation')}"


def _first_anomaly(run_dir: str | None) -> str:
    if not run_dir:
        return ""
    try:
        doc = json.loads((Path(run_dir) / "results.json").read_text())
    except (OSError, ValueError):
        return ""
    for c in doc.get("checkers", []):
        for a in c.get("anomalies", []):
            return f"{c['checker']}: {a.get('explanation', '')}"[:600]
    return ""


def _workload_side(c: dict[str, Any] | None, out: Path) -> Side:
    if c is None:
        return Side("absent", "the workload did not run on this side")
    verdict = str(c.get("verdict"))
    kinds = sorted(str(k) for k in c.get("anomalies", []))
    parts = [f"supported: {c.get('supported')}"]
    if c.get("note"):
        parts.append(str(c["note"]))
    first = _first_anomaly(c.get("run_dir"))
    if first:
        parts.append(f"first anomaly: {first}")
    repro = ""
    if verdict == "INVALID" and c.get("run_dir"):
        repro = f"delta-jepsen reproduce {c['run_dir']}   (re-run: {c.get('repro')})"
    elif c.get("repro"):
        repro = str(c["repro"])
    link = _rel(Path(c["run_dir"]) / "report.html", out) if c.get("run_dir") else ""
    return Side(verdict, "; ".join(parts), kinds, repro, link)


def compare_workloads(a: Stored, b: Stored, out: Path) -> list[Row]:
    if a.matrix is None or b.matrix is None:
        return []
    cells_a = {_workload_key(c): c for c in a.matrix}
    cells_b = {_workload_key(c): c for c in b.matrix}
    rows = []
    for key in list(dict.fromkeys([*cells_a, *cells_b])):
        ca, cb = cells_a.get(key), cells_b.get(key)
        row = Row("workload", key, "", _workload_side(ca, out), _workload_side(cb, out))
        sa, sb = (str((c or {}).get("supported", "")) for c in (ca, cb))
        va, vb = row.baseline.verdict, row.candidate.verdict
        new = sorted(set(row.candidate.kinds) - set(row.baseline.kinds))
        gone = sorted(set(row.baseline.kinds) - set(row.candidate.kinds))
        if "absent" in (va, vb) or sa.startswith("no") != sb.startswith("no"):
            row.change, row.what = SUPPORT, f"supported: {sa or '-'} -> {sb or '-'}"
        elif sa.startswith("no") and sb.startswith("no"):
            row.change = UNCHANGED
        elif va not in ("VALID", "INVALID") or vb not in ("VALID", "INVALID"):
            row.change, row.what = UNJUDGED, f"{va} -> {vb}"
        elif new:
            row.change, row.safety = REGRESSION, True
            row.what = "the candidate shows " + ", ".join(new) + (f"; gone: {', '.join(gone)}" if gone else "")
        elif gone:
            row.change, row.what = FIX, "gone in the candidate: " + ", ".join(gone)
        rows.append(row)
    return rows


def compare(a: Stored, b: Stored, out: Path) -> list[Row]:
    """Every row, regressions first, then fixes, rows not judged, support
    changes, and the unchanged."""
    rows = compare_conformance(a, b, out) + compare_workloads(a, b, out)
    if not rows:
        raise HarnessError(f"{a.path} and {b.path} share no kind of results (both conformance, or both matrix)")
    return sorted(rows, key=lambda r: (ORDER.index(r.change), not r.safety, r.part, r.key))


def exit_code(rows: list[Row]) -> int:
    if any(r.change == REGRESSION and r.safety for r in rows):
        return 1
    if any(r.change == UNJUDGED for r in rows):
        return 3
    return 0


def _rel(path: Path, out: Path) -> str:
    return Path(os.path.relpath(path, out)).as_posix()


# -- pages -------------------------------------------------------------------------------


def counts(rows: list[Row]) -> dict[str, int]:
    return {c: sum(1 for r in rows if r.change == c) for c in ORDER}


def render_markdown(rows: list[Row], meta: dict[str, Any]) -> str:
    n = counts(rows)
    safety = sum(1 for r in rows if r.change == REGRESSION and r.safety)
    lines = [
        f"# {meta['title']}",
        "",
        f"Baseline {meta['baseline']} ({meta['baseline_dir']}), candidate {meta['candidate']} "
        f"({meta['candidate_dir']}).",
        "",
        f"{len(rows)} rows: {n[REGRESSION]} regression(s) ({safety} in safety), {n[FIX]} fix(es), "
        f"{n[UNJUDGED]} not judged on a side, {n[SUPPORT]} support change(s), {n[UNCHANGED]} unchanged."
        + (f" Wall time {meta['seconds']:.0f} s." if meta.get("seconds") else ""),
        "",
    ]
    if meta.get("scope"):
        lines += [f"Ran on each side: {meta['scope']}.", ""]
    for change in ORDER:
        group = [r for r in rows if r.change == change]
        if not group:
            continue
        lines += [f"## {change.capitalize()} ({len(group)})", ""]
        if change in (REGRESSION, FIX, UNJUDGED):
            for r in group:
                lines += [
                    f"### {r.part}: {r.key}" + (f" ({r.claim})" if r.claim else "") + (" — safety" if r.safety else ""),
                    "",
                    f"- change: {r.what}",
                    f"- baseline {meta['baseline']}: **{r.baseline.verdict}**. {r.baseline.explanation}",
                    f"- candidate {meta['candidate']}: **{r.candidate.verdict}**. {r.candidate.explanation}",
                ]
                for label, side in (("baseline", r.baseline), ("candidate", r.candidate)):
                    if side.reproduce:
                        lines.append(f"- reproduce ({label}): `{side.reproduce}`")
                lines.append("")
        else:
            lines += ["| part | row | baseline | candidate |", "|---|---|---|---|"]
            lines += [f"| {r.part} | {r.key} | {r.baseline.verdict} | {r.candidate.verdict} |" for r in group]
            lines.append("")
    return "\n".join(lines)


_CSS = """
table.qualify td.verdict { color: #fff; font-weight: 600; white-space: nowrap; }
table.qualify td.expl { font-size: 12.5px; max-width: 520px; }
table.qualify code { font-size: 11.5px; }
tr.regression th { background: #fde8e8; }
tr.fix th { background: #e6f4ea; }
"""

_COLOURS = {
    "VALID": VERDICT_COLOURS["valid"],
    "INVALID": VERDICT_COLOURS["invalid"],
    "UNKNOWN": VERDICT_COLOURS["unknown"],
    CONFORMS: VERDICT_COLOURS["valid"],
    RETRIED: VERDICT_COLOURS["valid"],
    SAFETY: VERDICT_COLOURS["invalid"],
    AVAILABILITY: "#d9822b",
    EXCEPTION_CLASS: "#b59a00",
}


def _side_td(side: Side) -> str:
    colour = _COLOURS.get(side.verdict, "#888888")
    link = f' <a style="color:#fff" href="{esc(side.link)}">page</a>' if side.link else ""
    repro = f"<div><code>{esc(side.reproduce)}</code></div>" if side.reproduce else ""
    return (
        f'<td class="verdict" style="background:{colour}">{esc(side.verdict)}{link}</td>'
        f'<td class="expl">{esc(side.explanation)}{repro}</td>'
    )


def render_html(rows: list[Row], meta: dict[str, Any]) -> str:
    n = counts(rows)
    summary = ", ".join(f"{esc(c)} {n[c]}" for c in ORDER)
    sections = []
    for change in ORDER:
        group = [r for r in rows if r.change == change]
        if not group:
            continue
        body = "".join(
            f'<tr class="{esc(change.split()[0])}"><th>{esc(r.part)}<br>{esc(r.key)}'
            + (f"<br>{esc(r.claim)}" if r.claim else "")
            + (" <b>safety</b>" if r.safety else "")
            + f'</th><td class="expl">{esc(r.what)}</td>{_side_td(r.baseline)}{_side_td(r.candidate)}</tr>'
            for r in group
        )
        sections.append(
            f'<section id="{esc(change.replace(" ", "-"))}"><h2>{esc(change.capitalize())} ({len(group)})</h2>'
            f'<table class="qualify"><thead><tr><th>row</th><th>change</th>'
            f'<th colspan="2">baseline {esc(meta["baseline"])}</th><th colspan="2">candidate {esc(meta["candidate"])}'
            f"</th></tr></thead><tbody>{body}</tbody></table></section>"
        )
    took = f" &middot; wall time {meta['seconds']:.0f} s" if meta.get("seconds") else ""
    html_body = (
        f"<header><h1>{esc(meta['title'])}</h1>"
        f'<div class="muted">{len(rows)} rows: {summary}{took}</div>'
        + (f'<div class="muted">Ran on each side: {esc(meta["scope"])}.</div>' if meta.get("scope") else "")
        + f"</header><main>{''.join(sections)}</main>"
    )
    return page(str(meta["title"]), html_body, _CSS)


def write_pages(out: Path, rows: list[Row], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc = {**meta, "counts": counts(rows), "exit_code": exit_code(rows), "rows": [asdict(r) for r in rows]}
    (out / "qualify.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    (out / "qualify.md").write_text(render_markdown(rows, meta))
    (out / "qualify.html").write_text(render_html(rows, meta))


def compare_dirs(
    a: Path,
    b: Path,
    out: Path,
    title: str | None = None,
    seconds: float | None = None,
    rec: junit.Recorder | None = None,
    scope: str | None = None,
) -> int:
    """Compare two stored folders into `out`; the exit code. `scope`: what
    both sides ran, said at the top of the pages."""
    sa, sb = Stored.load(a), Stored.load(b)
    rows = compare(sa, sb, out)
    meta = {
        "title": title or f"{sa.engine or a} vs {sb.engine or b}",
        "baseline": sa.engine or str(a),
        "candidate": sb.engine or str(b),
        "baseline_dir": str(a),
        "candidate_dir": str(b),
        "seconds": seconds,
        "scope": scope,
    }
    write_pages(out, rows, meta)
    if rec is not None:
        rec.suites.append(junit_suite(rows, meta))
    n = counts(rows)
    print(
        f"{meta['title']}: {len(rows)} rows: "
        + ", ".join(f"{c} {n[c]}" for c in ORDER if n[c])
        + f"\nreport: {out / 'qualify.md'} (and qualify.html, qualify.json)"
    )
    for r in rows:
        if r.change == REGRESSION:
            print(f"  regression{' (safety)' if r.safety else ''}: {r.part} {r.key}: {r.what}")
    return exit_code(rows)


def junit_suite(rows: list[Row], meta: dict[str, Any]) -> junit.Suite:
    """One testcase per row: a safety regression fails, a row not judged on
    a side is skipped, the rest pass (a regression in availability or
    exception class passes, its change in the output)."""
    suite = junit.Suite("delta-jepsen.qualify", time=float(meta.get("seconds") or 0.0))
    for r in rows:
        case = junit.Case(r.key, f"delta-jepsen.qualify.{r.part}")
        evidence = "\n".join(
            [
                f"change: {r.change}" + (f" ({r.what})" if r.what else ""),
                f"baseline {meta['baseline']}: {r.baseline.verdict}. {r.baseline.explanation}",
                f"candidate {meta['candidate']}: {r.candidate.verdict}. {r.candidate.explanation}",
                *(f"reproduce: {s.reproduce}" for s in (r.baseline, r.candidate) if s.reproduce),
            ]
        )
        if r.change == REGRESSION and r.safety:
            case.outcome, case.type, case.message, case.text = junit.FAILURE, "regression", r.what, evidence
        elif r.change == UNJUDGED:
            case.outcome, case.message, case.text = junit.SKIPPED, f"not judged: {r.what}", evidence
        else:
            case.system_out = evidence
        suite.cases.append(case)
    return suite
