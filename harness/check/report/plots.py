"""The report's pictures, drawn by matplotlib as inline SVG: the timeline of
ops per process, latency and throughput over time, and the conflict rate.

Every builder takes the history already reduced to :class:`Span` (one per
op) and :class:`Fault` (one per nemesis interval), so tests can feed them
small synthetic lists, and returns an ``<svg>`` element as text.

matplotlib is imported on first use: importing the check pipeline (which
imports this module) must stay cheap for commands that never draw.
"""

from __future__ import annotations

import io
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.check.html import VERDICT_COLOURS
from harness.core.history import COMPLETIONS, ErrorClass, History

__all__ = [
    "MAX_LATENCY_POINTS",
    "MAX_TIMELINE_BARS",
    "MAX_VERSION_MARKS",
    "Fault",
    "Span",
    "conflict_rate_svg",
    "faults_of",
    "latency_svg",
    "spans_of",
    "throughput_svg",
    "timeline_svg",
]

# Beyond these the SVG grows past what a browser draws smoothly (each bar is
# a path with its own tooltip); the page says how many were left out.
MAX_TIMELINE_BARS = 6000
MAX_LATENCY_POINTS = 20000
MAX_VERSION_MARKS = 1000
_TOOLTIP_VALUE_CHARS = 160

OUTCOMES = ("ok", "fail", "info")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">", "h", "p")
# Nemesis kinds get colours apart from the outcomes' green/red/amber.
_FAULT_COLOURS = ("#7b68ee", "#20b2aa", "#ff69b4", "#8b4513", "#4682b4", "#9acd32", "#708090", "#daa520")
_SVG_NS = "http://www.w3.org/2000/svg"


@dataclass(frozen=True, slots=True)  # one per op: a long run has hundreds of thousands
class Span:
    """One client op: invoke to completion, in seconds since the run began."""

    process: int | str
    id: str
    f: str
    type: str  # ok / fail / info
    start: float
    end: float | None  # None: never completed (may still have applied)
    version: int | None = None
    value: Any = None
    error_class: str | None = None
    error_raw: str | None = None

    @property
    def latency(self) -> float | None:
        return None if self.end is None else self.end - self.start

    @property
    def is_conflict(self) -> bool:
        if self.error_class is None:
            return False
        try:
            return ErrorClass(self.error_class).is_conflict
        except ValueError:
            return False

    @property
    def commits(self) -> bool:
        """Whether `version` is a version this op committed (a read's is the one it read)."""
        return self.type == "ok" and self.version is not None and not self.f.startswith("read")


@dataclass(frozen=True)
class Fault:
    """A nemesis interval: from its start-<kind> op to its stop-<kind> (or heal)."""

    kind: str
    start: float
    end: float
    stopped: bool = True
    detail: str = ""


def spans_of(history: History) -> list[Span]:
    out = []
    for op in history.client_ops():
        err = op.error
        out.append(
            Span(
                process=op.process,
                id=op.id,
                f=op.f,
                type=op.type,
                start=op.start / 1e9,
                end=None if op.end is None else op.end / 1e9,
                version=op.version,
                value=op.value,
                error_class=err.cls.value if err else None,
                error_raw=err.raw if err else None,
            )
        )
    return out


def faults_of(history: History) -> list[Fault]:
    """Pairs each applied start-<kind> with the next stop-<kind> or heal; a
    fault never stopped lasts to the end of the history."""
    end = history.events[-1].time / 1e9 if history.events else 0.0
    open_: dict[str, list[tuple[float, str]]] = {}
    out: list[Fault] = []
    for op in history.ops():
        if op.process != "nemesis" or op.type != "ok" or op.completion is None:
            continue
        t = op.completion.time / 1e9
        if op.f.startswith("start-"):
            kind = op.f[len("start-") :]
            open_.setdefault(kind, []).append((t, _short(op.value, 120)))
        elif op.f.startswith("stop-"):
            kind = op.f[len("stop-") :]
            if open_.get(kind):
                s, detail = open_[kind].pop(0)
                out.append(Fault(kind, s, t, True, detail))
        elif op.f == "heal":
            for kind, starts in open_.items():
                out += [Fault(kind, s, t, True, detail) for s, detail in starts]
            open_ = {}
    for kind, starts in open_.items():
        out += [Fault(kind, s, max(end, s), False, detail) for s, detail in starts]
    return sorted(out, key=lambda f: f.start)


