"""Unit tests of the five checkers of the append workload, on synthetic
(History, TransactionLog) pairs built with tests.synth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers import CHECKERS, atomicity, duplicates, durability, log_sanity, read_validity
from checkers.base import CheckResult, Verdict
from checkers.facts import table_facts
from harness.core.history import FAIL, INFO, OK, History, load_history, parse_lines
from harness.deltalog import Commit, TransactionLog, read_log
from tests.synth import SynthRun, add_action, create_actions
from workloads.append import AppendWorkload


def kinds(res: CheckResult) -> list[str]:
    return [a.kind for a in res.anomalies]


def assert_invalid(res: CheckResult, kind: str) -> None:
    assert res.verdict is Verdict.INVALID, res.explanation
    assert kind in kinds(res), (kinds(res), res.explanation)
    # Every result must serialise for results.json.
    json.dumps(res.to_json())


def assert_valid(res: CheckResult) -> None:
    assert res.verdict is Verdict.VALID, (res.explanation, kinds(res))
    assert res.anomalies == []
    json.dumps(res.to_json())


def only(res: CheckResult, kind: str) -> list:
    return [a for a in res.anomalies if a.kind == kind]


def simple_valid_run() -> SynthRun:
    """Two sequential acknowledged appends, reads of every version."""
    run = SynthRun()
    run.read("0.0", [], start=1, end=2, process=0)
    run.append("0.1", [1, 2], start=10, end=20, process=0, version=1)
    run.commit_op("0.1", [1, 2], tag=True)  # v1
    run.append("1.1", [3], start=30, end=40, process=1, version=2)
    run.commit_op("1.1", [3], tag=True)  # v2
    run.read("1.2", [1, 2, 3], start=50, end=60, process=1, version=2, final=True)
    return run


def test_registry_has_every_checker():
    assert set(CHECKERS) == {
        "log-sanity",
        "durability",
        "atomicity",
        "identity",
        "multi-table",
        "streaming",
        "duplicates",
        "read-validity",
        "serializability",
        "bank",
        "unique-key",
        "list-append",
        "partition-conflicts",
        "compaction",
        "metadata-conflicts",
        "app-txn",
        "create-race",
        "exception-classes",
        "liveness",
        "time-travel",
        "restore",
        "vacuum",
    }
    from workloads import WORKLOAD_NAMES, make_workload

    for name in WORKLOAD_NAMES:  # every workload's checkers exist
        assert set(make_workload(name, 0).checkers) <= set(CHECKERS), name


# The checkers an append-style run gets (the bank invariant, say, needs a bank).
APPEND_CHECKERS = AppendWorkload.checkers


def test_valid_run_is_valid_for_every_checker():
    history, log = simple_valid_run().build()
    for name in APPEND_CHECKERS:
        check = CHECKERS[name]
        res = check(history, log)
        assert res.checker == name
        assert_valid(res)


# --------------------------------------------------------------------------
# history loading


def test_synth_history_roundtrips_through_the_loader():
    history = simple_valid_run().history()
    assert not history.problems and not history.truncated
    assert [e.index for e in history.events] == list(range(len(history.events)))
    ops = {op.id: op for op in history.ops()}
    assert ops["0.1"].type == OK and ops["0.1"].version == 1
    assert ops["0.1"].start == 10 and ops["0.1"].end == 20
    assert ops["1.2"].value["ids"] == [1, 2, 3] and ops["1.2"].value["final"] is True


def test_truncated_last_line_is_tolerated(tmp_path):
    lines = simple_valid_run().history_lines()
    text = "".join(lines) + lines[-1][: len(lines[-1]) // 2]  # crash mid-write
    path = tmp_path / "history.jsonl"
    path.write_text(text)
    history = load_history(path)
    assert history.truncated is True
    assert len(history.events) == len(lines)
    assert len(history.problems) == 1 and history.problems[0][0] == len(lines) + 1
    # The events before it are intact and checkable.
    assert history.events[-1].id == "1.2" and history.events[-1].type == OK


def test_truncated_line_only_counts_when_last():
    lines = simple_valid_run().history_lines()
    history = parse_lines(lines[:-1] + [lines[-1].rstrip("\n")])
    assert not history.truncated and not history.problems  # complete, just no newline
    history = parse_lines(lines + ['{"index": 99, "ti'])
    assert history.truncated


def test_corrupt_line_in_the_middle_is_a_problem(tmp_path):
    lines = simple_valid_run().history_lines()
    lines.insert(3, "{not json at all\n")
    lines.insert(5, json.dumps({"index": 1, "time": 1}) + "\n")  # missing fields
    lines.insert(7, json.dumps({"index": 1, "time": 1, "process": 0, "type": "bogus", "f": "read", "id": "x"}) + "\n")
    path = tmp_path / "history.jsonl"
    path.write_text("".join(lines))
    history = load_history(path)
    assert history.truncated is False
    assert [n for n, _ in history.problems] == [4, 6, 8]
    assert all("unparseable" in why for _, why in history.problems)
    assert len(history.events) == len(lines) - 3


# --------------------------------------------------------------------------
# log-sanity


def test_log_sanity_valid():
    history, log = simple_valid_run().build()
    assert_valid(log_sanity.check(history, log))


def test_log_sanity_gap():
    run = SynthRun()
    run.commit([(1, "w")])  # v1
    run.commit([(2, "w")], version=3)  # v2 missing
    history, log = run.build()
    res = log_sanity.check(history, log)
    assert_invalid(res, "log-gap")
    assert only(res, "log-gap")[0].versions == [2]


def test_log_sanity_unparseable_from_commits():
    run = SynthRun()
    run.commit([(1, "w")])
    run.raw_commit(2, {"add": "not a list of actions"})
    run.commit([(3, "w")], version=3)
    history, log = run.build()
    assert_invalid(log_sanity.check(history, log), "log-unparseable")


def _write_log(root, bodies: dict[int, bytes]) -> None:
    d = root / "_delta_log"
    d.mkdir(parents=True)
    for v, body in bodies.items():
        (d / f"{v:020d}.json").write_bytes(body)


def test_log_sanity_unparseable_commit_file(tmp_path):
    create = b"\n".join(json.dumps(a).encode() for a in create_actions()) + b"\n"
    _write_log(tmp_path, {0: create, 1: b'{"commitInfo": {"operation": "WRITE"}}\n{"add": {"pa'})
    log = read_log(str(tmp_path))
    res = log_sanity.check(History([]), log)
    assert_invalid(res, "log-unparseable")
    assert only(res, "log-unparseable")[0].versions == [1]


def test_log_sanity_multiple_metadata():
    run = SynthRun()
    run.commit([(1, "w")], extra_actions=create_actions()[1:] + create_actions()[2:])
    history, log = run.build()
    assert_invalid(log_sanity.check(history, log), "log-multiple-metadata")


def test_log_sanity_missing_commit_covered_by_checkpoint():
    run = SynthRun()
    for i in range(1, 4):
        run.commit([(i, "w")])
    del run.commits[2]
    history = run.history()
    ck = [a for v in (0, 1, 2) for a in run.commits.get(v, []) if "commitInfo" not in a]
    ck = create_actions()[1:] + [a for a in ck if "add" in a]
    log = TransactionLog.from_commits(
        [Commit(v, a) for v, a in sorted(run.commits.items())], run.file_tables, checkpoints={2: ck}
    )
    assert_invalid(log_sanity.check(history, log), "log-missing-commit")


def test_log_sanity_empty_log_is_unknown(tmp_path):
    res = log_sanity.check(History([]), TransactionLog.from_commits([]))
    assert res.verdict is Verdict.UNKNOWN
    assert res.anomalies == []
    assert "no transaction log" in res.explanation.lower()
    res = log_sanity.check(History([]), read_log(str(tmp_path / "nowhere")))
    assert res.verdict is Verdict.UNKNOWN


def test_log_sanity_a_data_file_missing_from_the_store_is_lost_data():
    """A file the log names and the store lacks is evidence (C7), unlike one
    the harness cannot decode (tests/test_check_stored_runs)."""
    run = SynthRun()
    run.commit([(1, "w")])
    del run.file_tables["f1.parquet"]
    history, log = run.build()
    res = log_sanity.check(history, log)
    assert res.verdict is Verdict.INVALID, res.explanation
    assert [(a.kind, a.claim, a.versions) for a in res.anomalies] == [("missing-data-file", "C7", [1])]
    assert "f1.parquet" in res.anomalies[0].explanation


# The reader's problem kinds that say the log itself is broken. Kept here so a
# new kind in harness/deltalog/ has to be classified consciously.
READER_PROBLEM_KINDS = {
    "gap",
    "coordinator-state-missing",
    "in-commit-timestamp",
    "missing-commit",
    "unparseable",
    "unreadable",
    "empty-log",
    "multiple-metadata",
    "multiple-protocol",
    "duplicate-file-action",
    "deletion-vector-unreadable",
    "checkpoint-unreadable",
    "checkpoint-broken",
    "checkpoint-mismatch",
    "last-checkpoint",
    "data-file-unreadable",
    "data-file-missing",
    "partition-value",
    "duplicate-version",
}


def test_reader_problem_kinds_are_known():
    import re
    from pathlib import Path

    import harness.deltalog as dl

    src = "".join(p.read_text() for p in sorted(Path(dl.__file__).parent.glob("*.py")))
    emitted = set(re.findall(r'LogProblem\(\s*"([a-z-]+)"', src))
    assert emitted, "no LogProblem kinds found: has the reader moved?"
    assert emitted <= READER_PROBLEM_KINDS, emitted - READER_PROBLEM_KINDS
    assert log_sanity._BROKEN <= READER_PROBLEM_KINDS


# --------------------------------------------------------------------------
# durability


def test_durability_valid_and_info_absent_is_fine():
    run = simple_valid_run()
    run.append("2.1", [7, 8], start=15, end=25, type=INFO, process=2)  # never committed
    run.append("3.1", [9], start=15, end=None, process=3)  # never completed
    run.append("4.1", [10], start=15, end=16, type=FAIL, process=4)
    history, log = run.build()
    res = durability.check(history, log)
    assert_valid(res)
    assert res.stats["acknowledged_writes"] == 2


def test_durability_lost_write():
    run = simple_valid_run()
    run.append("2.1", [7, 8], start=61, end=70, process=2)  # ok, in no commit
    history, log = run.build()
    res = durability.check(history, log)
    assert_invalid(res, "lost-write")
    a = only(res, "lost-write")[0]
    assert a.ops == ["2.1"] and a.rows == [7, 8]
    assert "2.1" in a.explanation


def test_durability_lost_rows():
    run = simple_valid_run()
    run.commit(removes=["f1.parquet"])  # v3 removes op 0.1's file
    history, log = run.build()
    res = durability.check(history, log)
    assert_invalid(res, "lost-rows")
    a = only(res, "lost-rows")[0]
    assert a.ops == ["0.1"] and sorted(a.rows) == [1, 2] and a.versions == [1, 3]


def test_durability_wrong_commit_version():
    run = SynthRun()
    for v in range(1, 4):
        run.commit([(100 + v, "setup")])
    run.append("0.1", [1], start=10, end=20, version=5)
    run.commit_op("0.1", [1])  # v4
    run.commit([(200, "setup")])  # v5
    history, log = run.build()
    res = durability.check(history, log)
    assert_invalid(res, "wrong-commit-version")
    assert only(res, "wrong-commit-version")[0].versions == [5, 4]


def test_durability_commit_info_names_another_op():
    run = SynthRun()
    run.append("0.1", [1], start=10, end=20, version=1)
    run.append("1.1", [2], start=10, end=20, version=2, process=1)
    run.commit_op("0.1", [1], tag=True)  # v1
    run.commit([(2, "1.1")], op="9.9")  # v2, commitInfo names someone else
    history, log = run.build()
    res = durability.check(history, log)
    assert_invalid(res, "wrong-commit-version")
    assert only(res, "wrong-commit-version")[0].ops == ["1.1", "9.9"]


def test_durability_empty_log_unknown():
    res = durability.check(History([]), TransactionLog.from_commits([]))
    assert res.verdict is Verdict.UNKNOWN


# --------------------------------------------------------------------------
# atomicity


def test_atomicity_valid_with_committed_info_op():
    run = simple_valid_run()
    run.append("2.1", [7, 8, 9], start=61, end=70, type=INFO, process=2)
    run.commit_op("2.1", [7, 8, 9])
    run.append("3.1", [11], start=61, end=None, process=3)  # never completed, committed
    run.commit_op("3.1", [11])
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_valid(res)
    assert res.stats["info_ops_committed"] == 2


def test_atomicity_partial_op():
    run = SynthRun()
    run.append("0.1", [1, 2, 3], start=10, end=20)
    run.commit([(1, "0.1"), (2, "0.1")])
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_invalid(res, "partial-op")
    a = only(res, "partial-op")[0]
    assert a.ops == ["0.1"] and a.rows == [3] and a.versions == [1]


def test_atomicity_partial_op_with_foreign_row():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    run.commit([(1, "0.1"), (2, "0.1"), (99, "0.1")])
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_invalid(res, "partial-op")
    assert only(res, "partial-op")[0].rows == [99]


def test_atomicity_failed_but_committed():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20, type=FAIL)
    run.commit_op("0.1", [1, 2])
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_invalid(res, "failed-but-committed")
    assert "partial-op" not in kinds(res)
    assert "ConcurrentAppendException" in only(res, "failed-but-committed")[0].explanation


def test_atomicity_split_op():
    run = SynthRun()
    run.append("0.1", [1, 2, 3], start=10, end=20)
    run.commit([(1, "0.1"), (2, "0.1")])  # v1
    run.commit([(3, "0.1")])  # v2
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_invalid(res, "split-op")
    assert only(res, "split-op")[0].versions == [1, 2]


def test_atomicity_orphan_rows():
    run = simple_valid_run()
    run.commit([(50, "7.7")])  # no op 7.7 was ever invoked
    run.commit([(51, "setup")])  # the harness' own rows are fine
    history, log = run.build()
    res = atomicity.check(history, log)
    assert_invalid(res, "orphan-rows")
    assert [a.ops for a in res.anomalies] == [["7.7"]]


def test_atomicity_orphans_not_judged_on_damaged_history():
    run = simple_valid_run()
    run.commit([(50, "7.7")])
    lines = run.history_lines()
    lines[-1] = lines[-1][:10]  # truncated: op 7.7's invoke may have been lost
    log = run.log()
    assert_valid(atomicity.check(parse_lines(lines), log))


# --------------------------------------------------------------------------
# duplicates


def test_duplicates_valid():
    history, log = simple_valid_run().build()
    assert_valid(duplicates.check(history, log))


def test_duplicates_row_removed_then_readded_is_fine():
    run = SynthRun()
    run.append("0.1", [1], start=10, end=20)
    run.commit_op("0.1", [1])  # v1
    run.commit(removes=["f1.parquet"])  # v2
    run.append("0.2", [2], start=30, end=40)
    run.commit([(1, "setup"), (2, "0.2")])  # v3: id 1 back, not alive twice
    history, log = run.build()
    assert_valid(duplicates.check(history, log))


def test_duplicates_duplicate_application():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    run.commit_op("0.1", [1, 2], tag=True)  # v1
    run.commit_op("0.1", [1, 2], tag=True)  # v2: a retried commit
    history, log = run.build()
    res = duplicates.check(history, log)
    assert_invalid(res, "duplicate-application")
    assert only(res, "duplicate-application")[0].versions == [1, 2]
    # The dj.op tags name 0.1 twice, but that is the same finding: one report.
    assert "duplicate-commit" not in kinds(res)
    # Nor are the rows it put in twice a duplicate-row each.
    assert set(kinds(res)) == {"duplicate-application"}, res.explanation
    assert res.explanation.startswith("1 op(s) were applied more than once.")


def test_a_live_file_added_again_is_one_file_a_duplicate_commit_and_no_duplicate_row():
    """A commit applied twice (delta-rs retrying a commit PUT the store had
    applied, then rebasing it) adds the same data file at two versions. The
    table is the set of live files (spec C4): the rows are there once, so a
    read of the later version returning them once is that version's state;
    the second commit is a duplicate-commit, never a duplicate row."""
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    first = run.commit_op("0.1", [1, 2])  # v1: f1.parquet
    run.raw_commit(2, [{"commitInfo": {"timestamp": 2, "operation": "WRITE"}}, add_action("f1.parquet", 2)])
    run.read("1.1", [1, 2], start=30, end=40, process=1, version=2)
    history, log = run.build()
    facts = table_facts(log)
    assert facts.state(2) == {1, 2} and facts.fingerprints[2] == facts.fingerprints[first]
    res = duplicates.check(history, log)
    assert_invalid(res, "duplicate-commit")
    assert set(kinds(res)) == {"duplicate-commit"}, res.explanation
    (a,) = only(res, "duplicate-commit")
    assert a.ops == ["0.1"] and a.versions == [1, 2] and "f1.parquet" in a.explanation
    assert_valid(read_validity.check(history, log))
    # A stats-only re-add (dataChange false) is no second commit of a change.
    run.raw_commit(2, [{"commitInfo": {"timestamp": 2, "operation": "WRITE"}}, {**add_action("f1.parquet", 2)}])
    run.commits[2][1]["add"]["dataChange"] = False
    history, log = run.build()
    assert_valid(duplicates.check(history, log))


def test_duplicates_duplicate_row():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    run.append("1.1", [2, 3], start=10, end=20, process=1)  # id 2 written twice
    run.commit_op("0.1", [1, 2])
    run.commit_op("1.1", [2, 3])
    history, log = run.build()
    res = duplicates.check(history, log)
    assert_invalid(res, "duplicate-row")
    a = only(res, "duplicate-row")[0]
    assert a.rows == [2] and a.versions == [1, 2] and a.ops == ["0.1", "1.1"]
    assert "duplicate-application" not in kinds(res)


def test_duplicates_duplicate_row_alive_until_later_remove():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    run.append("1.1", [2, 3], start=10, end=20, process=1)
    run.commit_op("0.1", [1, 2])  # v1
    run.commit_op("1.1", [2, 3])  # v2: id 2 twice from here...
    run.commit(removes=["f1.parquet"])  # v3: ...until the first copy goes
    history, log = run.build()
    res = duplicates.check(history, log)
    assert_invalid(res, "duplicate-row")
    assert only(res, "duplicate-row")[0].versions == [1, 2]


def test_duplicates_duplicate_commit():
    run = SynthRun()
    run.append("0.1", [1, 2], start=10, end=20)
    run.commit_op("0.1", [1, 2], tag=True)  # v1
    run.commit([], op="0.1")  # v2: another commit claiming op 0.1
    history, log = run.build()
    res = duplicates.check(history, log)
    assert_invalid(res, "duplicate-commit")
    assert kinds(res) == ["duplicate-commit"]
    assert only(res, "duplicate-commit")[0].versions == [1, 2]


# --------------------------------------------------------------------------
# read-validity


def three_versions() -> SynthRun:
    """Three sequential acknowledged appends: v1={1}, v2={1,2}, v3={1,2,3}."""
    run = SynthRun()
    for i, (start, end) in enumerate([(10, 20), (30, 40), (50, 60)], start=1):
        run.append(f"0.{i}", [i], start=start, end=end, version=i)
        run.commit_op(f"0.{i}", [i], tag=True)
    return run


def test_read_validity_valid_reads_at_various_versions():
    run = three_versions()
    run.read("1.1", [], start=1, end=5, process=1)  # v0, before anything
    run.read("1.2", [], start=6, end=35, process=1)  # v0: appends 0.1 not acked yet
    run.read("1.3", [1], start=36, end=38, process=1, version=1)
    run.read("2.1", [1, 2], start=25, end=55, process=2)  # concurrent with 0.2, 0.3
    run.read("2.2", [1, 2, 3], start=56, end=59, process=2)  # 0.3 in flight: may see it
    run.read("2.3", [1, 2, 3], start=70, end=80, process=2, version=3, final=True)
    run.read("3.1", None, start=12, end=14, process=3, type=FAIL)  # failed reads ignored
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_valid(res)
    assert res.stats == {"reads": 6, "final_reads": 1}


def test_read_validity_state_never_existed():
    run = three_versions()
    run.read("1.1", [1, 3], start=70, end=80, process=1)  # v1 rows + v3 rows, no v2
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "state-never-existed")
    a = only(res, "state-never-existed")[0]
    assert a.ops == ["1.1"] and a.rows == [2]
    assert "1.1" in a.explanation and "version 3" in a.explanation
    assert "1.1" in res.explanation


def test_read_validity_duplicate_ids_never_existed():
    run = three_versions()
    run.read("1.1", [1, 1], start=70, end=80, process=1)
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "state-never-existed")
    assert "twice" in only(res, "state-never-existed")[0].explanation


def test_read_validity_stale_read():
    run = three_versions()
    run.read("1.1", [1], start=45, end=48, process=1)  # 0.2 (v2) was acked at 40
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "stale-read")
    a = only(res, "stale-read")[0]
    assert a.ops == ["1.1"] and a.versions == [1, 2]
    assert "1.1" in a.explanation and "version 2" in a.explanation


def test_read_validity_a_commit_without_rows_narrows_the_window():
    """An acknowledged DELETE of everything adds no rows; its commit (found by
    the op id in its commitInfo) still bounds later reads: a read that
    starts after it was acknowledged and sees the rows is stale."""
    run = three_versions()
    run.invoke("0.4", "delete", {"where": "true"}, time=62, process=0)
    run.complete("0.4", OK, time=64)
    run.commit(op="0.4", removes=["f1.parquet", "f2.parquet", "f3.parquet"])  # v4: empty table
    run.read("1.1", [1, 2, 3], start=70, end=75, process=1)
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "stale-read")
    assert only(res, "stale-read")[0].versions == [3, 4]


def test_read_validity_ack_at_read_start_is_concurrent():
    run = three_versions()
    run.read("1.1", [1], start=40, end=48, process=1)  # ack of v2 at the same instant
    history, log = run.build()
    assert_valid(read_validity.check(history, log))


def test_read_validity_writer_invoked_at_read_end_is_concurrent():
    run = three_versions()
    run.read("1.1", [1, 2, 3], start=45, end=50, process=1)  # 0.3 invoked at 50
    history, log = run.build()
    assert_valid(read_validity.check(history, log))


def test_read_validity_floor_is_newest_acked_version_not_last_acked():
    # Acks in time order: v3 (t=40), v2 (t=60), v1 (t=65). A read starting at
    # t=62 follows the acks of v3 and v2, so its floor is v3, not v2.
    run = SynthRun()
    run.append("0.1", [1], start=10, end=65, version=1)
    run.append("1.1", [2], start=11, end=60, process=1, version=2)
    run.append("2.1", [3], start=12, end=40, process=2, version=3)
    for op, i in (("0.1", 1), ("1.1", 2), ("2.1", 3)):
        run.commit_op(op, [i])
    run.read("3.1", [1, 2], start=62, end=64, process=3)  # v2, but v3 acked at 40
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "stale-read")
    assert only(res, "stale-read")[0].versions == [2, 3]


def test_read_validity_ceiling_is_oldest_future_version():
    # Writers invoked after the read ended: 0.1 at t=30 commits v2, 1.1 at
    # t=25 commits v3. The read (ends t=20) may see at most v1.
    run = SynthRun()
    run.append("2.1", [9], start=1, end=5, process=2, version=1)
    run.append("0.1", [1], start=30, end=40, version=2)
    run.append("1.1", [2], start=25, end=50, process=1, version=3)
    run.commit_op("2.1", [9])
    run.commit_op("0.1", [1])
    run.commit_op("1.1", [2])
    run.read("3.1", [1, 9], start=10, end=20, process=3)  # v2
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "future-read")
    assert only(res, "future-read")[0].versions == [2, 1]


def test_read_validity_future_read():
    run = three_versions()
    run.read("1.1", [1, 2, 3], start=21, end=29, process=1)  # 0.3 invoked at 50
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "future-read")
    a = only(res, "future-read")[0]
    assert a.ops == ["1.1"] and a.versions == [3, 1]
    assert "1.1" in a.explanation and "version(s) 3" in a.explanation


def test_read_validity_read_version_mismatch():
    run = three_versions()
    run.read("1.1", [1, 2], start=70, end=80, process=1, version=3)  # v2's rows, says v3
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "read-version-mismatch")
    a = only(res, "read-version-mismatch")[0]
    assert a.ops == ["1.1"] and a.versions == [3] and a.rows == [3]
    assert "1.1" in a.explanation and "version 3" in a.explanation


def test_read_validity_reported_version_past_end():
    run = three_versions()
    run.read("1.1", [1, 2, 3], start=70, end=80, process=1, version=9)
    history, log = run.build()
    assert_invalid(read_validity.check(history, log), "read-version-mismatch")


def test_read_validity_sees_removes():
    run = three_versions()
    run.commit(removes=["f2.parquet"])  # v4 = {1, 3}
    run.read("1.1", [1, 3], start=70, end=80, process=1)
    history, log = run.build()
    assert_valid(read_validity.check(history, log))


def test_read_validity_empty_log_unknown():
    run = SynthRun(create=False)
    run.read("1.1", [], start=1, end=2)
    history, log = run.build()
    assert read_validity.check(history, log).verdict is Verdict.UNKNOWN


@pytest.mark.parametrize("name", sorted(APPEND_CHECKERS))
def test_checkers_ignore_harness_processes(name):
    run = simple_valid_run()
    run.invoke("setup.1", "create-table", {"columns": []}, time=0, process="setup")
    run.complete("setup.1", OK, time=1, version=0)
    history, log = run.build()
    assert_valid(CHECKERS[name](history, log))


def test_read_validity_reads_going_back_in_time():
    # Both reads are inside their write windows (no ack precedes them), but
    # the second began after the first ended and saw an older version.
    run = SynthRun()
    run.append("0.1", [1], start=10, end=None)  # never acknowledged
    run.append("0.2", [2], start=11, end=None, process=2)
    run.commit_op("0.1", [1])
    run.commit_op("0.2", [2])
    run.read("1.1", [1, 2], start=20, end=30, process=1)  # version 2
    run.read("3.1", [1], start=35, end=40, process=3)  # version 1, after 1.1 ended
    history, log = run.build()
    res = read_validity.check(history, log)
    assert_invalid(res, "stale-read")
    a = only(res, "stale-read")[0]
    assert a.ops == ["3.1", "1.1"] and a.versions == [1, 2]
    assert "back in time" in a.explanation


def test_read_validity_concurrent_reads_may_see_either_order():
    run = SynthRun()
    run.append("0.1", [1], start=10, end=None)
    run.append("0.2", [2], start=11, end=None, process=2)
    run.commit_op("0.1", [1])
    run.commit_op("0.2", [2])
    run.read("1.1", [1, 2], start=20, end=30, process=1)
    run.read("3.1", [1], start=25, end=40, process=3)  # overlaps 1.1: allowed
    history, log = run.build()
    assert_valid(read_validity.check(history, log))


def test_snapshot_mismatch_between_read_version_and_data():
    """A transaction whose recovered reads contradict the read version the
    log records: it replaced a version already superseded at that version."""
    from checkers.txn_graph import analyze
    from checkers.txn_model import INITIAL, Txn, TxnHistory, Write

    a = Txn("a", 1, 0, writes=(Write(1, INITIAL),))
    b = Txn("b", 2, 1, writes=(Write(1, INITIAL),))  # read version 1 already has a's version of row 1
    res = analyze(TxnHistory([a, b]))
    kinds = [x.kind for x in res.anomalies]
    assert "snapshot-mismatch" in kinds and "G-single" in kinds
    text = next(x for x in res.anomalies if x.kind == "snapshot-mismatch").explanation
    assert "version 1" in text and "txn a" in text

    c = Txn("c", 1, 0, reads=(), writes=(Write(5),))
    d = Txn("d", 2, 0, writes=(Write(5, "c"),))  # read version 0, yet read c's version (committed at 1)
    res = analyze(TxnHistory([c, d]))
    assert [x.kind for x in res.anomalies] == ["snapshot-mismatch"]
    assert "committed after that read version" in res.anomalies[0].explanation


def test_copy_on_write_rewrite_is_not_a_reapplication():
    """An UPDATE rewrites a file: rows it leaves unchanged come back in the new
    file with the same id and writer. That is neither a duplicate application
    nor a split op, and the row versions' lives continue."""
    run = SynthRun()
    run.append("0.1", [1, 2, 3], start=10, end=20)
    run.commit_op("0.1", [1, 2, 3])  # v1: f1 = rows 1,2,3 by 0.1
    v2 = run.commit([(1, "0.1"), (3, "0.1"), (20, "1.1")], removes=["f1.parquet"])  # 1.1 replaced row 2
    run.invoke("1.1", "write", {"key": 2, "ids": [20]}, time=30, process=1)
    run.complete("1.1", "ok", time=40)
    history, log = run.build()
    for check in (atomicity.check, duplicates.check, durability.check):
        assert_valid(check(history, log))
    facts = table_facts(log)
    assert facts.state(v2) == {1, 3, 20}
    assert facts.writer_rows["0.1"] == {1: [1, 2, 3]}


