"""The shrinker against synthetic predicates: no engine, so the search itself
(minimality, memoization, budget, the schedule passes) is what is tested."""

from __future__ import annotations

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.repro.schedule import Schedule, Txn
from harness.repro.shrink import Step, ddmin, shrink_schedule


def core_test(core: set[int], calls: list[tuple[int, ...]] | None = None):
    def test(candidate: list[int]) -> bool:
        if calls is not None:
            calls.append(tuple(candidate))
        return core <= set(candidate)

    return test


def test_ddmin_finds_planted_core():
    assert ddmin(list(range(50)), core_test({3, 17})) == [3, 17]


def test_ddmin_keeps_order_and_objects():
    items = [f"x{i}" for i in range(20)]
    assert ddmin(items, lambda c: "x12" in c and "x4" in c) == ["x4", "x12"]


def test_ddmin_never_tests_a_candidate_twice_and_records_each_test():
    calls: list[tuple[int, ...]] = []
    recorded: list[tuple[tuple[int, ...], bool]] = []
    items = list(range(40))
    result = ddmin(items, core_test({5, 6, 30}, calls), record=lambda c, r: recorded.append((tuple(c), r)))
    assert result == [5, 6, 30]
    assert len(calls) == len(set(calls))
    assert tuple(items) not in calls  # the input is assumed to pass
    assert [c for c, _ in recorded] == calls
    assert all(r == ({5, 6, 30} <= set(c)) for c, r in recorded)


def test_ddmin_respects_min_size():
    calls: list[tuple[int, ...]] = []
    assert len(ddmin(list(range(30)), core_test(set(), calls), min_size=3)) == 3
    assert calls and all(len(c) >= 3 for c in calls)
    assert ddmin(list(range(30)), core_test({4, 20}), min_size=3) in ([4, 20, x] for x in range(30))
    # min_size 0 lets the empty list be tried; min_size 1 never does.
    assert ddmin([7], lambda c: True) == []
    calls.clear()
    assert ddmin([7], core_test(set(), calls), min_size=1) == [7]
    assert calls == []


def test_ddmin_budget_caps_tests_and_returns_smallest_passing():
    calls: list[tuple[int, ...]] = []
    result = ddmin(list(range(64)), core_test({1, 40}, calls), budget=5)
    assert len(calls) == 5
    passing = [c for c in calls if {1, 40} <= set(c)]
    assert {1, 40} <= set(result)
    assert len(result) == min([64, *map(len, passing)])
    assert ddmin(list(range(8)), core_test({2}), budget=0) == list(range(8))


def test_ddmin_trivial_inputs():
    assert ddmin([], lambda c: True) == []
    assert ddmin([1, 2], lambda c: True, min_size=2) == [1, 2]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_ddmin_returns_exactly_a_monotone_core(data):
    items = data.draw(st.lists(st.integers(-1000, 1000), max_size=40, unique=True))
    core = data.draw(st.sets(st.sampled_from(items))) if items else set()
    calls: list[tuple[int, ...]] = []
    test = core_test(core, calls)
    result = ddmin(items, test)
    assert result == [x for x in items if x in core]
    assert test(result)
    assert len(calls) - 1 == len(set(calls[:-1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 30), min_size=1, max_size=30), st.integers(0, 2**32 - 1), st.integers(0, 3))
def test_ddmin_result_passes_and_is_one_minimal(items, salt, min_size):
    # An arbitrary (non-monotone) predicate, fixed per candidate.
    def test(c: list[int]) -> bool:
        return c == items or hash((tuple(c), salt)) % 3 != 0

    result = ddmin(items, test, min_size=min_size)
    assert test(result)
    assert len(result) >= min(min_size, len(items))
    it = iter(items)
    assert all(x in it for x in result)  # a sublist, order kept
    if len(result) > min_size:
        for i in range(len(result)):
            smaller = result[:i] + result[i + 1 :]
            assert len(smaller) < min_size or not test(smaller)


def txn(op_id: str, f: str, value, read: int, commit: int | None) -> Txn:
    return Txn(op_id=op_id, f=f, value=value, outcome="ok", read_version=read, commit_version=commit)


