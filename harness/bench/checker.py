"""bench-checker: the serializability analysis core on synthetic histories.

Each size runs in its own process (so peak RSS is that size's alone): the
simulator generates a correct concurrent Delta history as columns (timed
apart: the generation time includes building the columns), then the
analysis runs on it, three times up to 1M transactions (the median is
reported), once above. Targets: at least 250,000 transactions/s at 1M,
time per transaction at 1M within 1.15x of that at 100k (or, without
both, at the largest size against the smallest), and 10M transactions in
under 60 s and 4 GB peak RSS (the simulated history included).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from checkers.txn_graph import analyze
from harness.bench.machine import speed_line
from harness.bench.simulate import SimConfig, run_columns

TARGET_1M_TXNS_S = 250_000
TARGET_GROWTH = 1.15
TARGET_10M_S = 60.0
TARGET_10M_RSS_MB = 4 * 1024
REPEATS_UP_TO = 1_000_000


def _growth(a: dict, b: dict) -> float:
    """Time per transaction at row b as a multiple of that at row a."""
    if not a["analyze_s"]:
        return float("nan")
    return (b["analyze_s"] / a["analyze_s"]) / (b["committed"] / a["committed"])


def measure_one(n: int, concurrency: int, level: str, seed: int) -> dict:
    t0 = time.perf_counter()
    history, _ = run_columns(
        SimConfig(n_txns=n, concurrency=concurrency, n_keys=max(64, n // 10), isolation=level, seed=seed)
    )
    t1 = time.perf_counter()
    runs = []
    for _ in range(3 if n <= REPEATS_UP_TO else 1):
        start = time.perf_counter()
        res = analyze(history)
        runs.append((time.perf_counter() - start, res))
    took, res = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
    t2 = t1 + took
    return {
        "n": n,
        "committed": len(history),
        "generate_s": round(t1 - t0, 2),
        "analyze_s": round(t2 - t1, 4),
        "txns_per_s": round(len(history) / (t2 - t1)) if t2 > t1 else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "anomalies": len(res.anomalies),
        "reorderings": res.reorderings_total,
        "backward_edges": res.stats.get("backward_edges"),
        "interval_nodes": res.stats.get("interval_nodes"),
        "stage_s": res.stage_s,
    }


def bench_checker(sizes: list[int], concurrency: int, level: str, seed: int) -> int:
    print(
        f"bench-checker: serializability analysis on simulated histories "
        f"(concurrency {concurrency}, {level}, seed {seed})"
    )
    print(speed_line())
    print(
        f"  {'attempted':>10} {'committed':>10} {'generate':>9} {'analyze':>9} {'txns/s':>9} {'peak RSS':>9}"
        f" {'backward':>9} {'anomalies':>9}"
    )
    rows = []
    for n in sizes:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.bench.checker", str(n), str(concurrency), level, str(seed)],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if proc.returncode != 0:
            print(f"  {n:>10} failed: {proc.stderr.strip().splitlines()[-1:]}")
            return 2
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append(r)
        print(
            f"  {r['n']:>10} {r['committed']:>10} {r['generate_s']:>8.2f}s {r['analyze_s']:>8.2f}s "
            f"{r['txns_per_s'] or 0:>9} {r['peak_rss_mb']:>7} MB {r['backward_edges']:>9} {r['anomalies']:>9}"
        )
        print("  " + " " * 10 + " stages: " + ", ".join(f"{k} {v:.2f}s" for k, v in r["stage_s"].items()))
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        scale = b["committed"] / a["committed"]
        growth = _growth(a, b)
        print(f"  growth: time per transaction at {b['n']} is {growth:.2f}x that at {a['n']} (1.00 = linear)")
        per_stage = {
            k: (b["stage_s"][k] / a["stage_s"][k]) / scale
            for k in b["stage_s"]
            if a["stage_s"].get(k) and b["stage_s"][k] >= 0.05
        }
        if per_stage:
            print("  growth per stage: " + ", ".join(f"{k} {v:.2f}x" for k, v in per_stage.items()))
        # The target compares 1M with 100k where both ran (a larger size's
        # growth is printed above, not judged), else the largest with the smallest.
        by_n = {r["n"]: r for r in rows}
        if 100_000 in by_n and 1_000_000 in by_n:
            a, b = by_n[100_000], by_n[1_000_000]
            growth = _growth(a, b)
        print(
            f"  target growth <= {TARGET_GROWTH:.2f}x ({b['n']} against {a['n']}): "
            f"{'met' if growth <= TARGET_GROWTH else 'MISSED'} ({growth:.2f}x)"
        )
    for r in rows:
        if r["n"] == 1_000_000:
            fast = (r["txns_per_s"] or 0) >= TARGET_1M_TXNS_S
            print(f"  target 1M >= {TARGET_1M_TXNS_S:,} txns/s: {'met' if fast else 'MISSED'} ({r['txns_per_s']:,})")
        if r["n"] == 10_000_000:
            quick, small = r["analyze_s"] < TARGET_10M_S, r["peak_rss_mb"] < TARGET_10M_RSS_MB
            print(
                f"  target 10M < {TARGET_10M_S:.0f} s: {'met' if quick else 'MISSED'} ({r['analyze_s']:.1f} s); "
                f"< {TARGET_10M_RSS_MB} MB: {'met' if small else 'MISSED'} ({r['peak_rss_mb']} MB)"
            )
    return 0


if __name__ == "__main__":
    n, conc, level, seed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    print(json.dumps(measure_one(n, conc, level, seed)))