def test_summary_counts_error_classes_per_op_and_the_conflict_rate() -> None:
    from harness.check.pipeline import _history_stats, render_summary
    from tests.synth import SynthRun

    run = SynthRun()
    run.append("0.1", [1], start=10, end=20)
    run.append("1.1", [2], start=11, end=21, type="fail", process=1)  # E1 by default
    run.append(
        "2.1",
        [3],
        start=12,
        end=22,
        type="fail",
        process=2,
        error={"class": "commit-conflict-unclassified", "raw": "Failed to commit transaction: 0"},
    )
    run.invoke("3.1", "optimize", {}, time=13, process=3)
    run.complete("3.1", "fail", time=23, error={"class": "unsupported", "raw": "sail cannot run 'optimize'"})
    run.read("0.2", [1], start=30, end=40)
    h = _history_stats(run.history(), {})
    assert h["error_classes_by_f"] == {
        "append": {"ConcurrentAppendException": 1, "commit-conflict-unclassified": 1},
        "optimize": {"unsupported": 1},
    }
    assert (h["conflicts"], h["write_ops"]) == (2, 4)
    assert h["conflict_rate"] == 0.5
    text = render_summary(Path("r"), Verdict.VALID, [], h, {"log": {"latest_version": 1}}, {})
    assert "ConcurrentAppendException (E1) x1" in text
    assert "conflict rate: 2/4 write ops (50.0%)" in text
    assert "not tested, the engine cannot run them" in text and "optimize x1" in text


# Checkers judged from the history alone: a conflict's exception class needs
# no log, nor does an op that got no reply.
HISTORY_ONLY = {"exception-classes", "liveness"}


@pytest.mark.parametrize("name", sorted(set(CHECKERS) - HISTORY_ONLY))
def test_no_log_is_never_valid(name: str, tmp_path: Path) -> None:
    """A history with acknowledged, failed and indeterminate writes and no
    log (a killed harness whose store was in memory): no checker that
    needs the log says valid on no evidence."""
    run = simple_valid_run()
    run.append("2.1", [7, 8, 9], start=61, end=70, type=INFO, process=2)
    history, _ = run.build()
    for log in (TransactionLog.from_commits([]), read_log(str(tmp_path / "nowhere"))):
        res = CHECKERS[name](history, log)
        assert res.verdict is not Verdict.VALID, (name, res.explanation)
