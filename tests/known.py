"""Known engine deviations, and the one rule for a test that pins them.

A real run of an engine that deviates from the spec is invalid, and the
test that ran it must neither fail (the deviation is the engine's, reported)
nor pass quietly on anything else. So a test that pins a deviation calls
`assert_only_known`, which holds, for the run's results.json:

1. every anomaly is one of the deviations the test names, shown to be that
   deviation by its own evidence (versions, ops, files, error texts, read
   from the run folder: the history, the table's log, the engines' and the
   store's logs), anomaly by anomaly;
2. every checker is valid, except those whose every anomaly is a known
   deviation's, and those the test names with the reason their verdict may
   differ;
3. a deviation declared to show in every run of its test (`always`) that
   did not show fails the test: a finding that disappears is noticed;
then the test is xfailed, its reason naming each deviation shown by id.
Each xfail a CI run may show is declared in `EXPECTED_XFAILS`, and
conftest.py fails the session on any other, and on an `always` one that
ran and did not xfail.

`DJ_TEST_PLANT=<kind>` plants a further anomaly in the run before it is
judged (a tamper-suite plant that fits any run: `log-gap`,
`log-in-commit-timestamp`), to show that the pin then fails: a guard that
stays green with a foreign anomaly in the run proves nothing.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

PLANT_ENV = "DJ_TEST_PLANT"

# -- a run folder, as the evidence reads it ------------------------------------------------


@dataclass
class RunView:
    run_dir: Path
    doc: dict[str, Any]

    @cached_property
    def events(self) -> list[dict[str, Any]]:
        path = self.run_dir / "history.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    @cached_property
    def completions(self) -> dict[str, dict[str, Any]]:
        """Each op's completion event (ok, fail or info), by op id."""
        return {e["id"]: e for e in self.events if e["type"] != "invoke"}

    @cached_property
    def invokes(self) -> dict[str, dict[str, Any]]:
        return {e["id"]: e for e in self.events if e["type"] == "invoke"}

    @cached_property
    def log(self) -> Any:
        from harness.deltalog import read_log
        from harness.deltalog.coordinated import load_coordinator

        return read_log(str(self.run_dir / "table"), coordinator=load_coordinator(self.run_dir))

    @cached_property
    def proxy_stats(self) -> dict[str, Any]:
        path = self.run_dir / "logs" / "s3proxy-stats.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def text(self, rel: str) -> str:
        path = self.run_dir / rel
        return path.read_text(errors="replace") if path.is_file() else ""

    @property
    def checkers(self) -> dict[str, dict[str, Any]]:
        return {c["checker"]: c for c in self.doc["checkers"]}

    def anomalies(self) -> list[tuple[str, dict[str, Any]]]:
        return [(c["checker"], a) for c in self.doc["checkers"] for a in c["anomalies"]]


# Why an anomaly is not this deviation (None: it is).
Evidence = Callable[[RunView, dict[str, Any]], "str | None"]


@dataclass(frozen=True)
class Known:
    id: str  # "<engine>:<claims>:<what>", quoted first in the xfail reason
    claim: str  # the spec claims it breaks, e.g. "C4, C6"
    summary: str  # what the engine does, one sentence
    kinds: frozenset[str]  # the anomaly kinds it may explain
    evidence: Evidence = field(compare=False)
    # Shows in every run of the tests that pin it: a run without it fails.
    always: bool = True


class KnownNotShown(UserWarning):
    """A known deviation that may not show in every run did not show in this one."""


# -- the rule ---------------------------------------------------------------------------


