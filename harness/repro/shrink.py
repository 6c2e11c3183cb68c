"""Shrinking a reproduction schedule while its anomaly still reproduces.

Every test is a full replay against a real engine, so tests are the cost that
matters: ddmin memoizes what it has tried, never retests the input it was given
(the caller has already seen it reproduce), and stops at a budget. The module
is pure (no engine, no I/O) so the search itself is tested with cheap
synthetic predicates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from harness.repro.schedule import Schedule

T = TypeVar("T")


def ddmin(
    items: list[T],
    test: Callable[[list[T]], bool],
    *,
    min_size: int = 0,
    record: Callable[[list[T], bool], None] | None = None,
    budget: int | None = None,
) -> list[T]:
    """Zeller's delta debugging: a 1-minimal sublist of `items` (order kept)
    for which `test` holds, assuming `test(items)` does.

    1-minimal means dropping any single remaining item makes `test` fail (or
    the list shorter than `min_size`, which is never tested: a schedule without
    transactions is not a reproduction). Candidates are memoized by their
    indices, so `test` and `record` run once per distinct candidate. With a
    `budget`, at most that many tests run; the result is then the smallest
    passing candidate met so far, which is always the current one.
    """
    current = list(range(len(items)))
    seen: dict[tuple[int, ...], bool] = {tuple(current): True}
    spent = 0

    def passes(idx: list[int]) -> bool:
        nonlocal spent
        key = tuple(idx)
        if key not in seen:
            candidate = [items[i] for i in idx]
            result = bool(test(candidate))
            spent += 1
            seen[key] = result
            if record is not None:
                record(candidate, result)
        return seen[key]

    def exhausted() -> bool:
        return budget is not None and spent >= budget

    n = 2
    while current and len(current) > min_size and not exhausted():
        n = min(n, len(current))
        step, extra = divmod(len(current), n)
        chunks, at = [], 0
        for k in range(n):
            size = step + (1 if k < extra else 0)
            chunks.append(current[at : at + size])
            at += size
        # Reduce to a chunk first (the big win), then to a complement.
        moved = False
        if n >= 2 and step >= min_size:
            for chunk in chunks:
                if len(chunk) >= min_size and not exhausted() and passes(chunk):
                    current, n, moved = chunk, 2, True
                    break
        if not moved:
            for k in range(n):
                rest = [i for j, c in enumerate(chunks) if j != k for i in c]
                if len(rest) >= min_size and not exhausted() and passes(rest):
                    current, n, moved = rest, max(n - 1, 2), True
                    break
        if not moved:
            if n >= len(current):
                break  # every single-item removal failed: 1-minimal
            n = min(len(current), 2 * n)
    return [items[i] for i in current]


@dataclass
class Step:
    """One replay the shrinker made: what it tried, the size of the candidate
    (txns, setup files, rows), whether the anomaly came back, and its cost."""

    what: str
    size: tuple[int, int, int]
    reproduced: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["size"] = list(self.size)
        return d


def _listing(xs: list[Any], limit: int = 8) -> str:
    shown = ", ".join(str(x) for x in xs[:limit])
    return shown + (f" and {len(xs) - limit} more" if len(xs) > limit else "")


# List-valued op arguments that are one value, not a list of items: a
# DELETE's [lo, hi] key range loses its meaning with an end removed.
NOT_ITEMS = frozenset({"predicate"})


def _parallel_groups(value: Any) -> list[list[str]]:
    """The list-valued fields of an op's value, grouped by length: lists of
    one length are taken to be parallel (ids[i] goes with keys[i])."""
    if not isinstance(value, dict):
        return []
    by_len: dict[int, list[str]] = {}
    for name, v in value.items():
        if isinstance(v, list) and name not in NOT_ITEMS:
            by_len.setdefault(len(v), []).append(name)
    return [names for n, names in sorted(by_len.items()) if n > 1]


def shrink_schedule(
    schedule: Schedule,
    reproduces: Callable[[Schedule], bool],
    *,
    budget: int = 200,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Schedule, list[Step]]:
    """The smallest schedule found that still reproduces, and every test made.

    Passes, coarse to fine: transactions, whole setup files, rows within each
    setup file, then the parallel list arguments of each transaction. Removing
    something in a later pass can make an earlier one able to remove more (a
    row that mattered only to a dropped txn), so rounds repeat until one
    changes nothing or `budget` tests are spent. `schedule` itself is assumed
    to reproduce and is not replayed again.
    """
    steps: list[Step] = []
    best = schedule

    def left() -> int:
        return budget - len(steps)

    def attempt(candidate: Schedule, what: str) -> bool:
        start = clock()
        ok = bool(reproduces(candidate))
        steps.append(Step(what, candidate.size(), ok, clock() - start))
        return ok

    def pass_txns() -> None:
        nonlocal best
        base = best

        def test(kept: list[int]) -> bool:
            dropped = [t.op_id for i, t in enumerate(base.txns) if i not in kept]
            return attempt(base.with_txns([base.txns[i] for i in kept]), f"drop txn(s) {_listing(dropped)}")

        kept = ddmin(list(range(len(base.txns))), test, min_size=1, budget=left())
        best = best.with_txns([base.txns[i] for i in kept])

    def pass_files() -> None:
        nonlocal best
        base = best

        def test(kept: list[int]) -> bool:
            dropped = [i for i in range(len(base.setup)) if i not in kept]
            return attempt(base.with_setup([base.setup[i] for i in kept]), f"drop setup file(s) {_listing(dropped)}")

        kept = ddmin(list(range(len(base.setup))), test, min_size=0, budget=left())
        best = best.with_setup([base.setup[i] for i in kept])

    def pass_rows(f: int) -> None:
        nonlocal best
        base = best
        rows = base.setup[f]

        def with_rows(kept: list[int]) -> Schedule:
            return base.with_setup([*base.setup[:f], [rows[i] for i in kept], *base.setup[f + 1 :]])

        def test(kept: list[int]) -> bool:
            return attempt(with_rows(kept), f"setup file {f}: keep rows {_listing(kept)} of {len(rows)}")

        best = with_rows(ddmin(list(range(len(rows))), test, min_size=1, budget=left()))

    def pass_args(t: int, fields: list[str]) -> None:
        nonlocal best
        base = best
        txn = base.txns[t]
        length = len(txn.value[fields[0]])

        def with_args(kept: list[int]) -> Schedule:
            value = {**txn.value, **{name: [txn.value[name][i] for i in kept] for name in fields}}
            return base.with_txns([*base.txns[:t], replace(txn, value=value), *base.txns[t + 1 :]])

        def test(kept: list[int]) -> bool:
            what = f"txn {txn.op_id}: keep {len(kept)} of {length} {'/'.join(fields)} (at {_listing(kept)})"
            return attempt(with_args(kept), what)

        kept = ddmin(list(range(length)), test, min_size=1, budget=left())
        if len(kept) < length:
            best = with_args(kept)

    def snapshot(s: Schedule) -> tuple[Any, ...]:
        return (tuple(s.txns), repr(s.setup), repr(s.fault))

    def pass_fault() -> None:
        # A schedule that shows the anomaly without the fault is the engine's
        # alone, and needs no fault proxy to reproduce.
        nonlocal best
        if best.fault is not None and left() > 0:
            candidate = best.without_fault()
            if attempt(candidate, f"drop the fault ({best.fault.get('kind')})"):
                best = candidate

    while left() > 0:
        before = snapshot(best)
        pass_fault()
        pass_txns()
        pass_files()
        for f in range(len(best.setup)):
            if left() > 0:
                pass_rows(f)
        for t in range(len(best.txns)):
            for fields in _parallel_groups(best.txns[t].value):
                if left() > 0:
                    pass_args(t, fields)
        if snapshot(best) == before:
            break
    return best, steps
