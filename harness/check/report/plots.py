"""The report's pictures, written as inline SVG: the timeline of
ops per process, latency and throughput over time, and the conflict rate.

Every builder takes the history already reduced to :class:`Span` (one per
op) and :class:`Fault` (one per nemesis interval), so tests can feed them
small synthetic lists, and returns an ``<svg>`` element as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any
from xml.sax.saxutils import escape

from harness.check.html import VERDICT_COLOURS
from harness.core.history import COMPLETIONS, INFO, ErrorClass, History

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


# One per op: a long run has millions. Not frozen: a frozen dataclass's
# __init__ sets each field through object.__setattr__, five times the cost.
@dataclass(slots=True)
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
        return self.error_class in _CONFLICT_CLASSES

    @property
    def commits(self) -> bool:
        """Whether `version` is a version this op committed (a read's is the one it read)."""
        return self.type == "ok" and self.version is not None and not self.f.startswith("read")


_CONFLICT_CLASSES = frozenset(c.value for c in ErrorClass if c.is_conflict)
_START = attrgetter("start")


@dataclass(frozen=True)
class Fault:
    """A nemesis interval: from its start-<kind> op to its stop-<kind> (or heal)."""

    kind: str
    start: float
    end: float
    stopped: bool = True
    detail: str = ""


def spans_of(history: History) -> list[Span]:
    out: list[Span] = []
    append = out.append
    for op in history.ops():
        # The events' fields read once each, not through Op's properties
        # (each looks at the completion again): a long run has millions.
        inv, done = op.invoke, op.completion
        if not isinstance(inv.process, int):
            continue  # the setup's and the nemesis's ops
        if done is None:
            append(Span(inv.process, inv.id, inv.f, INFO, inv.time / 1e9, None, None, inv.value))
            continue
        err, value = done.error, done.value
        append(
            Span(
                inv.process,
                inv.id,
                inv.f,
                done.type,
                inv.time / 1e9,
                done.time / 1e9,
                done.version,
                inv.value if value is None else value,
                err.cls.value if err else None,
                err.raw if err else None,
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


# -- SVG plumbing --------------------------------------------------------------
#
# Written here, not by a plotting library: matplotlib took a second to
# import and half a second to draw four small plots, in every process that
# wrote a report (most of the CPU of checking a short run).

_PT = 72.0  # SVG units per inch: sizes below are in inches, as figures are measured
_FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
_GRID = "#eee"
_TICK = 3.5
_MARKER_R = 2.2


def _f(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if math.isfinite(v) else "0"


def _text(
    x: float, y: float, s: str, size: float = 10, anchor: str = "start", colour: str = "#000", extra: str = ""
) -> str:
    return (
        f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size:g}" text-anchor="{anchor}" fill="{colour}"{extra}>'
        f"{escape(s)}</text>"
    )


def _nice_step(span: float, target: int) -> float:
    raw = span / max(1, target)
    mag = 10.0 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw * (1 - 1e-9))


def _linear_ticks(lo: float, hi: float, target: int = 8) -> tuple[list[float], int]:
    """Ticks at a round step inside [lo, hi], and the decimals their labels need."""
    if not hi > lo:
        return [lo], 0
    step = _nice_step(hi - lo, target)
    first = math.ceil(lo / step - 1e-9)
    ticks = [
        round((first + i) * step, 12)
        for i in range(int((hi - lo) / step + 2))
        if (first + i) * step <= hi + step * 1e-9
    ]
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) + (
        1 if round(step / 10.0 ** math.floor(math.log10(step)), 6) == 2.5 else 0
    )
    return ticks, decimals


def _log_ticks(lo: float, hi: float) -> tuple[list[float], list[float], list[float]]:
    """Decades inside [lo, hi] (labelled), the 2..9 multiples between them,
    and which of those are labelled too: all of 2, 3 and 5 when the range
    spans less than two decades, else none."""
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    major = [10.0**k for k in range(k0, k1 + 1) if lo <= 10.0**k <= hi]
    minor = [m * 10.0**k for k in range(k0, k1 + 1) for m in range(2, 10) if lo <= m * 10.0**k <= hi]
    few = math.log10(hi) - math.log10(lo) < 2 or len(major) < 2
    labelled = [v for v in minor if few and round(v / 10.0 ** math.floor(math.log10(v) + 1e-9)) in (2, 3, 5)]
    return major, minor, labelled


def _num(v: float, decimals: int | None = None) -> str:
    if decimals is not None:
        return f"{v:.{decimals}f}"
    return f"{v:g}" if abs(v) < 1e6 else f"{v:.0e}"


@dataclass
class _Legend:
    kind: str  # patch / outline / marker / line / dashed
    colour: str
    label: str
    opacity: float = 1.0
    marker: str = "o"


class _Figure:
    """One plot: a figure of `width` x `height` inches, axes with fixed
    margins (the legend sits in the right one), data scaled to the axes.
    Everything drawn goes into the SVG text in order (later on top)."""

    def __init__(
        self,
        salt: str,
        width: float,
        height: float,
        left: float = 1.0,
        right: float = 1.9,
        top: float = 0.35,
        bottom: float = 0.6,
    ) -> None:
        self.salt = salt
        self.w, self.h = width * _PT, height * _PT
        self.x0, self.x1 = left * _PT, self.w - right * _PT
        self.y0, self.y1 = top * _PT, self.h - bottom * _PT
        self.xlim = (0.0, 1.0)
        self.ylim = (0.0, 1.0)
        self.ylog = False
        self.back: list[str] = []  # grid and fault bands, under the data
        self.data: list[str] = []
        self.front: list[str] = []  # axes, ticks, labels, legend
        self.legend: list[_Legend] = []
        self.defs: list[str] = []
        self._markers: dict[str, str] = {}  # shape -> the id of its definition

    def X(self, v: float) -> float:
        lo, hi = self.xlim
        return self.x0 + (v - lo) / (hi - lo) * (self.x1 - self.x0) if hi != lo else self.x0

    def Y(self, v: float) -> float:
        lo, hi = self.ylim
        if self.ylog:
            v, lo, hi = math.log10(max(v, 1e-300)), math.log10(lo), math.log10(hi)
        return self.y1 - (v - lo) / (hi - lo) * (self.y1 - self.y0) if hi != lo else self.y1

    def shade(self, faults: Sequence[Fault]) -> None:
        """Fault intervals as bands across the whole axes; a legend entry per kind."""
        colours = _fault_colours(faults)
        for f in faults:
            a, b = max(self.X(f.start), self.x0), min(self.X(f.end), self.x1)
            if b > a:
                self.back.append(
                    f'<rect x="{_f(a)}" y="{_f(self.y0)}" width="{_f(b - a)}" height="{_f(self.y1 - self.y0)}" '
                    f'style="fill: {colours[f.kind]}; fill-opacity: 0.13"/>'
                )
        self.legend += [_Legend("patch", c, f"nemesis: {k}", 0.35) for k, c in colours.items()]

    def x_axis(self, label: str, grid: bool = True) -> None:
        ticks, decimals = _linear_ticks(*self.xlim)
        for t in ticks:
            x = self.X(t)
            if grid:
                self.back.append(f'<path d="M{_f(x)} {_f(self.y0)}V{_f(self.y1)}" style="stroke: {_GRID}"/>')
            self.front.append(f'<path d="M{_f(x)} {_f(self.y1)}v{_TICK}" style="stroke: #000; stroke-width: 0.8"/>')
            self.front.append(_text(x, self.y1 + _TICK + 11, _num(t, decimals), anchor="middle"))
        self.front.append(_text((self.x0 + self.x1) / 2, self.y1 + _TICK + 27, label, anchor="middle"))

    def y_axis(self, label: str = "", grid: bool = True, lanes: Sequence[str] | None = None) -> None:
        marks: list[tuple[float, str | None, bool]] = []  # value, label, major
        if lanes is not None:
            marks = [(float(i), name, True) for i, name in enumerate(lanes)]
        elif self.ylog:
            major, minor, labelled = _log_ticks(*self.ylim)
            marks = [(v, _num(v), True) for v in major]
            marks += [(v, _num(v) if v in labelled else None, False) for v in minor]
        else:
            ticks, decimals = _linear_ticks(*self.ylim, target=6)
            marks = [(t, _num(t, decimals), True) for t in ticks]
        for v, text, major in marks:
            y = self.Y(v)
            if grid and major:
                self.back.append(f'<path d="M{_f(self.x0)} {_f(y)}H{_f(self.x1)}" style="stroke: {_GRID}"/>')
            tick = _TICK if major else _TICK / 2
            self.front.append(f'<path d="M{_f(self.x0)} {_f(y)}h-{tick}" style="stroke: #000; stroke-width: 0.8"/>')
            if text is not None:
                self.front.append(_text(self.x0 - _TICK - 3, y + 3.5, text, size=8 if lanes else 10, anchor="end"))
        if label:
            x, y = self.x0 - 52, (self.y0 + self.y1) / 2
            self.front.append(_text(x, y, label, anchor="middle", extra=f' transform="rotate(-90 {_f(x)} {_f(y)})"'))

    def title(self, text: str) -> None:
        self.front.append(_text(self.x0, self.y0 - 6, text, size=9))

    def marker(self, shape: str) -> str:
        """The id of a marker's shape (defined once per figure), centred on 0,0."""
        mid = self._markers.get(shape)
        if mid is None:
            mid = self._markers[shape] = f"{self.salt}-m{_MARKERS.index(shape)}"
            self.defs.append(f'<path id="{mid}" d="{_marker_path(shape, _MARKER_R)}"/>')
        return mid

    def svg(self) -> str:
        clip = f"{self.salt}-clip"
        legend = self._legend()
        return (
            f'<svg xmlns="{_SVG_NS}" width="{_f(self.w)}pt" height="{_f(self.h)}pt" '
            f'viewBox="0 0 {_f(self.w)} {_f(self.h)}" font-family="{_FONT}">'
            f'<defs><clipPath id="{clip}"><rect x="{_f(self.x0)}" y="{_f(self.y0)}" width="{_f(self.x1 - self.x0)}" '
            f'height="{_f(self.y1 - self.y0)}"/></clipPath>{"".join(self.defs)}</defs>'
            f'<rect width="100%" height="100%" style="fill: #fff"/>'
            f'<g clip-path="url(#{clip})">{"".join(self.back)}{"".join(self.data)}</g>'
            f'<rect x="{_f(self.x0)}" y="{_f(self.y0)}" width="{_f(self.x1 - self.x0)}" '
            f'height="{_f(self.y1 - self.y0)}" style="fill: none; stroke: #000; stroke-width: 0.8"/>'
            f"{''.join(self.front)}{legend}</svg>"
        )

    def _legend(self) -> str:
        out = []
        x, y = self.x1 + 10, self.y0 + 8
        for e in self.legend:
            cy = y - 3
            if e.kind == "patch":
                out.append(
                    f'<rect x="{_f(x)}" y="{_f(cy - 3.5)}" width="16" height="7" '
                    f'style="fill: {e.colour}; fill-opacity: {e.opacity:g}"/>'
                )
            elif e.kind == "outline":
                out.append(
                    f'<rect x="{_f(x)}" y="{_f(cy - 3.5)}" width="16" height="7" '
                    f'style="fill: none; stroke: {e.colour}"/>'
                )
            elif e.kind == "marker":
                out.append(
                    f'<use href="#{self.marker(e.marker)}" x="{_f(x + 8)}" y="{_f(cy)}" style="fill: {e.colour}"/>'
                )
            else:
                dash = "; stroke-dasharray: 3 2" if e.kind == "dashed" else ""
                out.append(f'<path d="M{_f(x)} {_f(cy)}h16" style="stroke: {e.colour}; stroke-width: 1.4{dash}"/>')
            out.append(_text(x + 22, y, e.label, size=8))
            y += 14
        return "".join(out)


def _marker_path(shape: str, r: float) -> str:
    """A filled marker of about `r` radius, as a path centred on 0,0."""

    def poly(points: Sequence[tuple[float, float]]) -> str:
        return "M" + "L".join(f"{_f(px)} {_f(py)}" for px, py in points) + "Z"

    def regular(n: int, rot: float, rr: float = r) -> list[tuple[float, float]]:
        return [(rr * math.sin(rot + 2 * math.pi * i / n), -rr * math.cos(rot + 2 * math.pi * i / n)) for i in range(n)]

    t = r * 0.35
    if shape == "o":
        return f"M{_f(-r)} 0a{_f(r)} {_f(r)} 0 1 0 {_f(2 * r)} 0a{_f(r)} {_f(r)} 0 1 0 {_f(-2 * r)} 0Z"
    if shape == "s":
        return poly([(-r * 0.85, -r * 0.85), (r * 0.85, -r * 0.85), (r * 0.85, r * 0.85), (-r * 0.85, r * 0.85)])
    if shape in ("^", "v", "<", ">"):
        rot = {"^": 0.0, ">": math.pi / 2, "v": math.pi, "<": -math.pi / 2}[shape]
        return poly(regular(3, rot))
    if shape == "D":
        return poly(regular(4, 0.0))
    if shape == "P":
        return poly(
            [(-t, -r), (t, -r), (t, -t), (r, -t), (r, t), (t, t), (t, r), (-t, r), (-t, t), (-r, t), (-r, -t), (-t, -t)]
        )
    if shape == "X":
        c = math.cos(math.pi / 4)
        pts = [
            (-t, -r),
            (t, -r),
            (t, -t),
            (r, -t),
            (r, t),
            (t, t),
            (t, r),
            (-t, r),
            (-t, t),
            (-r, t),
            (-r, -t),
            (-t, -t),
        ]
        return poly([(c * (px - py), c * (px + py)) for px, py in pts])
    if shape == "*":
        outer, inner = regular(5, 0.0), regular(5, math.pi / 5, r * 0.45)
        return poly([p for pair in zip(outer, inner, strict=True) for p in pair])
    if shape == "h":
        return poly(regular(6, 0.0))
    return poly(regular(5, 0.0))  # "p", and anything else


def _rect_path(x0: float, x1: float, y0: float, y1: float) -> str:
    return f"M{_f(x0)} {_f(y0)}H{_f(x1)}V{_f(y1)}H{_f(x0)}Z"


def _titled(gid: str, style: str, paths: Sequence[str], titles: Sequence[str] | None) -> str:
    """A group of paths, each with its tooltip (<title>) when given."""
    if titles is None:
        body = "".join(f'<path d="{d}"/>' for d in paths)
    else:
        body = "".join(f'<path d="{d}"><title>{escape(t)}</title></path>' for d, t in zip(paths, titles, strict=True))
    return f'<g id="{gid}" style="{style}">{body}</g>'


def _fault_colours(faults: Sequence[Fault]) -> dict[str, str]:
    kinds = sorted({f.kind for f in faults})
    return {k: _FAULT_COLOURS[i % len(_FAULT_COLOURS)] for i, k in enumerate(kinds)}


def _time_range(spans: Sequence[Span], faults: Sequence[Fault]) -> tuple[float, float]:
    # Each bound over starts and ends apart: a million spans' times in one
    # list would be built again for every plot.
    starts = [s.start for s in spans] + [f.start for f in faults]
    ends = [s.end for s in spans if s.end is not None] + [f.end for f in faults]
    if not starts:  # every span and fault has a start: no ends either
        return 0.0, 1.0
    lo = min(min(starts, default=math.inf), min(ends, default=math.inf))
    hi = max(max(starts, default=-math.inf), max(ends, default=-math.inf))
    return lo, hi if hi > lo else lo + 1.0


def _empty(salt: str, height: float, message: str) -> str:
    fig = _Figure(salt, 14, height)
    return (
        f'<svg xmlns="{_SVG_NS}" width="{_f(fig.w)}pt" height="{_f(fig.h)}pt" viewBox="0 0 {_f(fig.w)} {_f(fig.h)}" '
        f'font-family="{_FONT}"><rect width="100%" height="100%" style="fill: #fff"/>'
        f"{_text(fig.w / 2, fig.h / 2, message, anchor='middle', colour='#777')}</svg>"
    )


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
    if window is not None:
        spans = [s for s in spans if s.start <= window[1] and (s.end is None or s.end >= window[0])]
        faults = [f for f in faults if f.start <= window[1] and f.end >= window[0]]
    spans = sorted(spans, key=_START)
    note = ""
    if len(spans) > max_bars:
        note = (
            f"The first {max_bars} of {len(spans)} ops are drawn (to t = {spans[max_bars - 1].start:.1f} s)"
            + (", and every op an anomaly names" if highlight else "")
            + "; the latency and throughput plots below cover all of them."
        )
        spans = spans[:max_bars] + [s for s in spans[max_bars:] if s.id in highlight]
    lanes = _lane_order(spans)
    height = max(3.0, min(22.0, 1.6 + 0.3 * (len(lanes) + 1)))
    if not spans:
        return _empty(salt, height, "no client ops in the history"), note
    lo, hi = window if window is not None else _time_range(spans, faults)
    fig = _Figure(salt, 14, height, left=1.1)
    fig.xlim = (lo, hi + (hi - lo) * 0.01)
    fig.ylim = (len(lanes) + 0.7, -1.1)  # lane 0 (versions) on top
    row = {p: i + 1 for i, p in enumerate(lanes)}
    # A bar narrower than a pixel would vanish: give every op a visible width.
    min_w = (hi - lo) / 3000
    fig.shade(faults)

    def box(s: Span, half: float) -> str:
        y, x0 = row[s.process], s.start
        x1 = max(s.end if s.end is not None else hi, x0 + min_w)
        return _rect_path(fig.X(x0), fig.X(x1), fig.Y(y - half), fig.Y(y + half))

    for outcome in OUTCOMES:
        group = [s for s in spans if s.type == outcome]
        if not group:
            continue
        colour = VERDICT_COLOURS[outcome]
        fig.data.append(
            _titled(f"tl-{outcome}", f"fill: {colour}", [box(s, 0.38) for s in group], [tooltip(s) for s in group])
        )
        fig.legend.append(_Legend("patch", colour, f"{outcome} ({len(group)})"))
    marked = [s for s in spans if s.id in highlight]
    if marked:
        # Thick outlines of hundreds of ops would merge into one black block.
        width = 1.6 if len(marked) <= 50 else 0.6
        fig.data.append(
            _titled(
                "tl-anomaly",
                f"fill: none; stroke: #000; stroke-width: {width}",
                [box(s, 0.48) for s in marked],
                ["in an anomaly: " + tooltip(s) for s in marked],
            )
        )
        fig.legend.append(_Legend("outline", "#000", f"in an anomaly ({len(marked)})"))
    commits = sorted((s for s in spans if s.commits and s.end is not None), key=lambda s: s.end or 0.0)
    top, base = fig.Y(-0.3), fig.Y(0.35)
    if len(commits) > MAX_VERSION_MARKS:
        # One path for all of them: a mark per commit, each its own element
        # with a tooltip, would make a long run's page slow to draw (the
        # bars' tooltips still name each op's version).
        d = "".join(f"M{_f(fig.X(s.end))} {_f(base)}V{_f(top)}" for s in commits if s.end is not None)
        fig.data.append(f'<path id="tl-versions-comb" d="{d}" style="stroke: #333; stroke-width: 0.6"/>')
    elif commits:
        # Marks narrow enough that hundreds of commits stay a comb, not a bar.
        w = (fig.X(hi) - fig.X(lo)) / max(400, 4 * len(commits))
        tris = []
        for s in commits:
            x = fig.X(s.end)  # type: ignore[arg-type]
            tris.append(f"M{_f(x)} {_f(base)}L{_f(x - w)} {_f(top)}L{_f(x + w)} {_f(top)}Z")
        titles = [f"v{s.version} committed by op {s.id} at t = {s.end:.3f} s" for s in commits]
        fig.data.append(_titled("tl-versions", "fill: #333", tris, titles))
    if commits:
        # Labels at least a label's width apart; the tooltips name every version.
        gap, last = (hi - lo) / 20, -math.inf
        for s in commits:
            if s.end is not None and s.end - last >= gap:
                fig.data.append(
                    _text(fig.X(s.end), fig.Y(-0.35) - 2, f"v{s.version}", size=7, anchor="middle", colour="#333")
                )
                last = s.end
    fig.x_axis("time since the run began (s)")
    fig.y_axis(grid=False, lanes=["versions", *(f"process {p}" for p in lanes)])
    return fig.svg(), note


def _stride(items: list[Span], cap: int) -> list[Span]:
    if len(items) <= cap:
        return items
    step = len(items) / cap
    return [items[int(i * step)] for i in range(cap)]


def latency_svg(spans: Sequence[Span], faults: Sequence[Fault], max_points: int = MAX_LATENCY_POINTS) -> str:
    """A point per completed op: x its invoke time, y its latency (log scale);
    colour by outcome, marker by op kind."""
    done = sorted((s for s in spans if s.end is not None), key=_START)  # the ops with a latency
    if not done:
        return _empty("latency", 4.2, "no completed client ops")
    # Failures are the rare points a reader looks for: thin out the ok ops first.
    bad = _stride([s for s in done if s.type != "ok"], max_points // 2)
    shown = bad + _stride([s for s in done if s.type == "ok"], max_points - len(bad))
    fig = _Figure("latency", 14, 4.2)
    fig.xlim = _time_range(spans, faults)
    ms = [max(1000 * (s.latency or 0.0), 0.01) for s in shown]
    # A twentieth of the span (in decades) of room above and below the points.
    a, b = math.log10(min(ms)), math.log10(max(ms))
    pad = max((b - a) * 0.05, 0.05)
    fig.ylim, fig.ylog = (10 ** (a - pad), 10 ** (b + pad)), True
    fig.shade(faults)
    kinds = sorted({s.f for s in shown})
    marker = {f: _MARKERS[i % len(_MARKERS)] for i, f in enumerate(kinds)}
    ids = {f: fig.marker(m) for f, m in marker.items()}
    points = []
    for s, v in zip(shown, ms, strict=True):
        points.append(
            f'<use href="#{ids[s.f]}" x="{_f(fig.X(s.start))}" y="{_f(fig.Y(v))}" '
            f'style="fill: {VERDICT_COLOURS[s.type] if s.type in VERDICT_COLOURS else "#555"}; fill-opacity: 0.7"/>'
        )
    fig.data.append(f'<g id="latency-points">{"".join(points)}</g>')
    fig.legend += [_Legend("marker", VERDICT_COLOURS[o], o) for o in OUTCOMES]
    fig.legend += [_Legend("marker", "#555", f, marker=marker[f]) for f in kinds]
    fig.x_axis("time the op was invoked (s)")
    fig.y_axis("latency (ms, log)")
    title = f"{len(done)} completed ops"
    if len(shown) < len(done):
        title += f" ({len(shown)} drawn: every failed or info op up to {max_points // 2}, ok ops evenly spaced)"
    fig.title(title)
    return fig.svg()


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


def _top(values: Sequence[float]) -> float:
    """An upper y limit with a little room above the highest value."""
    top = max((v for v in values if math.isfinite(v)), default=0.0)
    return top * 1.05 if top > 0 else 1.0


def throughput_svg(spans: Sequence[Span], faults: Sequence[Fault]) -> str:
    """Completions per second, one line per outcome."""
    done = [s for s in spans if s.end is not None]
    if not done:
        return _empty("throughput", 3.6, "no completed client ops")
    lo, hi = _time_range(spans, faults)
    width, n = _bins(lo, hi, 150, 0.5)
    counts = {o: [0] * n for o in OUTCOMES}
    for s in done:
        i = min(n - 1, int((s.end - lo) / width))  # type: ignore[operator]
        row = counts.get(s.type)
        if row is None:
            row = counts[s.type] = [0] * n
        row[i] += 1
    rates = {o: [c / width for c in counts[o]] for o in OUTCOMES}
    fig = _Figure("throughput", 14, 3.6)
    fig.xlim, fig.ylim = (lo, hi), (0.0, _top([r for o in OUTCOMES for r in rates[o]]))
    fig.shade(faults)
    for o in OUTCOMES:
        d = f"M{_f(fig.X(lo))} {_f(fig.Y(rates[o][0]))}"
        for i, r in enumerate(rates[o]):
            if i:
                d += f"V{_f(fig.Y(r))}"
            d += f"H{_f(fig.X(lo + (i + 1) * width))}"
        fig.data.append(f'<path d="{d}" style="fill: none; stroke: {VERDICT_COLOURS[o]}; stroke-width: 1.4"/>')
        fig.legend.append(_Legend("line", VERDICT_COLOURS[o], o))
    fig.x_axis("time the op completed (s)")
    fig.y_axis(f"ops/s ({width:g} s bins)")
    return fig.svg()


def conflict_rate_svg(spans: Sequence[Span], faults: Sequence[Fault]) -> str:
    """Of the write ops completing in each interval (every op but reads, as
    results.json counts them), the share that failed on a concurrent commit."""
    writes = [s for s in spans if s.end is not None and s.f != "read" and s.type in COMPLETIONS]
    if not writes:
        return _empty("conflict", 3.4, "no completed write ops")
    lo, hi = _time_range(spans, faults)
    width, n = _bins(lo, hi, 60, 1.0)
    total, conflicts = [0] * n, [0] * n
    for s in writes:
        i = min(n - 1, int((s.end - lo) / width))  # type: ignore[operator]
        total[i] += 1
        conflicts[i] += s.error_class in _CONFLICT_CLASSES
    xs = [lo + (i + 0.5) * width for i in range(n)]
    rate = [100 * c / t if t else math.nan for c, t in zip(conflicts, total, strict=True)]
    fig = _Figure("conflict", 14, 3.4)
    fig.xlim, fig.ylim = (lo, hi), (0.0, 100.0)
    fig.shade(faults)
    colour = VERDICT_COLOURS["fail"]
    overall = 100 * sum(conflicts) / len(writes)
    fig.data.append(
        f'<path d="M{_f(fig.x0)} {_f(fig.Y(overall))}H{_f(fig.x1)}" '
        'style="stroke: #999; stroke-width: 0.8; stroke-dasharray: 4 3"/>'
    )
    d, pen = "", "M"  # a bin with no write op breaks the line
    for x, r in zip(xs, rate, strict=True):
        if math.isnan(r):
            pen = "M"
            continue
        d += f"{pen}{_f(fig.X(x))} {_f(fig.Y(r))}"
        pen = "L"
    fig.data.append(f'<path d="{d}" style="fill: none; stroke: {colour}; stroke-width: 1.2"/>')
    dot = fig.marker("o")
    fig.data.append(
        "".join(
            f'<use href="#{dot}" x="{_f(fig.X(x))}" y="{_f(fig.Y(r))}" style="fill: {colour}"/>'
            for x, r in zip(xs, rate, strict=True)
            if not math.isnan(r)
        )
    )
    fig.legend.insert(0, _Legend("line", colour, "conflict rate"))
    fig.title(f"{sum(conflicts)} of {len(writes)} write ops failed on a concurrent commit ({overall:.1f}%, dashed)")
    fig.x_axis("time the op completed (s)")
    fig.y_axis(f"% of write ops ({width:g} s bins)")
    return fig.svg()
