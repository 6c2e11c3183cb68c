"""`delta-jepsen bench-checker`: the analysis of simulated histories, with
its stages, growth and targets (small sizes here; the figures come from
the large ones, outside the test suite)."""

from __future__ import annotations

import re

from tests.conftest import run_cli


def test_bench_checker_prints_stages_growth_and_targets() -> None:
    proc = run_cli("bench-checker", "--sizes", "2000,20000", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert re.search(r"^\s+20000\s+\d+\s+[\d.]+s\s+[\d.]+s\s+\d+\s+\d+ MB", out, re.M), out
    assert "stages: version order" in out and "dependency scan" in out, out
    assert re.search(r"growth: time per transaction at 20000 is [\d.]+x that at 2000", out), out
    assert re.search(r"target growth <= 1\.15x \(\d+ against \d+\): (met|MISSED) \(\d+\.\d+x\)", out), out
    # The machine's own speed, so figures from elsewhere can be read against it.
    assert re.search(r"this machine: a 5M-step Python loop takes [\d.]+ s of CPU, a 3-row parquet", out), out


def test_bench_checker_refuses_bad_sizes() -> None:
    proc = run_cli("bench-checker", "--sizes", "ten")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--sizes" in proc.stderr, proc.stderr