def _short(value: Any, n: int) -> str:
    s = value if isinstance(value, str) else _json(value)
    return s if len(s) <= n else s[: n - 1] + "\u2026"


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def tooltip(s: Span) -> str:
    lat = f"{1000 * s.latency:.1f} ms" if s.latency is not None else "never completed"
    lines = [f"op {s.id}  process {s.process}  {s.f}  {s.type.upper()}  ({lat})"]
    lines.append(f"t = {s.start:.3f} s" + (f" .. {s.end:.3f} s" if s.end is not None else ""))
    if s.version is not None:
        lines.append(("committed" if s.commits else "version") + f" v{s.version}")
    if s.value is not None:
        lines.append("value " + _short(s.value, _TOOLTIP_VALUE_CHARS))
    if s.error_class:
        lines.append(f"error {s.error_class}: {_short(s.error_raw or '', _TOOLTIP_VALUE_CHARS)}")
    return "\n".join(lines)


# -- matplotlib plumbing -------------------------------------------------------


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    FigureCanvasSVG(fig)
    return fig


def _axes(fig: Any, left: float = 1.0, right: float = 1.9, top: float = 0.35, bottom: float = 0.6) -> Any:
    """Axes with fixed margins in inches (the legend sits in the right one).
    A layout engine would draw every figure twice to measure it: double the
    time for a few thousand bars, for margins that never change."""
    w, h = fig.get_size_inches()
    ax = fig.add_subplot()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h)
    return ax


