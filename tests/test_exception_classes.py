"""The exception-class checker (spec E-list): a conflict with no class, or
with a class the log rules out, is a finding; --strict-exceptions (the
create-table facts' strict_exceptions) makes it fail the run."""

from __future__ import annotations

from checkers import exception_classes
from checkers.base import Verdict
from harness.core.history import FAIL, OK
from tests.synth import SynthRun


def _run(strict: bool = False) -> SynthRun:
    run = SynthRun()
    run.invoke("setup.0", "create-table", {"strict_exceptions": strict}, time=0, process="setup")
    run.complete("setup.0", OK, time=1, version=0)
    run.append("0.1", [1], start=10, end=20, version=1)
    run.commit_op("0.1", [1])
    return run


def _conflict(run: SynthRun, op_id: str, f: str, cls: str, value: dict | None = None, t: int = 30) -> None:
    run.invoke(op_id, f, value or {"ids": [int(op_id.split(".")[1]) + 100]}, time=t, process=1)
    run.complete(op_id, FAIL, time=t + 5, error={"class": cls, "raw": f"{cls}: synthetic"})


def _findings(res) -> list[tuple[str, str | None, str]]:
    return [(d["kind"], d["claim"], d["op"]) for d in res.stats.get("deviations", [])] or [
        (a.kind, a.claim, a.ops[0]) for a in res.anomalies
    ]


def test_right_classes_are_no_finding() -> None:
    run = _run()
    _conflict(run, "1.1", "append", "ConcurrentAppendException")
    res = exception_classes.check(*run.build())
    assert res.verdict is Verdict.VALID and not _findings(res), res.explanation
    assert res.stats["by_class"] == {"ConcurrentAppendException": 1}


def test_an_unclassified_conflict_is_a_finding_and_strict_fails() -> None:
    run = _run()
    _conflict(run, "1.1", "update", "commit-conflict-unclassified", {"where": "k = 1"})
    res = exception_classes.check(*run.build())
    assert res.verdict is Verdict.VALID  # a finding, not a safety violation
    assert _findings(res) == [("conflict-unclassified", "E1-E6", "1.1")]
    assert "--strict-exceptions" in res.explanation
    strict = _run(strict=True)
    _conflict(strict, "1.1", "update", "commit-conflict-unclassified", {"where": "k = 1"})
    res = exception_classes.check(*strict.build())
    assert res.verdict is Verdict.INVALID
    assert [(a.kind, a.claim) for a in res.anomalies] == [("conflict-unclassified", "E1-E6")]


def test_classes_the_log_rules_out_are_findings() -> None:
    run = _run()
    _conflict(run, "1.1", "append", "ConcurrentDeleteDeleteException", t=30)  # a blind append deletes nothing
    _conflict(run, "1.2", "update", "MetadataChangedException", {"where": "k = 1"}, t=40)  # no metadata change
    _conflict(run, "1.3", "update", "ConcurrentTransactionException", {"where": "k = 1"}, t=50)  # no app id
    _conflict(run, "1.4", "update", "ConcurrentDeleteReadException", {"where": "k = 1"}, t=60)  # nothing removed
    _conflict(run, "1.5", "append", "ProtocolChangedException", t=70)  # no protocol change, no create
    res = exception_classes.check(*run.build())
    assert _findings(res) == [
        ("wrong-conflict-class", "E3", "1.1"),
        ("wrong-conflict-class", "E4", "1.2"),
        ("wrong-conflict-class", "E5", "1.3"),
        ("wrong-conflict-class", "E2", "1.4"),
        ("wrong-conflict-class", "E6", "1.5"),
    ]


def test_the_same_classes_are_fine_where_the_log_allows_them() -> None:
    run = _run()
    meta = {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": '{"type":"struct","fields":[]}',
            "partitionColumns": [],
            "configuration": {"x": "1"},
        }
    }
    run.commit(
        removes=["f1.parquet"], extra_actions=[meta, {"protocol": {"minReaderVersion": 1, "minWriterVersion": 3}}]
    )
    _conflict(run, "1.2", "update", "MetadataChangedException", {"where": "k = 1"}, t=40)
    _conflict(
        run, "1.3", "write", "ConcurrentTransactionException", {"ids": [5], "app_id": "a", "txn_version": 1}, t=50
    )
    _conflict(run, "1.4", "update", "ConcurrentDeleteReadException", {"where": "k = 1"}, t=60)
    _conflict(run, "1.5", "append", "ProtocolChangedException", t=70)
    _conflict(run, "1.6", "delete", "ConcurrentDeleteDeleteException", {"where": "k = 1"}, t=80)
    res = exception_classes.check(*run.build())
    assert res.verdict is Verdict.VALID and not _findings(res), _findings(res)


# ---------------------------------------------------------------------------
# A real run: Sail reports every UPDATE conflict as "Failed to commit
# transaction: 0" (README finding), i.e. with no E-class.

import pytest  # noqa: E402

from tests.conftest import load_results, only_run_dir, run_cli  # noqa: E402


@pytest.mark.integration
@pytest.mark.parametrize("strict", [False, True])
def test_sail_unclassified_conflicts_are_findings_and_strict_fails_the_run(results_dir, strict: bool) -> None:
    args = [
        "run",
        "--workload",
        "bank",
        "--engine",
        "sail",
        "--storage",
        "local",
        "--nodes",
        "1",
        "--concurrency",
        "4",
        "--time-limit",
        "6",
        "--seed",
        "7",
        "--results-dir",
        str(results_dir),
        "--no-progress",
    ]
    res = run_cli(*args, *(["--strict-exceptions"] if strict else []))
    run = only_run_dir(results_dir)
    doc = load_results(run)
    exc = next(c for c in doc["checkers"] if c["checker"] == "exception-classes")
    assert exc["stats"]["findings"].get("conflict-unclassified", 0) > 0, exc
    others = [c["verdict"] for c in doc["checkers"] if c["checker"] != "exception-classes"]
    if strict:
        assert exc["verdict"] == "invalid" and res.returncode == 1, res.stdout + res.stderr
        assert "--strict-exceptions" in doc["repro"]
    else:
        assert exc["verdict"] == "valid", exc
        assert res.returncode == (0 if set(others) == {"valid"} else 3 if "invalid" not in others else 1)
        summary = (run / "summary.txt").read_text()
        assert "exception-class findings (spec E-list; not safety" in summary
        assert "conflict-unclassified (E1-E6)" in summary
