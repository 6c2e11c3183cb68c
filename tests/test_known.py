"""The session's xfail check (tests/conftest.py): each xfail is one
tests/known.py declares, naming its deviation; a test declared to xfail in
every run that passed is news."""

from __future__ import annotations

from dataclasses import dataclass

from tests.conftest import xfail_notes, xfail_problems
from tests.known import EXPECTED_XFAILS

STALE = (
    "tests/test_ambiguous_faults.py::test_sail_under_each_store_fault_shows_only_what_the_fault_explains[stale-list]"
)
LIST_APPEND = "tests/test_wl_list_append.py::test_list_append_on_sail_loses_appends_and_reads_no_snapshot"


@dataclass
class Report:
    nodeid: str
    wasxfail: str = ""
    when: str = "call"


def test_a_declared_xfail_naming_its_deviation_is_no_problem() -> None:
    stats = {"xfailed": [Report(LIST_APPEND, "[sail:M3,C12:list-append-blind-insert-select] deviation ...")]}
    assert xfail_problems(stats) == []


def test_an_xfail_naming_any_deviation_its_test_pins_is_as_declared() -> None:
    assert EXPECTED_XFAILS[STALE].also
    stats = {"xfailed": [Report(STALE, "[sail:C6:stale-list-own-commit-failed] deviation ...")]}
    assert xfail_problems(stats) == []


def test_an_undeclared_xfail_fails_the_session() -> None:
    (line,) = xfail_problems({"xfailed": [Report("tests/test_x.py::test_new", "flaky, they say")]})
    assert "declares no xfail" in line and "test_new" in line


def test_an_xfail_naming_another_deviation_fails_the_session() -> None:
    (line,) = xfail_problems({"xfailed": [Report(LIST_APPEND, "[delta-rs:C7:applied-5xx-commits-again] ...")]})
    assert "without naming [sail:M3,C12:list-append-blind-insert-select]" in line


def test_an_always_declared_xfail_that_passed_fails_the_session() -> None:
    (line,) = xfail_problems({"passed": [Report(LIST_APPEND)]})
    assert "declared to xfail in every run" in line
    # One that may show passes quietly.
    assert xfail_problems({"passed": [Report(STALE)]}) == []


def test_a_may_show_xfail_that_passed_is_noted_in_the_summary() -> None:
    (line,) = xfail_notes({"passed": [Report(STALE), Report(LIST_APPEND), Report("tests/test_x.py::test_other")]})
    assert line.startswith(STALE) and "store:C12:stale-list-stale-read" in line