def _svg(fig: Any, salt: str, titles: dict[str, Sequence[str]] | None = None) -> str:
    """The figure as an <svg> element. `salt` keeps matplotlib's generated ids
    (clip paths, markers) apart between the several plots of one page;
    `titles` gives the children of the element with that gid a <title>
    each, in order: the browser shows it on hover."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    if titles:
        text = _add_titles(text, titles)
    return text[text.index("<svg") :]


def _add_titles(text: str, titles: dict[str, Sequence[str]]) -> str:
    ET.register_namespace("", _SVG_NS)
    ET.register_namespace("xlink", "http://www.w3.org/1999/xlink")
    root = ET.fromstring(text)
    for el in root.iter(f"{{{_SVG_NS}}}g"):
        gid = el.get("id")
        if gid not in titles:
            continue
        items = [c for c in el if c.tag != f"{{{_SVG_NS}}}defs"]
        if len(items) != len(titles[gid]):
            continue  # not the one-element-per-item layout: no tooltips rather than wrong ones
        for child, title in zip(items, titles[gid], strict=True):
            ET.SubElement(child, f"{{{_SVG_NS}}}title").text = title
    return ET.tostring(root, encoding="unicode")


def _fault_colours(faults: Sequence[Fault]) -> dict[str, str]:
    kinds = sorted({f.kind for f in faults})
    return {k: _FAULT_COLOURS[i % len(_FAULT_COLOURS)] for i, k in enumerate(kinds)}


def _shade(ax: Any, faults: Sequence[Fault]) -> list[Any]:
    """Fault intervals as bands across the whole axes; legend handles, one per kind."""
    from matplotlib.patches import Patch

    colours = _fault_colours(faults)
    for f in faults:
        ax.axvspan(f.start, f.end, color=colours[f.kind], alpha=0.13, lw=0, zorder=0)
    return [Patch(color=c, alpha=0.35, label=f"nemesis: {k}") for k, c in colours.items()]


def _time_range(spans: Sequence[Span], faults: Sequence[Fault]) -> tuple[float, float]:
    ts = [s.start for s in spans] + [s.end for s in spans if s.end is not None]
    ts += [f.start for f in faults] + [f.end for f in faults]
    if not ts:
        return 0.0, 1.0
    lo, hi = min(ts), max(ts)
    return lo, hi if hi > lo else lo + 1.0


def _empty(fig: Any, salt: str, message: str) -> str:
    ax = fig.add_subplot()
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="#777")
    ax.set_axis_off()
    return _svg(fig, salt)


def _lane_order(spans: Sequence[Span]) -> list[int | str]:
    return sorted(
        {s.process for s in spans}, key=lambda p: (not isinstance(p, int), str(p) if not isinstance(p, int) else p)
    )


# -- the plots -----------------------------------------------------------------


def timeline_svg(
    spans: Sequence[Span],
    faults: Sequence[Fault],
    max_bars: int = MAX_TIMELINE_BARS,
    highlight: frozenset[str] = frozenset(),
    window: tuple[float, float] | None = None,
    salt: str = "timeline",
) -> tuple[str, str]:
    """One lane per process, a bar per op from invoke to completion, coloured
    by outcome, with a tooltip per bar; committed versions on a lane of their
    own above; nemesis intervals shaded across every lane; the ops named in
    `highlight` (an anomaly's) outlined. Returns the SVG and a note ("" unless
    bars were left out). With `window` (from, to in seconds), only the ops
    that overlap it, drawn to its scale."""
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    if window is not None:
        spans = [s for s in spans if s.start <= window[1] and (s.end is None or s.end >= window[0])]
        faults = [f for f in faults if f.start <= window[1] and f.end >= window[0]]
    spans = sorted(spans, key=lambda s: s.start)
    note = ""
    if len(spans) > max_bars:
        note = (
            f"The first {max_bars} of {len(spans)} ops are drawn (to t = {spans[max_bars - 1].start:.1f} s)"
            + (", and every op an anomaly names" if highlight else "")
            + "; the latency and throughput plots below cover all of them."
        )
        spans = spans[:max_bars] + [s for s in spans[max_bars:] if s.id in highlight]
    lanes = _lane_order(spans)
    height = min(22.0, 1.6 + 0.3 * (len(lanes) + 1))
    fig = _figure(14, max(3.0, height))
    if not spans:
        return _empty(fig, salt, "no client ops in the history"), note
    lo, hi = window if window is not None else _time_range(spans, faults)
    ax = _axes(fig, left=1.1)
    row = {p: i + 1 for i, p in enumerate(lanes)}  # lane 0 is the versions lane
    # A bar narrower than a pixel would vanish: give every op a visible width.
    min_w = (hi - lo) / 3000
    handles = _shade(ax, faults)
    titles: dict[str, list[str]] = {}
    for outcome in OUTCOMES:
        group = [s for s in spans if s.type == outcome]
        if not group:
            continue
        polys = []
        for s in group:
            y = row[s.process]
            x0 = s.start
            x1 = max(s.end if s.end is not None else hi, x0 + min_w)
            polys.append([(x0, y - 0.38), (x1, y - 0.38), (x1, y + 0.38), (x0, y + 0.38)])
        gid = f"tl-{outcome}"
        ax.add_collection(
            PolyCollection(polys, facecolors=VERDICT_COLOURS[outcome], edgecolors="none", gid=gid, zorder=2)
        )
        titles[gid] = [tooltip(s) for s in group]
        handles.append(Patch(color=VERDICT_COLOURS[outcome], label=f"{outcome} ({len(group)})"))
    marked = [s for s in spans if s.id in highlight]
    if marked:
        outlines = []
        for s in marked:
            y, x0 = row[s.process], s.start
            x1 = max(s.end if s.end is not None else hi, x0 + min_w)
            outlines.append([(x0, y - 0.48), (x1, y - 0.48), (x1, y + 0.48), (x0, y + 0.48)])
        ax.add_collection(
            PolyCollection(
                outlines,
                facecolors="none",
                edgecolors="#000",
                # Thick outlines of hundreds of ops would merge into one black block.
                linewidths=1.6 if len(marked) <= 50 else 0.6,
                gid="tl-anomaly",
                zorder=4,
            )
        )
        titles["tl-anomaly"] = ["in an anomaly: " + tooltip(s) for s in marked]
        handles.append(Patch(facecolor="none", edgecolor="#000", label=f"in an anomaly ({len(marked)})"))
    commits = sorted((s for s in spans if s.commits), key=lambda s: s.end or 0.0)
    if len(commits) > MAX_VERSION_MARKS:
        # One path for all of them: a mark per commit, each its own element
        # with a tooltip, would double the drawing time of a long run (the
        # bars' tooltips still name each op's version).
        xs = [x for s in commits for x in (s.end, s.end, math.nan)]
        ys = [y for _ in commits for y in (0.35, -0.3, math.nan)]
        ax.plot(xs, ys, color="#333", lw=0.6, zorder=3, gid="tl-versions-comb")
    elif commits:
        # Marks narrow enough that hundreds of commits stay a comb, not a bar.
        w = (hi - lo) / max(400, 4 * len(commits))
        tris = [[(s.end, 0.35), (s.end - w, -0.3), (s.end + w, -0.3)] for s in commits if s.end is not None]
        ax.add_collection(PolyCollection(tris, facecolors="#333", edgecolors="none", gid="tl-versions", zorder=3))
        titles["tl-versions"] = [f"v{s.version} committed by op {s.id} at t = {s.end:.3f} s" for s in commits]
    if commits:
        # Labels at least a label's width apart; the tooltips name every version.
        gap, last = (hi - lo) / 20, -math.inf
        for s in commits:
            if s.end is not None and s.end - last >= gap:
                ax.annotate(f"v{s.version}", (s.end, -0.35), fontsize=7, ha="center", va="bottom", color="#333")
                last = s.end
    ax.set_xlim(lo, hi + (hi - lo) * 0.01)
    ax.set_ylim(len(lanes) + 0.7, -1.1)
    ax.set_yticks(range(len(lanes) + 1), ["versions", *(f"process {p}" for p in lanes)], fontsize=8)
    ax.set_xlabel("time since the run began (s)")
    ax.grid(axis="x", color="#eee", zorder=0)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return _svg(fig, salt, titles), note


def _stride(items: list[Span], cap: int) -> list[Span]:
    if len(items) <= cap:
        return items
    step = len(items) / cap
    return [items[int(i * step)] for i in range(cap)]


def latency_svg(spans: Sequence[Span], faults: Sequence[Fault], max_points: int = MAX_LATENCY_POINTS) -> str:
    """A point per completed op: x its invoke time, y its latency (log scale);
    colour by outcome, marker by op kind."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import LogFormatter

    fig = _figure(14, 4.2)
    done = sorted((s for s in spans if s.latency is not None), key=lambda s: s.start)
    if not done:
        return _empty(fig, "latency", "no completed client ops")
    # Failures are the rare points a reader looks for: thin out the ok ops first.
    bad = _stride([s for s in done if s.type != "ok"], max_points // 2)
    shown = bad + _stride([s for s in done if s.type == "ok"], max_points - len(bad))
    ax = _axes(fig)
    handles = _shade(ax, faults)
    kinds = sorted({s.f for s in shown})
    marker = {f: _MARKERS[i % len(_MARKERS)] for i, f in enumerate(kinds)}
    for f in kinds:
        for outcome in OUTCOMES:
            pts = [s for s in shown if s.f == f and s.type == outcome]
            if pts:
                ax.scatter(
                    [s.start for s in pts],
                    [max(1000 * (s.latency or 0.0), 0.01) for s in pts],
                    s=9,
                    marker=marker[f],
                    color=VERDICT_COLOURS[outcome],
                    alpha=0.7,
                    linewidths=0,
                    zorder=2,
                )
    handles += [Line2D([], [], ls="", marker="o", color=VERDICT_COLOURS[o], label=o) for o in OUTCOMES]
    handles += [Line2D([], [], ls="", marker=marker[f], color="#555", label=f) for f in kinds]
    ax.set_yscale("log")
    # Plain numbers (0.1, 10, 1000): the log scale's default labels are
    # TeX (10 to a power), whose parser matplotlib builds on first use for
    # 0.4 s, in a process that draws one page.
    ax.yaxis.set_major_formatter(LogFormatter())
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    ax.set_ylabel("latency (ms, log)")
    ax.set_xlabel("time the op was invoked (s)")
    lo, hi = _time_range(spans, faults)
    ax.set_xlim(lo, hi)
    ax.grid(color="#eee", zorder=0)
    title = f"{len(done)} completed ops"
    if len(shown) < len(done):
        title += f" ({len(shown)} drawn: every failed or info op up to {max_points // 2}, ok ops evenly spaced)"
    ax.set_title(title, fontsize=9, loc="left")
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return _svg(fig, "latency")


def _bins(lo: float, hi: float, target: int, minimum: float) -> tuple[float, int]:
    # The minimum keeps a long run's bins from being noise, but a run shorter
    # than ten of them still gets ten.
    width = max(min(minimum, (hi - lo) / 10), (hi - lo) / target)
    # Round to a width a person reads easily: 1, 2, 5, 10, ... seconds.
    nice = next(w for w in _nice_widths() if w >= width)
    return nice, max(1, math.ceil((hi - lo) / nice))


def _nice_widths() -> Any:
    k = -2
    while True:
        for m in (1, 2, 5):
            yield m * 10.0**k
        k += 1


def throughput_svg(spans: Sequence[Span], faults: Sequence[Fault]) -> str:
    """Completions per second, one line per outcome."""
    fig = _figure(14, 3.6)
    done = [s for s in spans if s.end is not None]
    if not done:
        return _empty(fig, "throughput", "no completed client ops")
    lo, hi = _time_range(spans, faults)
    width, n = _bins(lo, hi, 150, 0.5)
    counts = {o: [0] * n for o in OUTCOMES}
    for s in done:
        i = min(n - 1, int((s.end - lo) / width))  # type: ignore[operator]
        counts.setdefault(s.type, [0] * n)[i] += 1
    ax = _axes(fig)
    handles = _shade(ax, faults)
    edges = [lo + i * width for i in range(n + 1)]
    for o in OUTCOMES:
        handles.append(ax.stairs([c / width for c in counts[o]], edges, color=VERDICT_COLOURS[o], lw=1.4, label=o))
    ax.set_ylabel(f"ops/s ({width:g} s bins)")
    ax.set_xlabel("time the op completed (s)")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=0)
    ax.grid(color="#eee", zorder=0)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return _svg(fig, "throughput")


