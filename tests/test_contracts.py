"""Contract tests per extension point: every registered workload
and nemesis gets them, a new one for free.

- Workload: the seed alone fixes the op stream; every op round-trips
  through the history file unchanged; the checkers it declares exist; its
  table declaration round-trips through spec.json's form.
- Nemesis: start, stop and heal on a cluster of real processes and the real
  S3 fault proxy; heal is idempotent and leaves nothing armed: no proxy
  rule, no stopped process, no node environment.

The engine contract is tests/test_engine_contract.py (it starts engines).
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from checkers import CHECKERS
from harness.core.history import INVOKE, HistoryWriter, load_history
from harness.core.table import TableSpec
from harness.run.storage import EmbeddedS3
from harness.s3proxy.client import start_proxy
from nemeses import NEMESIS_NAMES, make_nemeses
from nemeses.base import Nemesis, NemesisContext, NemesisError
from tests.test_nemeses import FakeCluster
from tests.test_op_streams import _fixed_clock
from workloads import WORKLOAD_NAMES, make_workload
from workloads.append import AppendWorkload
from workloads.base import OpSpec, SlotGenerator, Workload

OPS = 40


def _ops(name: str, seed: int, make: Callable[[str, int], Workload] = make_workload) -> list[dict[str, Any]]:
    with _fixed_clock():
        w = make(name, seed)
        out = [op.to_json() for op in w.setup_ops(SlotGenerator(seed, "setup"))]
        for slot in range(2):
            gen = SlotGenerator(seed, slot)
            out += [w.next_op(gen).to_json() for _ in range(OPS)]
            out += [op.to_json() for op in w.final_ops(gen)]
    return out


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_workload_op_stream_is_a_function_of_the_seed(name: str) -> None:
    a, b = _ops(name, 5), _ops(name, 5)
    assert a == b
    # create-race draws nothing at random: its rounds follow the clock.
    if name != "create-race":
        assert _ops(name, 6) != a, "another seed gave the same stream: the seed reaches nothing"


class _UnseededAppend(AppendWorkload):
    """Draws its batch sizes from the global RNG, not the slot's."""

    def next_op(self, gen: SlotGenerator) -> OpSpec:
        return OpSpec("append", gen.next_id(), {"ids": list(range(random.randint(1, 1000)))})


def test_the_workload_contract_catches_a_stream_the_seed_does_not_fix() -> None:
    def make(name: str, seed: int) -> Workload:
        return _UnseededAppend(seed, None)

    assert _ops("append", 5, make) != _ops("append", 5, make)


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_workload_ops_round_trip_through_the_history(name: str, tmp_path: Path) -> None:
    ops = _ops(name, 11)
    writer = HistoryWriter(tmp_path / "history.jsonl")
    for op in ops:
        writer.record(process=0, type=INVOKE, f=op["f"], id=op["id"], value=op["value"])
    writer.close()
    back = [{"f": e.f, "id": e.id, "value": e.value} for e in load_history(tmp_path / "history.jsonl").events]
    assert back == json.loads(json.dumps(ops))
    assert len({op["id"] for op in ops}) == len(ops), "op ids repeat"


@pytest.mark.parametrize("name", WORKLOAD_NAMES)
def test_workload_declares_checkers_that_exist_and_a_table_that_round_trips(name: str) -> None:
    w = make_workload(name, 1)
    assert w.checkers and set(w.checkers) <= set(CHECKERS), set(w.checkers) - set(CHECKERS)
    table = w.table()
    assert TableSpec.from_json(json.loads(json.dumps(table.to_json()))) == table
    assert set(table.partition_by) <= set(table.column_names())
    assert all(not g.startswith("/") and ".." not in g for g in w.related_tables)


# -- nemeses ---------------------------------------------------------------------


@pytest.fixture
def proxy(tmp_path: Path):
    # Rules are armed and listed on the proxy's control API: no upstream
    # request is made, so the upstream need not answer.
    p = start_proxy("http://127.0.0.1:9", tmp_path / "proxy.log", seed=1)
    yield p.control
    p.stop()


def _armed(cluster: FakeCluster, proxy: Any) -> list[str]:
    out = [f"proxy rule {r['kind']}" for r in proxy.faults()]
    out += [f"hold {h['id']}" for h in proxy.holds()]
    procs = [*cluster.procs.values(), *([cluster.server] if cluster.server is not None else [])]
    out += [f"pid {p.pid} stopped" for p in procs if psutil.Process(p.pid).status() == psutil.STATUS_STOPPED]
    out += [f"node env {n}" for n in cluster.env]
    return out


