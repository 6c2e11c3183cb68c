"""The shell every page the harness writes shares: one self-contained HTML
document (inline CSS, no script or font from anywhere, a data: favicon so a
browser asks no server for one), the verdict colours, and escaping.

report.html, conformance.html, matrix.html and the `serve` index all build
on `page`, so they look alike and all open offline.
"""

from __future__ import annotations

import html

__all__ = ["VERDICT_COLOURS", "esc", "page", "verdict_badge"]

# valid / invalid / unknown, and the op outcomes ok / fail / info, in the
# colours Jepsen's timeline uses for them.
VERDICT_COLOURS = {
    "valid": "#6db33f",
    "invalid": "#d9534f",
    "unknown": "#f0ad4e",
    "ok": "#6db33f",
    "fail": "#d9534f",
    "info": "#f0ad4e",
}

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 0; color: #222;
       background: #fafafa; }
header { padding: 14px 24px; background: #fff; border-bottom: 1px solid #ddd; }
header h1 { margin: 0; font-size: 20px; }
main { padding: 8px 24px 40px; max-width: 1600px; }
section { background: #fff; border: 1px solid #e3e3e3; border-radius: 6px; padding: 10px 16px; margin: 14px 0; }
h2 { font-size: 17px; margin: 6px 0 10px; }
h3 { font-size: 15px; margin: 12px 0 6px; }
table { border-collapse: collapse; }
th, td { border: 1px solid #e3e3e3; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code, pre, .mono { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 12.5px; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; color: #fff; font-weight: 600; }
.muted { color: #777; }
.plot svg, .graph svg { max-width: 100%; height: auto; }
details > summary { cursor: pointer; }
a { color: #0b62a4; }
"""


def esc(value: object) -> str:
    """Text (any value, via str) made safe inside HTML and attributes."""
    return html.escape(str(value), quote=True)


def verdict_badge(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict.lower(), "#888")
    cls = esc(verdict.lower())
    return f'<span class="badge verdict-{cls}" style="background:{colour}">{esc(verdict.upper())}</span>'


def page(title: str, body: str, extra_css: str = "") -> str:
    """A complete HTML document: `body` is trusted HTML, `title` is text."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'
        f"<title>{esc(title)}</title><style>{_CSS}{extra_css}</style></head>\n"
        f"<body>{body}</body></html>\n"
    )