def conflict_rate_svg(spans: Sequence[Span], faults: Sequence[Fault]) -> str:
    """Of the write ops completing in each interval (every op but reads, as
    results.json counts them), the share that failed on a concurrent commit."""
    fig = _figure(14, 3.4)
    writes = [s for s in spans if s.end is not None and s.f != "read" and s.type in COMPLETIONS]
    if not writes:
        return _empty(fig, "conflict", "no completed write ops")
    lo, hi = _time_range(spans, faults)
    width, n = _bins(lo, hi, 60, 1.0)
    total, conflicts = [0] * n, [0] * n
    for s in writes:
        i = min(n - 1, int((s.end - lo) / width))  # type: ignore[operator]
        total[i] += 1
        conflicts[i] += s.is_conflict
    xs = [lo + (i + 0.5) * width for i in range(n)]
    rate = [100 * c / t if t else math.nan for c, t in zip(conflicts, total, strict=True)]
    ax = _axes(fig)
    handles = _shade(ax, faults)
    (line,) = ax.plot(xs, rate, color=VERDICT_COLOURS["fail"], marker="o", ms=3, lw=1.2, label="conflict rate")
    handles.insert(0, line)
    overall = 100 * sum(conflicts) / len(writes)
    ax.axhline(overall, color="#999", ls="--", lw=0.8)
    ax.set_title(
        f"{sum(conflicts)} of {len(writes)} write ops failed on a concurrent commit ({overall:.1f}%, dashed)",
        fontsize=9,
        loc="left",
    )
    ax.set_ylabel(f"% of write ops ({width:g} s bins)")
    ax.set_xlabel("time the op completed (s)")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, 100)
    ax.grid(color="#eee", zorder=0)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    return _svg(fig, "conflict")
