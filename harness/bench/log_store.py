"""bench-log-store: the default run under each of delta-spark's commit
protocols, side by side.

Each repetition runs `delta-jepsen run` as a user types it (delta-spark, 2
clusters, embedded S3, append, 30 s, concurrency 4), once per `--log-store`,
the protocols taking turns so that all see the same machine load. Printed:
each run's verdict and ops/s, then per protocol how many runs were valid
and the median ops/s, and each protocol's ratio to the first one's.
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from harness.bench.storage import one_run

DEFAULT_LOG_STORES = ("coordinated", "single-driver")


def bench_log_store(log_stores: list[str], repeat: int, seconds: float, concurrency: int, nodes: int) -> int:
    rates: dict[str, list[float]] = {s: [] for s in log_stores}
    verdicts: dict[str, list[str]] = {s: [] for s in log_stores}
    with tempfile.TemporaryDirectory(prefix="dj-bench-log-store-") as tmp:
        root = Path(tmp)
        for i in range(repeat):
            for store in log_stores:
                rate, run_dir = one_run(
                    "delta-spark",
                    "append",
                    "s3",
                    seconds,
                    concurrency,
                    root / f"{i}",
                    extra=["--log-store", store, "--nodes", str(nodes)],
                )
                verdict = _verdict(run_dir)
                verdicts[store].append(verdict)
                if isinstance(rate, float):
                    rates[store].append(rate)
                shown = f"{rate:.2f} ops/s" if isinstance(rate, float) else rate
                print(f"run {i + 1}/{repeat} {store:<14} {verdict:<30} {shown}", flush=True)
    print()
    print(f"{'--log-store':<14} {'runs':>4} {'valid':>5} {'median ops/s':>13} {'ratio':>6}")
    base = statistics.median(rates[log_stores[0]]) if rates[log_stores[0]] else None
    for store in log_stores:
        median = statistics.median(rates[store]) if rates[store] else None
        valid = sum(1 for v in verdicts[store] if v.startswith("valid"))
        ratio = f"{median / base:.2f}" if median and base else "-"
        shown = f"{median:.2f}" if median is not None else "-"
        print(f"{store:<14} {len(verdicts[store]):>4} {valid:>5} {shown:>13} {ratio:>6}")
    return 0


def _verdict(run_dir: Path | None) -> str:
    """The run's verdict, with "(outside contract)" where it says so."""
    if run_dir is None:
        return "no run"
    doc = json.loads((run_dir / "results.json").read_text())
    outside = " (outside contract)" if not (doc.get("contract") or {}).get("inside", True) else ""
    return f"{doc.get('verdict')}{outside}"


__all__ = ["DEFAULT_LOG_STORES", "bench_log_store"]