def assert_only_known(
    doc: dict[str, Any],
    run_dir: Path,
    known: Iterable[Known],
    *,
    may_differ: dict[str, str] | None = None,
    pinned: bool = True,
) -> None:
    """Judge a real run pinned to `known` deviations (the module's rule):
    xfail naming those shown, or pass; any other anomaly, any other checker
    not valid (bar `may_differ`: checker -> why its verdict may differ), or
    an `always` deviation missing, fails. With `pinned` False the
    deviations are only allowed (a guard for runs that may meet them), so
    one missing is no news."""
    doc = _planted(doc, run_dir)
    view = RunView(run_dir, doc)
    known = list(known)
    shown: dict[str, list[str]] = {k.id: [] for k in known}
    unexplained: list[str] = []
    explained_checkers: dict[str, int] = {}
    for checker, a in view.anomalies():
        k, why_not = explaining(view, a, known)
        if k is not None:
            shown[k.id].append(_one_line(a))
            explained_checkers[checker] = explained_checkers.get(checker, 0) + 1
        else:
            unexplained.append(
                f"{checker}: {a['kind']} ({a.get('claim')}): {a['explanation'][:200]}"
                + (f" [{'; '.join(why_not)}]" if why_not else "")
            )
    assert not unexplained, "anomalies no known deviation explains with its evidence: " + " | ".join(unexplained[:8])
    wrong = []
    for name, c in view.checkers.items():
        if name in (may_differ or {}):
            continue
        if explained_checkers.get(name) and explained_checkers[name] == len(c["anomalies"]):
            if c["verdict"] != "invalid":
                wrong.append(f"{name} is {c['verdict']} with only known anomalies")
            continue
        if c["verdict"] != "valid":
            wrong.append(f"{name} is {c['verdict']}: {c['explanation'][:200]}")
    assert not wrong, "checkers the known deviations do not account for: " + " | ".join(wrong)
    missing = [k.id for k in known if pinned and k.always and not shown[k.id]]
    assert not missing, f"pinned deviation(s) {missing} did not show in this run: the finding is gone, or the run moved"
    found = {i: s for i, s in shown.items() if s}
    for k in known:
        if pinned and not k.always and not found.get(k.id):
            warnings.warn(f"[{k.id}] did not show in this run", KnownNotShown, stacklevel=2)
    if found:
        by_id = {k.id: k for k in known}
        pytest.xfail(
            "; ".join(
                f"[{i}] deviation (spec {by_id[i].claim}): {by_id[i].summary}: {len(s)} anomaly(ies), e.g. {s[0]}"
                for i, s in found.items()
            )
        )


def explaining(view: RunView, a: dict[str, Any], known: Iterable[Known]) -> tuple[Known | None, list[str]]:
    """The first of `known` whose evidence shows anomaly `a` to be it, and
    why each other one of its kind is not."""
    why_not = []
    for k in known:
        if a["kind"] not in k.kinds:
            continue
        why = k.evidence(view, a)
        if why is None:
            return k, why_not
        why_not.append(f"not {k.id}: {why}")
    return None, why_not


def _one_line(a: dict[str, Any]) -> str:
    return f"{a['kind']}: {a['explanation'][:240]}"


