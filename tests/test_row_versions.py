"""The compiled row-version bookkeeping (checkers/_rowversions.c) against
the Python reference in checkers/row_versions.py: the same results and the
same state, step by step, on arbitrary sequences of commits (files removed
whether live or not, added again, columns of unequal lengths or missing,
keys and writers of mixed types), and the same errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from checkers import row_versions

compiled = row_versions._compiled
REF = row_versions.REFERENCE

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

values = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b", "t1", "t2"]), st.none(), st.just(1.0), st.just(True))
column = st.one_of(st.none(), st.lists(values, max_size=5))
paths = st.sampled_from([f"part-{i}.parquet" for i in range(6)])
added_file = st.tuples(paths, st.lists(values, max_size=5), column, column)
commit = st.tuples(st.lists(paths, max_size=3), st.lists(added_file, max_size=3))


def test_the_compiled_module_is_built() -> None:
    # The project builds it (pyproject.toml); the checker's speed at scale
    # depends on it, so a build that silently lost it must not pass.
    assert compiled is not None


def _step(fns: Any, state: tuple[dict, dict, set], removes: list[str], adds: list[tuple]) -> tuple:
    alive, live, dropped = state
    taken = fns["take"](alive, [{"path": p} for p in removes])
    added: list = []
    for path, keys, writers, prevs in adds:
        fns["keep"](alive, path, keys, writers, prevs, added)
    ids, new = fns["fresh"](live, added)
    gone = fns["settle"](live, dropped, taken, ids)
    return taken, added, ids, new, gone


@pytest.mark.skipif(compiled is None, reason="built without a C compiler")
@SETTINGS
@given(commits=st.lists(commit, max_size=12))
def test_compiled_and_reference_agree_step_by_step(commits: list) -> None:
    fast_fns = {name: getattr(compiled, name) for name in REF}
    ref_state: tuple[dict, dict, set] = ({}, {}, set())
    fast_state = copy.deepcopy(ref_state)
    for removes, adds in commits:
        note(f"commit: removes {removes}, adds {adds}")
        want = _step(REF, ref_state, removes, adds)
        got = _step(fast_fns, fast_state, removes, adds)
        assert got == want
        assert fast_state == ref_state
        # Counts are never zero: a version with no copy left is in dropped.
        assert all(ref_state[1].values())


@pytest.mark.skipif(compiled is None, reason="built without a C compiler")
@pytest.mark.parametrize("name", sorted(REF))
def test_compiled_and_reference_fail_alike(name: str) -> None:
    # An unhashable key (a list column used as row key), a remove without
    # a path, a row version that is not a triple.
    cases = {
        "take": lambda f: f({}, [{"size": 3}]),
        "keep": lambda f: f({}, "p", 3, None, None, []),
        "fresh": lambda f: f({}, [([1], "w", None)]),
        "settle": lambda f: f({}, set(), [("k", "w")], []),
    }
    errors = []
    for fn in (REF[name], getattr(compiled, name)):
        with pytest.raises(Exception) as e:
            cases[name](fn)
        errors.append(type(e.value))
    assert errors[0] == errors[1]
