"""Property tests of the identity checker (spec C19, T4) on synthetic logs:
random correct histories of inserts and DELETEs into a table with an
identity column are valid; one injected anomaly of each kind is named.

The model: transactions one after another (each reads the version before
its commit), inserts of 1-3 rows that take the next values after the high
water mark and record the new mark, DELETEs of one row that rewrite its
file without it (the other rows keep their values).
"""

from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers import identity
from checkers.base import Verdict
from tests.synth import SynthRun, add_action, remove_action

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMA = pa.schema([("uid", pa.int64()), ("id", pa.int64()), ("writer", pa.string())])


def _metadata(mark: int | None) -> dict:
    meta = {"delta.identity.start": 1, "delta.identity.step": 1, "delta.identity.allowExplicitInsert": False}
    if mark is not None:
        meta["delta.identity.highWaterMark"] = mark
    fields = [
        {"name": "uid", "type": "long", "nullable": True, "metadata": meta},
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "writer", "type": "string", "nullable": True, "metadata": {}},
    ]
    return {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": [],
            "configuration": {},
        }
    }


def _build(steps: list[tuple[str, int]], plant: str | None = None, at: int = 0) -> SynthRun:
    """steps: ("insert", n rows) or ("delete", which live row). `plant`, at
    the `at`-th insert: "duplicate" (its first value is an earlier row's),
    "mark" (its recorded mark one short), "concurrent" (its transaction read
    the version before the previous commit, which generated values too)."""
    run = SynthRun(create=False)
    run.raw_commit(0, [{"commitInfo": {"timestamp": 0, "operation": "CREATE TABLE"}}, _metadata(None)])
    files: dict[str, list[tuple[int, int, str]]] = {}  # live files
    written: dict[str, list[tuple[int, int, str]]] = {}  # every file, removed ones too
    mark, next_id, inserts, last_insert = 0, 1, 0, None
    for n, (kind, arg) in enumerate(steps):
        v = run.latest + 1
        read = v - 1
        if kind == "insert":
            rows = [(mark + j + 1, next_id + j, f"0.{n}") for j in range(arg)]
            next_id += arg
            mark += arg
            recorded = mark
            if inserts == at and plant == "duplicate" and written:
                earlier = next(iter(written.values()))[0][0]  # live or deleted: never given again
                rows[0] = (earlier, *rows[0][1:])
            if inserts == at and plant == "mark":
                recorded = mark - 1
            if inserts == at and plant == "concurrent" and last_insert == v - 1:
                read = v - 2
            inserts += 1
            last_insert = v
            path = f"f{v}.parquet"
            files[path] = written[path] = rows
            actions = [
                {"commitInfo": {"timestamp": v, "operation": "WRITE", "readVersion": read}},
                _metadata(recorded),
                add_action(path, len(rows)),
            ]
        else:
            live = [(p, r) for p, rs in files.items() for r in rs]
            if not live:
                continue
            path, gone = live[arg % len(live)]
            kept = [r for r in files.pop(path) if r != gone]
            actions = [{"commitInfo": {"timestamp": v, "operation": "DELETE", "readVersion": read}}]
            actions.append(remove_action(path))
            if kept:
                files[f"f{v}.parquet"] = written[f"f{v}.parquet"] = kept
                actions.append(add_action(f"f{v}.parquet", len(kept)))
        run.raw_commit(v, actions)
    for path, rows in written.items():
        run.file_tables[path] = pa.Table.from_pylist(
            [{"uid": u, "id": i, "writer": w} for u, i, w in rows], schema=SCHEMA
        )
    return run


steps_st = st.lists(
    st.one_of(st.tuples(st.just("insert"), st.integers(1, 3)), st.tuples(st.just("delete"), st.integers(0, 50))),
    min_size=2,
    max_size=25,
).filter(lambda s: sum(k == "insert" for k, _ in s) >= 2 and s[0][0] == "insert")


def _verdict(run: SynthRun) -> tuple[Verdict, set[str]]:
    history, log = run.build()
    res = identity.check(history, log)
    return res.verdict, {a.kind for a in res.anomalies}


@SETTINGS
@given(steps_st)
def test_serial_inserts_and_deletes_are_valid(steps: list[tuple[str, int]]) -> None:
    assert _verdict(_build(steps)) == (Verdict.VALID, set())


@SETTINGS
@given(steps_st, st.sampled_from(["duplicate", "mark"]), st.integers(1, 5))
def test_a_reused_value_or_a_short_mark_is_named(steps: list[tuple[str, int]], plant: str, at: int) -> None:
    inserts = sum(k == "insert" for k, _ in steps)
    at = at % inserts
    if plant == "duplicate":
        at = max(at, 1)
    want = {"duplicate": "duplicate-identity-value", "mark": "identity-high-water-mark"}[plant]
    verdict, kinds = _verdict(_build(steps, plant, at))
    assert verdict is Verdict.INVALID and want in kinds


@SETTINGS
@given(st.integers(1, 3), st.integers(1, 3), st.lists(st.tuples(st.just("insert"), st.integers(1, 3)), max_size=5))
def test_two_identity_transactions_that_overlapped_are_named(a: int, b: int, rest: list[tuple[str, int]]) -> None:
    # The second insert read the version before the first one's commit.
    steps = [("insert", a), ("insert", b), *rest]
    verdict, kinds = _verdict(_build(steps, "concurrent", 1))
    assert verdict is Verdict.INVALID and kinds == {"concurrent-identity-commit"}