def nemesis_contract(nem: Nemesis, cluster: FakeCluster, proxy: Any) -> list[str]:
    """What the nemesis breaks of its contract (empty: nothing)."""
    ctx = NemesisContext(random.Random(3), cluster, proxy, "s3", fault_seconds=2.0, target_ops=frozenset({"vacuum"}))
    try:
        started = nem.start(ctx)
    except NemesisError as e:
        return [f"could not start on a cluster with clients and a server node: {e}"]
    broken = [] if isinstance(started, dict) else [f"start returned {started!r}"]
    stopped = nem.stop(ctx)
    broken += [] if isinstance(stopped, dict) else [f"stop returned {stopped!r}"]
    broken += [f"stop left {a}" for a in _armed(cluster, proxy)]
    # Heal mid-fault, twice: the second finds nothing to undo.
    nem.start(ctx)
    nem.heal(ctx)
    broken += [f"heal left {a}" for a in _armed(cluster, proxy)]
    again = nem.heal(ctx)
    broken += [f"a second heal undid {again}: the first was not complete"] if again else []
    return broken + [f"the second heal left {a}" for a in _armed(cluster, proxy)]


# Nemeses that act on a request only once one passes: they need traffic.
NEEDS_TRAFFIC = {"kill-after-ratify"}


@pytest.mark.parametrize("name", [n for n in NEMESIS_NAMES if n != "none" and n not in NEEDS_TRAFFIC])
def test_nemesis_start_stop_heal(name: str, proxy: Any) -> None:
    cluster = FakeCluster(with_server=True)
    try:
        (nem,) = make_nemeses([name], "s3")
        assert nemesis_contract(nem, cluster, proxy) == []
    finally:
        cluster.close()


@contextmanager
def _ratifying(tmp_path: Path, node: str) -> Iterator[Any]:
    """The proxy in front of a real moto, and node `node` sending a commit
    coordinator's ratifying UpdateItems through it, one after another, until
    the block ends."""
    import boto3
    from botocore.config import Config

    store = EmbeddedS3(tmp_path / "moto.log")
    p = start_proxy(store.endpoint, tmp_path / "proxy.log", seed=1)
    client = boto3.client(
        "dynamodb",
        endpoint_url=p.endpoint,
        region_name="us-east-1",
        aws_access_key_id=f"dj-{node}",
        aws_secret_access_key="x",
        config=Config(connect_timeout=2, read_timeout=5, retries={"total_max_attempts": 1}),
    )
    client.create_table(
        TableName="t",
        KeySchema=[{"AttributeName": "tableId", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "tableId", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    done = threading.Event()

    def ratify() -> None:
        while not done.is_set():
            try:
                client.update_item(
                    TableName="t",
                    Key={"tableId": {"S": "x"}},
                    AttributeUpdates={"commits": {"Action": "ADD", "Value": {"L": [{"N": "1"}]}}},
                )
            except Exception:  # noqa: BLE001 - a dropped answer is what the nemesis does
                pass
            done.wait(0.05)

    t = threading.Thread(target=ratify, daemon=True)
    t.start()
    try:
        yield p.control
    finally:
        done.set()
        t.join(10)
        p.stop()
        store.stop()


@pytest.mark.parametrize("name", sorted(NEEDS_TRAFFIC))
def test_nemesis_start_stop_heal_on_traffic(name: str, tmp_path: Path) -> None:
    cluster = FakeCluster(with_server=True)
    try:
        (nem,) = make_nemeses([name], "s3")
        with _ratifying(tmp_path, cluster.server_nodes()[0]) as proxy:
            assert nemesis_contract(nem, cluster, proxy) == []
            assert cluster.restarts, "the killed node was not started again"
    finally:
        cluster.close()


class _LeakyLatency(Nemesis):
    """Arms a proxy rule on start; stop and heal forget it."""

    name = "leaky"

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        assert ctx.proxy is not None
        return {"rule": ctx.proxy.add_fault("latency", ms=10)}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        return {}


def test_the_nemesis_contract_catches_a_fault_left_armed(proxy: Any) -> None:
    cluster = FakeCluster(with_server=True)
    try:
        broken = nemesis_contract(_LeakyLatency(), cluster, proxy)
    finally:
        cluster.close()
    assert broken and broken[0] == "stop left proxy rule latency", broken
