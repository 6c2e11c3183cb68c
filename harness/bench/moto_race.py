"""bench-moto-race: how often moto lets two racing conditional writes both
win, as shipped and as harness/run/moto_main.py mends it.

moto's conditional writes check, then act, with no lock between: an S3 PUT
with ``If-None-Match: *`` looks the key up, then writes it; a DynamoDB
conditional update checks the item, then writes it. Two racers can both
pass the check. The window is a few bytecodes wide, so at CPython's default
GIL switch interval (5 ms) it is rarely hit; the server is started with a
small one (DJ_MOTO_SWITCH_INTERVAL, default 1 microsecond) to make the
threads switch inside it.

For each server (DJ_MOTO_AS_SHIPPED=1, then mended) this runs the store
probe's own racing properties (harness/run/store_probe.py): R rounds of N
racers, a fresh S3 key per round for put-if-absent, and a fresh coordinator
item per round for the commit coordinator's UpdateItem, which also reads
back whether hasAcceptedCommits came back as the BOOL it was sent.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.procs import ManagedProcess
from harness.run.moto_main import AS_SHIPPED_ENV, SWITCH_INTERVAL_ENV
from harness.run.storage import EMBEDDED_BUCKET, EMBEDDED_SECRET
from harness.run.storage import start_moto as start_moto_server
from harness.run.store_probe import (
    DYNAMODB_CONDITIONAL_UPDATE,
    PUT_IF_ABSENT,
    PropertyResult,
    StoreTarget,
    check_store,
)

START_TIMEOUT = 60.0
# Seconds of racing rounds per property at most: at a 1 microsecond switch
# interval moto serves a round of 8 racers in tens of milliseconds, so 1000
# rounds fit many times over; a wedged server ends the bench instead.
RACE_BUDGET = 1200.0
AS_SHIPPED = "as shipped"
MENDED = "mended"
STORES = ((PUT_IF_ABSENT, "S3"), (DYNAMODB_CONDITIONAL_UPDATE, "DynamoDB"))


def start_moto(
    log_path: str | os.PathLike[str],
    env: dict[str, str],
    argv: list[str] | None = None,
    start_timeout: float = START_TIMEOUT,
) -> tuple[ManagedProcess, str]:
    """moto's server for the race (harness.run.storage.start_moto), and its
    endpoint. The launcher's settings come from `env` alone: a caller's
    as-shipped or switch-interval setting must not leak into a server the
    bench calls mended (an empty value is no setting)."""
    own = {AS_SHIPPED_ENV: "", SWITCH_INTERVAL_ENV: "", **env}
    server, port = start_moto_server("moto_server", log_path, start_timeout, own, argv)
    return server, f"http://127.0.0.1:{port}"


@dataclass
class Raced:
    moto: str  # AS_SHIPPED or MENDED
    seconds: float
    properties: dict[str, PropertyResult]  # by property name


def race_moto(
    as_shipped: bool, switch_interval: float, rounds: int, racers: int, log_path: Path, quiet: bool = False
) -> Raced:
    env = {SWITCH_INTERVAL_ENV: repr(switch_interval)}
    if as_shipped:
        env[AS_SHIPPED_ENV] = "1"
    label = AS_SHIPPED if as_shipped else MENDED
    server, endpoint = start_moto(log_path, env)
    try:
        target = StoreTarget(endpoint, EMBEDDED_BUCKET, access_key="dj-bench", secret_key=EMBEDDED_SECRET)
        target.client(1).create_bucket(Bucket=EMBEDDED_BUCKET)
        check = check_store(
            target,
            rounds=rounds,
            concurrency=(racers,),
            tries=1,
            budget=RACE_BUDGET,
            dynamodb=True,
            progress=None if quiet else (lambda m: print(f"bench-moto-race: moto {label}: {m}", file=sys.stderr)),
        )
    finally:
        server.stop()
    return Raced(label, check.seconds, {p.name: p for p in check.properties})


def _bool_cell(p: PropertyResult | None, store: str) -> str:
    if store != DYNAMODB_CONDITIONAL_UPDATE:
        return "n/a"
    if p is None:
        return "?"
    kept, lost = p.counts.get("bool_kept", 0), p.counts.get("not_bool", 0)
    return f"{'yes' if kept and not lost else 'no'} ({kept}/{kept + lost})"


def render(raced: list[Raced], rounds: int, racers: int, switch_interval: float) -> str:
    import moto

    cols = [r.moto for r in raced]
    head = f"{'':10}" + "".join(f"  {c:<36}" for c in cols)
    sub = f"{'store':10}" + "  {:>6}  {:>9}  {:<17}".format("rounds", ">1 winner", "BOOL kept as BOOL") * len(cols)
    lines = [
        f"bench-moto-race: {rounds} rounds of {racers} racers per store; the server's GIL switch interval "
        f"{switch_interval:g} s; moto {moto.__version__}",
        head.rstrip(),
        sub.rstrip(),
    ]
    for name, store in STORES:
        row = f"{store:10}"
        for r in raced:
            p = r.properties.get(name)
            done = p.counts.get("rounds", 0) if p else 0
            several = p.counts.get("several_winners", 0) if p else 0
            row += f"  {done:>6}  {several:>9}  {_bool_cell(p, name):<17}"
        lines.append(row.rstrip())
    lines.append("seconds   " + "".join(f"  {r.seconds:<36.1f}" for r in raced).rstrip())
    for r in raced:
        for name, _ in STORES:
            p = r.properties.get(name)
            if p is not None and p.passed is not True:
                lines.append(f"moto {r.moto}, {name}: {p.detail}")
    return "\n".join(lines)


def mends_hold(raced: list[Raced]) -> bool:
    """Whether the mended server gave every round exactly one winner and
    kept every BOOL."""
    mended = next(r for r in raced if r.moto == MENDED)
    return all(p.passed is True for p in mended.properties.values())


def bench_moto_race(rounds: int, racers: int, switch_interval: float) -> int:
    if racers < 2:
        raise HarnessError("--racers must be >= 2")
    with tempfile.TemporaryDirectory(prefix="dj-bench-moto-race-") as tmp:
        raced = [
            race_moto(shipped, switch_interval, rounds, racers, Path(tmp) / f"moto-{i}.log")
            for i, shipped in enumerate((True, False))
        ]
    print(render(raced, rounds, racers, switch_interval))
    if mends_hold(raced):
        print("verdict: mended moto had exactly one winner in every round and kept every BOOL")
        return 0
    print("verdict: the mends did NOT hold (see the lines above)")
    return 1
