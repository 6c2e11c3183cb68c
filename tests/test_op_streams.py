"""Op streams are a function of the seed alone, and stay byte-identical
across refactors: each workload's setup, client and final ops for fixed
seeds, with its table declaration, hashed against a golden file recorded
before the code was moved.

Set DJ_UPDATE_OP_STREAMS=1 to rewrite the golden file, only for a change
that is meant to alter what the workloads generate."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from workloads import WORKLOAD_NAMES, make_workload
from workloads.base import SlotGenerator

GOLDEN = Path(__file__).parent / "fixtures" / "op_streams.json"
SEEDS = (1, 20261123)
SLOTS = 3
OPS_PER_SLOT = 60


class _Clock:
    """create-race paces its rounds by the wall clock (and records each
    round's start in its ops): on this clock, time passes only by sleeping."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


@contextlib.contextmanager
def _fixed_clock():
    import workloads.create_race as create_race

    real = create_race.time
    create_race.time = _Clock()  # type: ignore[assignment]
    try:
        yield
    finally:
        create_race.time = real


def _stream(name: str, seed: int) -> dict[str, Any]:
    with _fixed_clock():
        return _stream_at(name, seed)


def _stream_at(name: str, seed: int) -> dict[str, Any]:
    w = make_workload(name, seed)
    setup = SlotGenerator(seed, "setup")
    out: dict[str, Any] = {
        "table": w.table().to_json(),
        "checkers": list(w.checkers),
        "row_key": w.row_key,
        "predicate_column": w.predicate_column,
        "setup": [op.to_json() for op in w.setup_ops(setup)],
    }
    for slot in range(SLOTS):
        gen = SlotGenerator(seed, slot)
        out[f"slot-{slot}"] = [w.next_op(gen).to_json() for _ in range(OPS_PER_SLOT)]
        out[f"final-{slot}"] = [op.to_json() for op in w.final_ops(gen)]
    return out


def _digest(name: str, seed: int) -> str:
    text = json.dumps(_stream(name, seed), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _all() -> dict[str, str]:
    return {f"{name}/{seed}": _digest(name, seed) for name in WORKLOAD_NAMES for seed in SEEDS}


def test_op_streams_are_as_recorded() -> None:
    got = _all()
    if os.environ.get("DJ_UPDATE_OP_STREAMS") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    want = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in want if got.get(k) != want[k])
    assert set(got) == set(want), ("workloads added or removed: update the golden file", sorted(set(got) ^ set(want)))
    assert changed == [], f"op streams changed for {changed}"


@pytest.fixture(scope="module")
def elsewhere() -> dict[str, str]:
    """Each workload's seed-1 digest from another interpreter, with another
    hash seed: what the stream depends on besides the seed (hash order,
    process state) shows as a difference."""
    code = "import json, tests.test_op_streams as t; print(json.dumps({n: t._digest(n, 1) for n in t.WORKLOAD_NAMES}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_an_op_stream_depends_only_on_the_seed(name: str, elsewhere: dict[str, str]) -> None:
    assert _digest(name, 1) == elsewhere[name]
    if name != "create-race":  # its rounds draw nothing at random
        assert _digest(name, 1) != _digest(name, 2)
