"""bench-storage --profile: where an op's time goes on embedded S3.

Each embedded store runs the cell once more behind the fault proxy with no
fault armed. The proxy times every request the store answers, by request
kind and path class (LIST of the log, GET of a commit, PUT of a data file,
...). Printed per store: ops/s behind the proxy and its ratio to the direct
run (the proxy's own cost), requests per op, the store's milliseconds per
op, and the share of the clients' op time spent waiting on the store; then
per request class its count per op, mean milliseconds and share of the
store's time. The rest of an op's time is the engine's own work and the
harness's (bench-overhead measures the harness's part alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.core.history import load_history


@dataclass(frozen=True)
class StoreProfile:
    ops: int
    op_ms: float  # summed over every completed op of every client
    classes: dict[str, tuple[int, float]]  # "LIST commit" -> (requests, store ms)

    @property
    def requests(self) -> int:
        return sum(n for n, _ in self.classes.values())

    @property
    def store_ms(self) -> float:
        return sum(ms for _, ms in self.classes.values())

    @property
    def waiting_share(self) -> float:
        return self.store_ms / self.op_ms if self.op_ms else 0.0


def profile_of(run_dir: Path) -> StoreProfile | None:
    """The store's time in a proxied run, from the proxy's stats and the history."""
    stats_path = run_dir / "logs" / "s3proxy-stats.json"
    if not stats_path.exists():
        return None
    stats = json.loads(stats_path.read_text())
    classes = {k: (int(v["n"]), float(v["ms"])) for k, v in (stats.get("store") or {}).items()}
    spans = [op.end - op.start for op in load_history(run_dir / "history.jsonl").ops() if op.end is not None]
    return StoreProfile(ops=len(spans), op_ms=sum(spans) / 1e6, classes=classes)


def ratio_text(num: float | str, den: float | str) -> str:
    return f"{num / den:.2f}" if isinstance(num, float) and isinstance(den, float) and den else "-"


def rate_text(rate: float | str) -> str:
    """An ops/s figure, or why a run has none."""
    return f"{rate:.1f}" if isinstance(rate, float) else rate


def profile_lines(label: str, rate: float | str, direct: float | str, prof: StoreProfile | None) -> list[str]:
    ratio = ratio_text(rate, direct)
    shown = rate_text(rate)
    if prof is None or not prof.ops:
        return [f"    {label:<10} {shown:>7} {ratio:>9}  (no proxy stats)"]
    lines = [
        f"    {label:<10} {shown:>7} {ratio:>9} {prof.requests / prof.ops:>7.1f} {prof.store_ms / prof.ops:>12.1f}"
        f" {prof.waiting_share:>14.0%}"
    ]
    for name, (n, ms) in sorted(prof.classes.items(), key=lambda kv: -kv[1][1])[:6]:
        share = ms / prof.store_ms if prof.store_ms else 0.0
        mean = ms / n if n else 0.0
        lines.append(f"      {name:<16} {n / prof.ops:>6.2f}/op {mean:>8.1f} ms {share:>5.0%} of store time")
    return lines


PROFILE_HEADER = (
    f"    {'store':<10} {'ops/s':>7} {'/direct':>9} {'req/op':>7} {'store ms/op':>12} {'op time in store':>14}"
)
