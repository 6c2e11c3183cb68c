"""bench-checker: the serializability analysis core on synthetic histories.

Each size runs in its own process (so peak RSS is that size's alone): the
simulator generates a correct concurrent Delta history (timed apart), then
the analysis runs on it. Targets: 1M transactions in <= 30 s with
peak RSS <= 3 GB; moonshot <= 10 s.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

from checkers.txn_graph import analyze
from harness.bench.simulate import SimConfig, run

TARGET_1M_S = 30.0
MOONSHOT_1M_S = 10.0
TARGET_RSS_MB = 3 * 1024


def measure_one(n: int, concurrency: int, level: str, seed: int) -> dict:
    t0 = time.perf_counter()
    sim = run(SimConfig(n_txns=n, concurrency=concurrency, n_keys=max(64, n // 10), isolation=level, seed=seed))
    t1 = time.perf_counter()
    res = analyze(sim.history)
    t2 = time.perf_counter()
    return {
        "n": n,
        "committed": len(sim.history.txns),
        "generate_s": round(t1 - t0, 2),
        "analyze_s": round(t2 - t1, 2),
        "txns_per_s": round(len(sim.history.txns) / (t2 - t1)) if t2 > t1 else None,
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
            timeout=900,
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
        growth = (b["analyze_s"] / a["analyze_s"]) / scale if a["analyze_s"] else float("nan")
        print(f"  growth: time per transaction at {b['n']} is {growth:.2f}x that at {a['n']} (1.00 = linear)")
        per_stage = {
            k: (b["stage_s"][k] / a["stage_s"][k]) / scale
            for k in b["stage_s"]
            if a["stage_s"].get(k) and b["stage_s"][k] >= 0.05
        }
        if per_stage:
            print("  growth per stage: " + ", ".join(f"{k} {v:.2f}x" for k, v in per_stage.items()))
    big = [r for r in rows if r["n"] >= 1_000_000]
    if big:
        r = big[-1]
        print(
            f"  target 1M <= {TARGET_1M_S:.0f} s: {'met' if r['analyze_s'] <= TARGET_1M_S else 'MISSED'} "
            f"({r['analyze_s']:.1f} s); moonshot <= {MOONSHOT_1M_S:.0f} s: "
            f"{'met' if r['analyze_s'] <= MOONSHOT_1M_S else 'not met'}; "
            f"peak RSS <= {TARGET_RSS_MB} MB: {'met' if r['peak_rss_mb'] <= TARGET_RSS_MB else 'MISSED'}"
        )
    return 0


if __name__ == "__main__":
    n, conc, level, seed = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    print(json.dumps(measure_one(n, conc, level, seed)))
