"""An anomaly's dependency graph (its DOT source) as inline SVG."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from harness.check.html import esc

__all__ = ["DOT_TIMEOUT_S", "graph_html"]

DOT_TIMEOUT_S = 20


def graph_html(dot: str, svg_file: Path | None = None) -> str:
    """The graph as an inline <svg>: the SVG write_anomaly_graphs already
    rendered where there is one, else Graphviz run now; where Graphviz is
    missing or fails, the DOT source, saying so."""
    svg = None
    if svg_file is not None and svg_file.is_file():
        svg = svg_file.read_text(errors="replace")
    why = ""
    if svg is None:
        dot_bin = shutil.which("dot")
        if dot_bin is None:
            why = (
                "Graphviz's <code>dot</code> is not installed (apt-get install graphviz), "
                "so here is the graph's DOT source."
            )
        else:
            try:
                p = subprocess.run(
                    [dot_bin, "-Tsvg"], input=dot, capture_output=True, text=True, timeout=DOT_TIMEOUT_S, check=False
                )
                if p.returncode == 0:
                    svg = p.stdout
                else:
                    why = f"Graphviz failed ({esc(p.stderr.strip()[:200])}); the graph's DOT source:"
            except subprocess.TimeoutExpired:
                why = f"Graphviz took over {DOT_TIMEOUT_S} s; the graph's DOT source:"
    if svg is not None and "<svg" in svg:
        # Graphviz opens with an XML declaration and a DOCTYPE, which have no
        # place inside an HTML document.
        return f'<div class="graph">{svg[svg.index("<svg") :]}</div>'
    return f'<div class="graph-source"><p class="muted">{why}</p><pre>{esc(dot)}</pre></div>'