def _planted(doc: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """With DJ_TEST_PLANT set: the run re-checked with that anomaly planted
    (see the module's docstring)."""
    kind = os.environ.get(PLANT_ENV)
    if not kind:
        return doc
    from harness.check.pipeline import check_run
    from tests.test_tamper import Run, plant_in_commit_timestamp, plant_log_gap

    plants = {"log-gap": plant_log_gap, "log-in-commit-timestamp": plant_in_commit_timestamp}
    if kind not in plants:
        raise AssertionError(f"{PLANT_ENV}={kind!r}: valid: {', '.join(plants)}")
    run = Run(run_dir)
    if len(run.versions()) < 2:
        # A table of one version (create-race's root): plant in the related
        # table (a round's) with the longest log.
        logs = sorted((run_dir / "table").glob("*/**/_delta_log"), key=lambda d: len(list(d.glob("*.json"))))
        if logs:
            run.log_dir = logs[-1]
    plants[kind](run)
    return check_run(run_dir).doc


# -- evidence shared by several deviations -------------------------------------------------


def versions_of(a: dict[str, Any]) -> list[int]:
    return [v for v in a.get("versions") or [] if isinstance(v, int)]


def same_files_added(view: RunView, versions: list[int]) -> str | None:
    """None when every one of `versions` adds exactly the data files the
    first adds: one change committed again."""
    log = view.log
    if len(versions) < 2 or any(v not in log.commits for v in versions):
        return f"versions {versions} are not all in the log"
    files = [sorted(add["path"] for add in log.commits[v].adds) for v in versions]
    if not files[0] or any(f != files[0] for f in files[1:]):
        return f"versions {versions} do not add the same data files"
    return None


_MOTO_PUT = re.compile(r'"PUT /[^ ]*_delta_log/(\d{20})\.json[^"]*" (\d{3})')


def commit_put_answers(view: RunView) -> dict[int, list[str]]:
    """moto's answers to each commit file's PUTs, by version (its request log)."""
    out: dict[int, list[str]] = {}
    for m in _MOTO_PUT.finditer(view.text("logs/moto.log")):
        out.setdefault(int(m.group(1)), []).append(m.group(2))
    return out


def faults_applied(view: RunView, *kinds: str) -> int:
    faults = view.proxy_stats.get("faults") or {}
    return sum(int(faults.get(k) or 0) for k in kinds)


# -- the catalog: delta-spark -------------------------------------------------------------

# A lost commit drags along reads of the replaced commit: a state the final
# log does not hold.
LOST_COMMIT_READS = frozenset({"state-never-existed", "read-version-mismatch", "stale-read"})


def _single_driver_lost_commit(view: RunView, a: dict[str, Any]) -> str | None:
    details = a.get("details") or {}
    if "S3SingleDriverLogStore" not in details.get("outside_contract", ""):
        return "not labelled outside contract for S3SingleDriverLogStore"
    if a["kind"] == "lost-write":
        return None if details.get("replaced_by") else "no commit named as having replaced it"
    # A read that saw a replaced commit: it saw no version at or after the
    # first one replaced.
    replaced = [
        r["version"]
        for _, x in view.anomalies()
        if x["kind"] == "lost-write"
        for r in (x.get("details") or {}).get("replaced_by") or []
    ]
    if not replaced:
        return "no lost write with a replacing commit in this run"
    seen = versions_of(a)
    if seen and max(seen) < min(replaced):
        return f"it names versions {seen}, all before the first replaced one ({min(replaced)})"
    return None


DELTA_SPARK_SINGLE_DRIVER = Known(
    "delta-spark:C7,C11:single-driver-lost-commit",
    "C7, C11",
    "outside contract: S3SingleDriverLogStore on 2 JVMs, a commit of one JVM replaced by the other's PUT",
    frozenset({"lost-write"} | LOST_COMMIT_READS),
    _single_driver_lost_commit,
    always=False,
)


def _coordinator_commits_again(view: RunView, a: dict[str, Any]) -> str | None:
    if not (a.get("details") or {}).get("same_transaction"):
        return "its versions carry different transaction ids (or none)"
    why = same_files_added(view, versions_of(a))
    if why:
        return why
    if not faults_applied(view, "ambiguous", "applied-error", "applied-late"):
        return "no ambiguous fault was applied in this run"
    return None


DELTA_SPARK_COORDINATOR_AGAIN = Known(
    "delta-spark:C4,C6:coordinator-commits-again",
    "C4, C6",
    "coordinated commits: a ratifying UpdateItem whose answer was lost is sent again, fails its condition on "
    "its own ratification, and Delta commits the same transaction as the next version",
    frozenset({"duplicate-commit"}),
    _coordinator_commits_again,
    always=False,
)


# -- the catalog: delta-rs -----------------------------------------------------------------


def _time_travel_after_cleanup(view: RunView, a: dict[str, Any]) -> str | None:
    details = a.get("details") or {}
    may, cleaned, said = details.get("may") or [], details.get("cleaned") or [], details.get("resolved")
    if not may or sorted(cleaned) != sorted(may):
        return "log cleanup did not delete every version the time resolves to"
    if not isinstance(said, int) or said <= max(may):
        return f"the engine read version {said}, not one newer than the span {min(may)}..{max(may)}"
    if "committed outside that span" not in a.get("explanation", ""):
        return f"the log has no version {said}"
    return None


DELTA_RS_TIME_TRAVEL_AFTER_CLEANUP = Known(
    "delta-rs:T1:time-travel-after-cleanup",
    "T1",
    "delta-rs resolves a time whose commits log cleanup deleted to the oldest commit it still lists, and reads "
    "that later version instead of failing",
    frozenset({"time-travel-mismatch"}),
    _time_travel_after_cleanup,
    always=False,
)


# -- the registry ---------------------------------------------------------------------------

# Every xfail a test of this suite may show, by node id: the known deviation
# (or the declared reason of a static xfail) and whether it shows in every
# run of that test. conftest.py checks a session's xfails against it.


@dataclass(frozen=True)
class ExpectedXfail:
    reason: str  # a Known's id, or why a static xfail is expected
    always: bool
    # Other Known ids the test pins: an xfail naming any of them is as declared.
    also: tuple[str, ...] = ()


# The embedded SeaweedFS store's own defect (not an engine's): racing
# `If-None-Match: *` PUTs of one key, two acknowledged, the filer's metadata
# log holding the second create as the replacement of the first.
SEAWEED_DOUBLE_WIN = (
    "seaweedfs: two racing conditional PUTs of one key both won, and its filer logged the second replacing the first"
)

_EC = "tests/test_error_classification.py::"
EXPECTED_XFAILS: dict[str, ExpectedXfail] = {
    # Real two-writer races of delta-rs, each pinned to its recorded outcome.
    _EC + "test_deltars_blind_append_after_dml[delete-append-False]": ExpectedXfail(
        "delta-rs: a blind append after a DELETE conflicts under WriteSerializable (C9, M2)", True
    ),
    _EC + "test_deltars_blind_append_after_dml[update-append-False]": ExpectedXfail(
        "delta-rs: a blind append after an UPDATE conflicts under WriteSerializable (C9, M2)", True
    ),
    _EC + "test_deltars_blind_append_after_dml[delete-p0-append-p1-True]": ExpectedXfail(
        "delta-rs: a blind append to another partition after a DELETE conflicts (C9, M2, P1)", True
    ),
    _EC + "test_deltars_serializable_delete_after_insert": ExpectedXfail(
        "delta-rs: under Serializable the DELETE commits after a concurrent INSERT (C14, C16)", True
    ),
    _EC + "test_deltars_compaction_then_rewrite[optimize-12]": ExpectedXfail(
        "delta-rs: a second OPTIMIZE of the same files commits (M6, E3, C8)", True
    ),
    _EC + "test_deltars_compaction_then_rewrite[delete-all-0]": ExpectedXfail(
        "delta-rs: a DELETE of files an OPTIMIZE removed commits (M5, E3, C8)", True
    ),
    _EC + "test_deltars_create_race[error]": ExpectedXfail("delta-rs: both creators succeed, mode error (E6)", True),
    _EC + "test_deltars_create_race[overwrite]": ExpectedXfail(
        "delta-rs: both creators succeed, mode overwrite (E6)", True
    ),
    "tests/test_seaweedfs.py::test_racing_put_if_absent_has_one_winner": ExpectedXfail(SEAWEED_DOUBLE_WIN, False),
    # A property test's case that cannot arise in a Delta history.
    "tests/test_txn_properties.py::test_injected_anomaly_is_detected[G0]": ExpectedXfail(
        "G0 cannot arise in a Delta history (the log orders every row's versions)", True
    ),
    # Real runs pinned to a known deviation with its evidence (the catalog above).
    "tests/test_wl_compaction.py::test_compaction_on_delta_rs_reports_what_it_finds": ExpectedXfail(
        "delta-rs:M6,E3:compaction-removes-twice", False
    ),
    "tests/test_wl_create_race.py::test_real_create_race[delta-rs-local-5]": ExpectedXfail(
        "delta-rs:E6:create-race-both-win", False
    ),
    "tests/test_wl_create_race.py::test_real_create_race[sail-seaweedfs-8]": ExpectedXfail(
        "sail:E6:create-race-both-win", False
    ),
    "tests/test_wl_partitioned.py::test_partitioned_run_reports_conflict_rates_and_p1[delta-rs-local]": ExpectedXfail(
        "delta-rs:P1:disjoint-partition-conflict", True
    ),
    "tests/test_wl_partitioned.py::test_partitioned_run_reports_conflict_rates_and_p1[sail-seaweedfs]": ExpectedXfail(
        "sail:P1:disjoint-partition-conflict", True
    ),
    "tests/test_wl_list_append.py::test_list_append_on_sail_loses_appends_and_reads_no_snapshot": ExpectedXfail(
        "sail:M3,C12:list-append-blind-insert-select", True
    ),
    "tests/test_ambiguous_faults.py::test_delta_rs_retries_an_applied_5xx_commit_and_commits_it_twice": (
        ExpectedXfail("delta-rs:C7:applied-5xx-commits-again", True)
    ),
    "tests/test_ambiguous_faults.py::test_delta_rs_on_a_stale_listing_reads_stale_and_fails_its_own_commits": (
        ExpectedXfail("delta-rs:C6:stale-list-own-commit-failed", True)
    ),
    "tests/test_ambiguous_faults.py::test_sail_under_each_store_fault_shows_only_what_the_fault_explains"
    "[ambiguous-5xx]": ExpectedXfail("sail:C7:applied-5xx-commits-again", False),
    "tests/test_ambiguous_faults.py::test_sail_under_each_store_fault_shows_only_what_the_fault_explains"
    "[stale-list]": ExpectedXfail(
        "store:C12:stale-list-stale-read", False, also=("sail:C6:stale-list-own-commit-failed",)
    ),
    "tests/test_mixed_engines.py::test_delta_spark_delta_rs_and_sail_append_to_one_table[s3-S3SingleDriverLogStore]": (
        ExpectedXfail("delta-spark:C7,C11:single-driver-lost-commit", False)
    ),
    "tests/test_mixed_engines.py::test_delta_spark_delta_rs_and_sail_append_to_one_table[local-HDFSLogStore]": (
        ExpectedXfail("delta-spark:C7,C11:single-driver-lost-commit", False)
    ),
    # delta-spark's fault runs meet the coordinator's double commit when an
    # ambiguous fault hits a ratification (coordinated commits, 2 JVMs).
    "tests/test_nemeses.py::test_real_run_per_fault_family_on_delta_spark[s3-errors,latency,ambiguous,partition]": (
        ExpectedXfail("delta-spark:C4,C6:coordinator-commits-again", False)
    ),
}


__all__ = [
    "DELTA_RS_TIME_TRAVEL_AFTER_CLEANUP",
    "DELTA_SPARK_COORDINATOR_AGAIN",
    "DELTA_SPARK_SINGLE_DRIVER",
    "EXPECTED_XFAILS",
    "PLANT_ENV",
    "ExpectedXfail",
    "explaining",
    "Known",
    "KnownNotShown",
    "RunView",
    "assert_only_known",
    "commit_put_answers",
    "faults_applied",
    "same_files_added",
    "versions_of",
]
