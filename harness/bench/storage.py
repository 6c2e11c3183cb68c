"""bench-storage: the same run on each store, side by side.

Each (engine, workload) runs on a local directory, on embedded moto S3 and
on embedded SeaweedFS, one after another in this process's session (so all
see the same machine load), through the `run` command a user types. The
figure is the run's own ops/s (completed ops over the workload's seconds,
as the summary prints it), and each store's ratio to the local directory.
A pair the harness refuses is shown as such. `--profile` adds, per cell, each
S3 store behind the fault proxy, timing the store (see s3profile.py).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.bench.s3profile import PROFILE_HEADER, profile_lines, profile_of, rate_text, ratio_text
from harness.run.moto_main import AS_SHIPPED_ENV

STORAGES = ("local", "s3", "seaweedfs")
LABEL = {"local": "local", "s3": "moto", "seaweedfs": "seaweedfs"}
RUN_TIMEOUT_S = 900.0


def one_run(
    engine: str,
    workload: str,
    storage: str,
    seconds: float,
    concurrency: int,
    root: Path,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> tuple[float | str, Path | None]:
    """One `run` as a user types it: (its ops/s, or why there is none; its run folder)."""
    out = root / f"{engine}-{workload}-{storage}"
    cmd = [
        sys.executable,
        "-m",
        "harness.cli",
        "run",
        "--engine",
        engine,
        "--workload",
        workload,
        "--storage",
        storage,
        "--concurrency",
        str(concurrency),
        "--time-limit",
        str(seconds),
        "--results-dir",
        str(out),
        "--no-progress",
        *(extra or []),
    ]
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env={**os.environ, **(env or {})}
        )
    except subprocess.TimeoutExpired:
        return "timed out", None
    if p.returncode == 2:
        return "refused", None
    runs = sorted(out.glob("*/*/results.json"))
    if not runs:
        return f"no run (exit {p.returncode})", None
    doc = json.loads(runs[-1].read_text())
    rate = (doc.get("history") or {}).get("ops_per_s")
    return (float(rate) if rate else "no ops"), runs[-1].parent


def bench_storage(
    engines: list[str], workloads: list[str], seconds: float, concurrency: int, repeat: int, profile: bool = False
) -> int:
    print(
        f"bench-storage: {seconds:g} s runs at concurrency {concurrency}, {repeat} per cell, "
        f"stores {', '.join(LABEL[s] for s in STORAGES)}; ops/s (median) and the ratio to local"
    )
    header = f"  {'engine':<12} {'workload':<14}" + "".join(f" {LABEL[s]:>10}" for s in STORAGES)
    header += "".join(f" {LABEL[s] + '/local':>16}" for s in STORAGES[1:])
    print(header)
    with tempfile.TemporaryDirectory(prefix="dj-bench-storage-") as tmp:
        for engine in engines:
            for workload in workloads:
                cells: dict[str, float | str] = {}
                for storage in STORAGES:
                    got = [
                        one_run(engine, workload, storage, seconds, concurrency, Path(tmp) / f"r{i}")[0]
                        for i in range(repeat)
                    ]
                    rates = [g for g in got if isinstance(g, float)]
                    cells[storage] = statistics.median(rates) if rates else str(got[0])
                base = cells["local"]
                line = f"  {engine:<12} {workload:<14}"
                line += "".join(f" {rate_text(c):>10}" for c in cells.values())
                for s in STORAGES[1:]:
                    c = cells[s]
                    line += f" {ratio_text(c, base):>16}"
                print(line, flush=True)
                if profile:
                    _print_profile(engine, workload, seconds, concurrency, Path(tmp) / "profile", cells)
    return 0


def _print_profile(
    engine: str, workload: str, seconds: float, concurrency: int, root: Path, direct: dict[str, float | str]
) -> None:
    """Each embedded store once more, behind the proxy that times the store."""
    # moto with its per-request backend lookup as shipped (harness/run/moto_main.py).
    shipped, _ = one_run(engine, workload, "s3", seconds, concurrency, root, env={AS_SHIPPED_ENV: "1"})
    ratio = ratio_text(direct["s3"], shipped)
    print(f"    moto as shipped: {rate_text(shipped)} ops/s; the harness's moto does {ratio}x that")
    print(PROFILE_HEADER)
    for storage in STORAGES[1:]:
        rate, run_dir = one_run(engine, workload, storage, seconds, concurrency, root, ["--s3-proxy"])
        prof = profile_of(run_dir) if run_dir is not None else None
        for line in profile_lines(LABEL[storage], rate, direct[storage], prof):
            print(line, flush=True)
