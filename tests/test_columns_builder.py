"""The compiled ColumnsBuilder.add (checkers/_columns.c) against the Python
reference in checkers/txn_columns.py: the same columns after every
transaction, on arbitrary sequences of them (ids committed twice, writers
committed later or never, keys of mixed types that Python counts equal,
both the log's builder and the simulator's declared key range), and the
same errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from checkers import txn_columns
from checkers.txn_columns import ColumnsBuilder
from checkers.txn_model import INITIAL, Predicate, RowRef, Write
from harness.core.isolation import SERIALIZABLE, WRITE_SERIALIZABLE

compiled = txn_columns._compiled

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

tids = st.sampled_from(["t1", "t2", "t3", "t4"])
keys = st.one_of(st.integers(-2, 5), st.sampled_from(["a", "b"]), st.just(1.0), st.just(True), st.none())
writers = st.one_of(tids, st.just(INITIAL), st.just("never"))
maybe_writer = st.one_of(st.none(), writers)
txn = st.tuples(
    tids,
    st.integers(0, 9),
    st.one_of(st.none(), st.integers(0, 9)),
    st.lists(st.builds(RowRef, keys, writers), max_size=4),
    st.lists(st.builds(Write, keys, maybe_writer, st.one_of(st.none(), keys)), max_size=4),
    st.lists(st.builds(RowRef, keys, writers), max_size=3),
    st.lists(st.builds(Predicate, keys, keys), max_size=2),
    st.sampled_from([SERIALIZABLE, WRITE_SERIALIZABLE, "other"]),
    st.sampled_from(["WRITE", "MERGE", ""]),
)
# The simulator's builder: ids are numbers, keys ints of a declared range
# (one out of it is an error).
seq_keys = st.integers(-1, 6)
seq_writers = st.one_of(st.integers(0, 4), st.just(INITIAL))
seq_txn = st.tuples(
    st.integers(0, 4),
    st.integers(0, 9),
    st.one_of(st.none(), st.integers(0, 9)),
    st.lists(st.builds(RowRef, seq_keys, seq_writers), max_size=4),
    st.lists(st.builds(Write, seq_keys, st.one_of(st.none(), seq_writers)), max_size=4),
    st.lists(st.builds(RowRef, seq_keys, seq_writers), max_size=3),
    st.lists(st.builds(Predicate, seq_keys, seq_keys), max_size=2),
    st.sampled_from([SERIALIZABLE, WRITE_SERIALIZABLE]),
    st.just("WRITE"),
)


def test_the_compiled_module_is_built() -> None:
    # The project builds it (pyproject.toml); the checker's speed on a long
    # log depends on it, so a build that silently lost it must not pass.
    assert compiled is not None and txn_columns.append_txn is compiled.add


def _columns(b: ColumnsBuilder) -> list[Any]:
    """Everything the builder has appended, comparable with ==."""
    index = b.index if isinstance(b.index, dict) else list(b.index.pos)
    return [index, *[x if isinstance(x, (dict, int)) or x is None else list(x) for x in b._state[1:-2]]]


def _add(fn: Any, b: ColumnsBuilder, t: tuple) -> tuple[str, str] | None:
    try:
        fn(b._state, *t)
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return type(e).__name__, str(e)
    return None


def _agree(txns: list[tuple], make: Any) -> None:
    ref, fast = make(), make()
    for t in txns:
        note(f"add{t}")
        want = _add(txn_columns._add, ref, t)
        got = _add(compiled.add, fast, t)
        assert got == want
        if want is not None:
            return  # a builder that raised is not used again
        assert _columns(fast) == _columns(ref)
    # The read-write ones: those that read, updated, deleted or evaluated a predicate.
    rw = [t for t in txns if t[3] or t[6] or t[5] or any(w.prev is not None for w in t[4])]
    assert fast.read_write_count() == ref.read_write_count() == len(rw)
    a, b = fast.finish({"never"}), ref.finish({"never"})
    assert [a.ref_writer.tolist(), a.foreign, a.twice, list(a.keys)] == [
        b.ref_writer.tolist(), b.foreign, b.twice, list(b.keys),
    ]  # fmt: skip


@pytest.mark.skipif(compiled is None, reason="built without a C compiler")
@SETTINGS
@given(txns=st.lists(txn, max_size=10))
def test_compiled_and_reference_agree_on_the_logs_builder(txns: list[tuple]) -> None:
    _agree(txns, ColumnsBuilder)


@pytest.mark.skipif(compiled is None, reason="built without a C compiler")
@SETTINGS
@given(txns=st.lists(seq_txn, max_size=10))
def test_compiled_and_reference_agree_on_a_declared_key_range(txns: list[tuple]) -> None:
    _agree(txns, lambda: ColumnsBuilder(key_range=5, seq_ids="t"))


def test_a_sample_of_columns() -> None:
    # What the builder holds after a few transactions, written out: the
    # agreement above could hold for two implementations equally wrong.
    b = ColumnsBuilder()
    b.add("t1", 1, 0, (), (Write("a"), Write("b", None, 7)), (), (), SERIALIZABLE, "WRITE")
    b.add(
        "t2", 2, 1, (RowRef("a", "t1"),), (Write("a", "t1"),), (RowRef("b", "t1"),), (Predicate(0, 9),), "x", "UPDATE"
    )
    b.add("t3", 3, None, (RowRef("c", "t9"),), (), (), (), WRITE_SERIALIZABLE, "")
    assert b.ids == ["t1", "t2", "t3"] and b.keys == ["a", "b", "c"]
    assert list(b.read_version) == [0, 1, -1] and list(b.serializable) == [1, 0, 0]
    assert list(b.ref_key) == [0, 0, 1, 2] and list(b.ref_writer) == [0, 0, 0, -1]
    assert list(b.ref_off) == [0, 0, 3, 4] and list(b.inst_key) == [0, 1, 0, 1]
    assert list(b.ins_key) == [0, 1] and b.ins_attr == ["a", 7] and b._later == [(3, "t9")]
    assert (b.pred_lo, b.pred_hi, list(b.pred_off)) == ([0], [9], [0, 0, 1, 1])
