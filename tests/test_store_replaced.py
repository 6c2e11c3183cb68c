"""Commit files the store itself logged replacing: SeaweedFS's filer
metadata log read (harness.run.weed_metalog; the events `weed
filer.meta.tail` printed when two racing conditional PUTs of one key were
both acknowledged, captured from that run and trimmed to the fields read),
and what check makes of the lost commits at those versions."""

from __future__ import annotations

import copy
import json

import pytest

from checkers.base import Anomaly, CheckResult, Verdict
from harness.check.pipeline import _replacements_not_the_stores, _store_replacements_explain
from harness.check.report import store_replaced_text
from harness.core.contract import breaches
from harness.run.weed_metalog import Replaced, parse_events, replaced_in
from tests.conftest import REPO

CAPTURED = (REPO / "tests" / "fixtures" / "seaweedfs-double-win-metalog.txt").read_text()


def test_the_captured_double_win_is_one_replacement_of_the_first_create() -> None:
    events = parse_events(CAPTURED)
    assert len(events) == 4
    assert replaced_in(events) == [
        Replaced(
            "/buckets/delta-jepsen/t/race/1",
            1795897545631717737,
            ("1,7,3212375563",),  # logged as the fileId string 1,07bf78f60b
            ("1,8,809056395",),
        )
    ]


def test_an_update_that_keeps_the_content_a_rename_and_a_delete_replace_nothing() -> None:
    created = parse_events(CAPTURED)[1]
    update = copy.deepcopy(created)
    note = update["eventNotification"]
    note["oldEntry"] = copy.deepcopy(note["newEntry"])
    chunk = note["oldEntry"]["chunks"][0]
    fid = chunk.pop("fid")
    # The same chunk, spelt as a fileId string: volume, key hex, cookie in 8 hex digits.
    chunk["fileId"] = f"{fid['volumeId']},{int(fid['fileKey']):x}{fid['cookie']:08x}"
    rename = copy.deepcopy(parse_events(CAPTURED)[2])
    rename["eventNotification"]["newParentPath"] = "/buckets/delta-jepsen/t/elsewhere"
    delete = copy.deepcopy(parse_events(CAPTURED)[2])
    delete["eventNotification"]["newEntry"] = None
    assert replaced_in([update, rename, delete]) == []


def test_text_after_the_events_is_not_read_and_loses_none_of_them() -> None:
    text = CAPTURED + "W1128 a warning line\n" + json.dumps({"directory": "/x"})
    assert len(parse_events(text)) == 4
    assert parse_events("") == []


# -- what check makes of them -------------------------------------------------------------


def _lost(op: str, version: int | None) -> Anomaly:
    return Anomaly("lost-write", "C7", f"op {op} lost", ops=[op], versions=[] if version is None else [version])


def _durability(*anomalies: Anomaly) -> CheckResult:
    return CheckResult("durability", Verdict.INVALID, f"{len(anomalies)} lost", list(anomalies))


def test_a_lost_commit_told_a_replaced_version_is_the_stores() -> None:
    results = [_durability(_lost("1.1", 7)), _durability(_lost("2.1", 7), _lost("2.2", 9))]
    assert _store_replacements_explain(results, {"read": True, "versions": [7]}) == 2
    assert results[0].verdict is Verdict.UNKNOWN and results[0].explanation.startswith("Unknown for the engine")
    assert (
        results[0]
        .anomalies[0]
        .explanation.startswith("The store's own log shows the commit file of version 7 written twice")
    )
    assert results[0].anomalies[0].details["store_replaced_commit"] == [7]
    # Version 9 was not replaced: that loss stays the engine's, and so does the checker.
    assert results[1].verdict is Verdict.INVALID and "the others are the engine's" in results[1].explanation
    assert results[1].anomalies[1].explanation == "op 2.2 lost"


@pytest.mark.parametrize(("untold", "excused"), [(3, 3), (4, 0)])
def test_lost_writes_told_no_version_are_the_stores_only_while_the_replacements_cover_them(
    untold: int, excused: int
) -> None:
    """Four replacing writes (version 5 written three times), one claimed by
    a loss told its version: three losses told none may be the other three;
    four cannot all be."""
    replacements = [{"version": v, "at_ns": i} for i, v in enumerate([4, 5, 5, 6])]
    replaced = {"read": True, "versions": [4, 5, 6], "replacements": replacements}
    results = [_durability(_lost("0.1", 4), *(_lost(f"1.{i}", None) for i in range(untold)))]
    assert _store_replacements_explain(results, replaced) == 1 + excused
    assert results[0].verdict is (Verdict.UNKNOWN if excused else Verdict.INVALID)
    explained = [a for a in results[0].anomalies[1:] if "not shown to be the engine's" in a.explanation]
    assert len(explained) == excused


def test_no_replaced_commit_changes_nothing() -> None:
    results = [_durability(_lost("1.1", 7))]
    for replaced in (None, {"read": True, "versions": []}, {"read": False, "error": "x", "versions": []}):
        assert _store_replacements_explain(results, replaced) == 0
    assert results[0].verdict is Verdict.INVALID and results[0].anomalies[0].explanation == "op 1.1 lost"


def test_a_commit_protocol_without_put_if_absent_or_a_fault_that_strips_it_keeps_the_loss() -> None:
    assert "delta-spark" in _replacements_not_the_stores(["delta-spark"], [])
    unsafe = breaches({"engine": "sail", "storage": "seaweedfs", "nodes": 2, "nemesis": ["unsafe-put"]})
    assert "outside the contract" in _replacements_not_the_stores([], unsafe)
    inside = breaches({"engine": "sail,delta-rs", "storage": "seaweedfs", "nodes": 2, "nemesis": ["kill"]})
    assert inside == [] and _replacements_not_the_stores([], inside) == ""


def test_the_summary_line_says_what_the_store_logged_and_what_was_made_of_it() -> None:
    assert store_replaced_text({}) == ""
    assert store_replaced_text({"store_replaced_commits": {"read": True, "versions": []}}) == ""
    assert store_replaced_text({"store_replaced_commits": {"read": False, "error": "timed out", "versions": []}}) == (
        "the store's log of replaced commit files could not be read: timed out"
    )
    doc = {"store_replaced_commits": {"read": True, "versions": [3, 8], "anomalies_excused": 2}}
    assert store_replaced_text(doc) == (
        "the store's own log shows the commit file of version(s) 3, 8 replaced by a second write; 2 lost commit(s) "
        "at those versions are reported as the store's (unknown for the engine)"
    )
    doc["store_replaced_commits"]["not_excused_because"] = "the run is outside the contract"
    assert store_replaced_text(doc).endswith("replaced by a second write; the run is outside the contract")
