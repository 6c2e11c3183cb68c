"""bench-check: a full `delta-jepsen check` of a stored run, timed.

For each size, one process writes a stored run folder from a simulated
history (harness.bench.synth_run: real Delta JSON commits, checkpoints every
100 commits and parquet data files, a table of one row per 10 commits, at most KEYS;
timed separately as the generation), then a fresh process times
``check_run`` on it end to end, to the Report it returns: read the log and
every data file, load history.jsonl, run the spec's checkers (log-sanity,
serializability), write results.json, summary.txt and report.html. Peak RSS
is that process's alone; CPU time is its own and its reader processes'.
Targets: 100k commits checked in at most 10 s and under 1 GB, 1M commits in
under 2 minutes.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.bench.machine import speed, speed_line
from harness.bench.synth_run import write_run
from harness.check.pipeline import check_run
from harness.deltalog import _pool

# Rows of the simulated table: one per 10 commits (the simulator's own
# choice) up to KEYS, and no more however long the run: a workload's key
# space is its own, not the run's (and a table growing with the run would
# make every checkpoint bigger, the log's bytes quadratic in its length).
KEYS = 10_000


def keys(commits: int) -> int:
    return min(KEYS, max(64, commits // 10))


# (commits, seconds, MB or None): judged when a run of exactly that many commits ran.
TARGETS = ((100_000, 10.0, 1024), (1_000_000, 120.0, None))


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def generate_one(run_dir: str, commits: int, concurrency: int, seed: int) -> dict:
    t0 = time.perf_counter()
    info = write_run(run_dir, commits, commits=commits, concurrency=concurrency, seed=seed, n_keys=keys(commits))
    return {
        "generate_s": round(time.perf_counter() - t0, 2),
        "versions": info.versions,
        "committed": info.committed,
        "failed": info.failed,
        "data_files": info.data_files,
        "checkpoints": info.checkpoints,
        "bytes": _dir_size(Path(run_dir)),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def measure_one(run_dir: str, profile: str | None = None) -> dict:
    t0 = time.perf_counter()
    if profile:
        import cProfile

        prof = cProfile.Profile()
        report = prof.runcall(check_run, run_dir)
        prof.dump_stats(profile)
    else:
        report = check_run(run_dir)
    elapsed = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    _pool.stop_process_pool()  # the reader processes end, so their CPU time is counted below
    readers = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "check_s": round(elapsed, 2),
        "cpu_s": round(me.ru_utime + me.ru_stime, 2),
        "reader_cpu_s": round(readers.ru_utime + readers.ru_stime, 2),
        "reader_sys_s": round(readers.ru_stime, 2),
        # What the page cache did not hold: a long run's files are read from
        # disk in part or in full, and that decides much of the time.
        "disk_read_mb": round((me.ru_inblock + readers.ru_inblock) * 512 / 2**20),
        "stage_s": report.stage_s,
        "verdict": report.verdict.value,
        "checkers": {r.checker: r.verdict.value for r in report.results},
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def _data_files(run_dir: Path) -> int:
    with os.scandir(run_dir / "table") as it:
        return sum(1 for e in it if e.name.endswith(".parquet"))


def _child(args: list[str], timeout: float) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "harness.bench.check", *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(tail)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def bench_check(
    sizes: list[int], concurrency: int = 8, seed: int = 1, keep_dir: str | None = None, profile: str | None = None
) -> int:
    print(
        f"bench-check: `delta-jepsen check` of stored simulated runs (concurrency {concurrency}, seed {seed}, "
        f"{os.cpu_count()} CPUs)"
    )
    machine = speed()
    print(speed_line(machine))
    root = Path(keep_dir) if keep_dir else Path(tempfile.mkdtemp(prefix="dj-bench-check-"))
    root.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for n in sizes:
            run_dir = root / f"run-{n}-c{concurrency}-s{seed}-k{keys(n)}"
            if (run_dir / "history.jsonl").is_file() and (run_dir / "spec.json").is_file():
                gen = {"reused": True, "versions": len(list((run_dir / "table" / "_delta_log").glob("*.json")))}
                print(f"  {n} commits: reusing {run_dir}")
            else:
                if run_dir.exists():
                    shutil.rmtree(run_dir)
                try:
                    gen = _child(["generate", str(run_dir), str(n), str(concurrency), str(seed)], 3600)
                except (RuntimeError, subprocess.TimeoutExpired) as e:
                    print(f"  {n} commits: generation failed: {e}")
                    return 2
                print(
                    f"  {n} commits: generated in {gen['generate_s']:.1f} s: {gen['versions']} versions "
                    f"({gen['committed']} transactions committed, {gen['failed']} failed), {gen['data_files']} "
                    f"data files, {gen['checkpoints']} checkpoints, {gen['bytes'] / 2**20:.0f} MiB "
                    f"(generator peak RSS {gen['peak_rss_mb']} MB)"
                )
            try:
                m = _child(["measure", str(run_dir), *([f"{profile}.{n}"] if profile else [])], 3600)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"  {n} commits: check failed: {e}")
                return 2
            rows.append((n, {**gen, "run_dir": run_dir}, m))
            print(
                f"  {n} commits: check {m['check_s']:.1f} s end to end (load history, read log, read every data "
                f"file, {', '.join(m['checkers'])}, write results.json); peak RSS {m['peak_rss_mb']} MB; "
                f"verdict {m['verdict']}"
            )
            print("    stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in m["stage_s"].items()))
            print(
                f"    CPU: {m['cpu_s']:.1f} s in the checking process, {m['reader_cpu_s']:.1f} s in its reader "
                f"processes ({m['reader_sys_s']:.1f} s of it in the kernel; "
                f"{(m['cpu_s'] + m['reader_cpu_s']) / m['check_s']:.2f} cores busy on average); "
                f"{m['disk_read_mb']:,} MB read from disk, the rest from the page cache"
            )
    finally:
        if not keep_dir:
            shutil.rmtree(root, ignore_errors=True)
    if len(rows) > 1:
        (n0, _, m0), (n1, _, m1) = rows[0], rows[-1]
        growth = (m1["check_s"] / m0["check_s"]) / (n1 / n0) if m0["check_s"] else float("nan")
        print(f"  growth: time per commit at {n1} is {growth:.2f}x that at {n0} (1.00 = linear)")
    for commits, seconds, mb in TARGETS:
        hit = [r for r in rows if r[0] == commits]
        if not hit:
            continue
        run_dir, m = hit[-1][1]["run_dir"], hit[-1][2]
        fast = m["check_s"] <= seconds
        line = (
            f"  target {commits:,} commits in <= {seconds:.0f} s: {'met' if fast else 'MISSED'} ({m['check_s']:.1f} s"
        )
        if not fast:
            # What this machine cannot go below: every data file is decoded
            # (its rows are what a transaction wrote), at the reader
            # processes' speed measured above, on every core at once.
            files = _data_files(run_dir)
            floor = files * machine["reader_decode_us"] / 1e6 / (os.cpu_count() or 1)
            line += f"; decoding its {files:,} data files alone takes >= {floor:.1f} s on this machine's cores"
            if m["disk_read_mb"] >= 1024:
                # A file the page cache does not hold costs the kernel tens
                # of microseconds to read here: millions of them, minutes.
                line += f"; {m['disk_read_mb']:,} MB read from disk, not from the page cache"
        line += ")"
        if mb is not None:
            line += f"; < {mb} MB: {'met' if m['peak_rss_mb'] < mb else 'MISSED'} ({m['peak_rss_mb']} MB)"
        print(line)
    bad = [r for r in rows if r[2]["verdict"] != "valid"]
    if bad:
        print(f"  verdict not valid for {', '.join(str(r[0]) for r in bad)}: the generator or a checker is wrong")
        return 1
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "generate":
        out = generate_one(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "measure":
        out = measure_one(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    else:
        raise SystemExit(f"unknown command {cmd!r}")
    print(json.dumps(out))