def synthetic() -> Schedule:
    txns = [
        txn("0.3", "read", None, 1, None),
        txn("0.12", "optimize", {"z": 1}, 2, 4),
        txn("1.5", "insert", {"ids": [7, 42, 9, 13], "keys": ["a", "b", "c", "d"], "via": "sql"}, 2, 3),
        txn("1.9", "delete", {"ids": [1, 2]}, 3, 5),
        txn("2.6", "optimize", {"z": 2}, 3, 6),
        txn("2.8", "read", None, 5, None),
    ]
    setup = [[[i, f"r{i}"] for i in range(k, k + 4)] for k in (0, 10, 20)]
    return Schedule(
        engine="synthetic",
        workload="upsert",
        isolation="Serializable",
        table={},
        declaration={},
        base_version=2,
        setup=setup,
        txns=txns,
        anomaly={"kind": "lost-update"},
    )


def anomaly(s: Schedule) -> bool:
    ops = {t.op_id: t for t in s.txns}
    insert = ops.get("1.5")
    return (
        "0.12" in ops
        and "2.6" in ops
        and insert is not None
        and 42 in insert.value["ids"]
        and sum(1 for f in s.setup if f) >= 2
    )


def test_shrink_schedule_finds_the_minimal_schedule():
    original = synthetic()
    kept = copy.deepcopy(original.to_json())
    assert anomaly(original)
    seen: list[tuple[tuple[int, int, int], bool]] = []

    def predicate(s: Schedule) -> bool:
        seen.append((s.size(), anomaly(s)))
        return seen[-1][1]

    result, steps = shrink_schedule(original, predicate)
    assert [t.op_id for t in result.txns] == ["0.12", "1.5", "2.6"]
    assert len(result.setup) == 2 and all(len(f) == 1 for f in result.setup)
    insert = next(t for t in result.txns if t.op_id == "1.5")
    assert insert.value == {"ids": [42], "keys": ["b"], "via": "sql"}
    assert result.size() == (3, 2, 2)
    assert original.to_json() == kept  # the input is not mutated

    assert steps and all(isinstance(s, Step) for s in steps)
    assert [(s.size, s.reproduced) for s in steps] == seen
    assert any(not s.reproduced for s in steps)
    accepted = [s.size for s in steps if s.reproduced]
    assert accepted
    for x, y in zip(accepted, accepted[1:], strict=False):
        assert all(a >= b for a, b in zip(x, y, strict=True)), (x, y)
    assert any(s.what.startswith("drop txn(s) ") for s in steps)
    assert any(s.what.startswith("setup file ") for s in steps)
    assert any(s.what.startswith("txn 1.5: keep ") for s in steps)
    assert steps[0].to_json()["size"] == list(steps[0].size)


def test_shrink_schedule_records_time_per_test():
    ticks = iter(range(0, 10_000, 1))
    result, steps = shrink_schedule(synthetic(), anomaly, clock=lambda: float(next(ticks)))
    assert all(s.seconds == 1.0 for s in steps)


def test_shrink_schedule_budget():
    _, steps = shrink_schedule(synthetic(), anomaly, budget=4)
    assert len(steps) == 4


def test_shrink_schedule_flaky_predicate_keeps_the_original():
    calls = []

    def once(s: Schedule) -> bool:
        calls.append(s)
        return len(calls) == 1  # reproduced on the original run only

    original = synthetic()
    assert once(original)
    result, steps = shrink_schedule(original, once)
    assert result.to_json() == original.to_json()
    assert steps and not any(s.reproduced for s in steps)
    assert len(steps) == len(calls) - 1


def test_shrink_schedule_keeps_a_delete_range_whole():
    """A DELETE's [lo, hi] range is one argument: dropping an end would
    replay an op the run never issued (and one the workload cannot invoke)."""
    s = Schedule(
        engine="synthetic",
        workload="delete-insert",
        isolation="Serializable",
        table={},
        declaration={},
        base_version=0,
        setup=[],
        txns=[
            txn("0.1", "insert", {"ids": [5], "keys": [3], "via": "sql"}, 0, 1),
            txn("0.2", "delete", {"predicate": [0, 63], "where": "none"}, 0, 2),
        ],
        anomaly={"kind": "history-order"},
    )
    tried: list[Schedule] = []

    def both_txns(candidate: Schedule) -> bool:
        tried.append(candidate)
        return len(candidate.txns) == 2

    result, _ = shrink_schedule(s, both_txns)
    deletes = [t for c in tried for t in c.txns if t.f == "delete"]
    assert deletes and all(t.value["predicate"] == [0, 63] for t in deletes)
    assert result.txns[1].value == {"predicate": [0, 63], "where": "none"}
