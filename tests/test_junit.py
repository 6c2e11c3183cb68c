"""--junit-xml: what CI reads. Every file is validated against the common
JUnit shape (tests/fixtures/junit.xsd); a failing checker is a <failure>
carrying its anomalies and their claims, an undecided one <skipped>, a
harness error <error>, never a failure."""

from __future__ import annotations

import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from checkers.base import Anomaly, CheckResult, Verdict
from harness.check import junit
from harness.check.pipeline import Report
from harness.core.errors import HarnessError
from tests.conftest import REPO, run_cli

SCHEMA = Path(__file__).parent / "fixtures" / "junit.xsd"
ARCHIVE = Path(__file__).parent / "fixtures" / "runs-before-issue-12.tar.gz"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMA))


def cases(path: Path) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.parse(path).getroot().iter("testcase")}


def synthetic_report(run_dir: Path) -> Report:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.json").write_text('{"spec": {"workload": "append", "engine": "delta-rs"}}')
    lost = Anomaly("lost-write", "C7", "Op 1.14 was acknowledged ok, but no commit holds its rows.", ops=["1.14"])
    results = [
        CheckResult("log-sanity", Verdict.VALID, "Versions 0..3 are contiguous."),
        CheckResult("durability", Verdict.INVALID, "1 acknowledged write lost.", [lost]),
        CheckResult("serializability", Verdict.UNKNOWN, "The cycle search ran out of time."),
    ]
    doc = {"check_seconds": 0.25, "history": {"problems": [], "harness_faults": []}}
    return Report(run_dir, Verdict.INVALID, results, doc, "verdict: INVALID\n")


def test_a_report_maps_checkers_to_testcases(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    out = tmp_path / "junit.xml"
    junit.write(out, [junit.report_suite(synthetic_report(tmp_path / "run"))])
    schema.validate(str(out))
    got = cases(out)
    assert set(got) == {"log-sanity", "durability", "serializability"}
    assert {c.get("classname") for c in got.values()} == {"delta-jepsen.append.delta-rs"}
    assert len(got["log-sanity"]) == 1 and got["log-sanity"][0].tag == "system-out"  # a pass
    failure = got["durability"].find("failure")
    assert failure is not None and failure.get("type") == "lost-write"
    assert "spec C7" in failure.get("message", "") and "Op 1.14 was acknowledged ok" in (failure.text or "")
    skipped = got["serializability"].find("skipped")
    assert skipped is not None and skipped.get("message") == "The cycle search ran out of time."
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite is not None
    counts = [suite.get(k) for k in ("tests", "failures", "skipped", "errors")]
    assert counts == ["3", "1", "1", "0"]
    assert suite.get("time") == "0.250"


def test_an_unknown_verdict_with_no_unknown_checker_says_why(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    report = synthetic_report(tmp_path / "run")
    report.results = report.results[:1]
    report.verdict = Verdict.UNKNOWN
    report.doc["history"]["problems"] = ["line 7: not JSON"]
    out = tmp_path / "junit.xml"
    junit.write(out, [junit.report_suite(report)])
    schema.validate(str(out))
    skipped = cases(out)["history"].find("skipped")
    assert skipped is not None and "line 7: not JSON" in skipped.get("message", "")


def test_a_harness_error_is_an_error_never_a_failure(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    out = tmp_path / "junit.xml"
    with pytest.raises(HarnessError), junit.recording(out, "delta-jepsen.check", "delta-jepsen.check") as rec:
        rec.suites.append(junit.Suite("s", [junit.Case("log-sanity", "c")]))
        raise HarnessError("the S3 server went away")
    schema.validate(str(out))
    got = cases(out)
    assert got["log-sanity"].find("*") is None
    error = got["harness"].find("error")
    assert error is not None and "the S3 server went away" in error.get("message", "")
    assert ET.parse(out).getroot().get("failures") == "0"


def test_text_the_xml_cannot_carry_is_replaced(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    out = tmp_path / "junit.xml"
    raw = "\x1b[31mConcurrentAppendException\x1b[0m\x00"
    junit.write(out, [junit.Suite("s", [junit.Case("c", "k", junit.FAILURE, message=raw, type="E1", text=raw)])])
    schema.validate(str(out))
    assert "?[31mConcurrentAppendException" in (cases(out)["c"].find("failure").text or "")  # type: ignore[union-attr]


def test_an_unusable_path_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="is a directory"):
        junit.check_target(tmp_path)
    with pytest.raises(HarnessError, match="no such directory"):
        junit.check_target(tmp_path / "nope" / "junit.xml")
    assert junit.check_target(None) is None
    assert junit.check_target(tmp_path / "j.xml") == tmp_path / "j.xml"
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind


def test_cli_unwritable_path_exits_2_in_one_line(tmp_path: Path) -> None:
    r = run_cli("check", str(tmp_path), "--junit-xml", str(tmp_path / "nope" / "junit.xml"), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "--junit-xml" in r.stderr


def test_cli_check_of_no_run_folder_writes_an_error(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    out = tmp_path / "junit.xml"
    r = run_cli("check", str(tmp_path / "missing"), "--junit-xml", str(out), timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    schema.validate(str(out))
    assert cases(out)["harness"].find("error") is not None


def test_check_of_a_stored_run_with_a_lost_write(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith("append-delta-rs_lost-write")]
        assert all(not m.name.startswith(("/", "..")) and (m.isfile() or m.isdir()) for m in members)
        tar.extractall(tmp_path, members=members)
    out = tmp_path / "junit.xml"
    r = run_cli("check", str(tmp_path / "append-delta-rs_lost-write"), "--junit-xml", str(out), timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # written even though the verdict is invalid
    schema.validate(str(out))
    got = cases(out)
    failures = {n: c.find("failure") for n, c in got.items() if c.find("failure") is not None}
    assert sorted(failures) == ["durability", "read-validity"]
    assert failures["durability"].get("type") == "lost-write"  # type: ignore[union-attr]
    assert "spec C7" in (failures["durability"].text or "")  # type: ignore[union-attr]
    assert failures["read-validity"].get("type") == "state-never-existed"  # type: ignore[union-attr]
    assert all(c.get("classname") == "delta-jepsen.append.delta-rs" for c in got.values())


@pytest.mark.integration
def test_a_real_run_writes_junit(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    pytest.importorskip("deltalake")
    out = tmp_path / "junit.xml"
    r = run_cli(
        "run",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--time-limit",
        "4",
        "--no-progress",
        "--results-dir",
        str(tmp_path / "results"),
        "--junit-xml",
        str(out),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    schema.validate(str(out))
    got = cases(out)
    verdicts = [line.split()[:2] for line in r.stdout.splitlines() if line.startswith("  ") and len(line.split()) > 1]
    checkers = [name for name, verdict in verdicts if verdict in ("valid", "invalid", "unknown")]
    assert checkers and sorted(got) == sorted(checkers)
    assert all(c.find("failure") is None and c.find("error") is None for c in got.values())
    assert {c.get("classname") for c in got.values()} == {"delta-jepsen.append.delta-rs"}


@pytest.mark.integration
def test_an_interrupted_run_is_reported_as_such(tmp_path: Path, schema: xmlschema.XMLSchema) -> None:
    """Exit 130 checks the partial history: its verdicts are written, and one
    <error> says the run did not finish, so CI never reads it as a pass."""
    pytest.importorskip("deltalake")
    out, results = tmp_path / "junit.xml", tmp_path / "results"
    argv = ["run", "--engine", "delta-rs", "--storage", "local", "--time-limit", "120", "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *argv, "--results-dir", str(results), "--junit-xml", str(out)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            runs = list(results.glob("*/*/history.jsonl"))
            if runs and runs[0].read_text().count('"type":"ok"') >= 6:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        else:
            pytest.fail("the run made no progress")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stdout + stderr
    schema.validate(str(out))
    got = cases(out)
    error = got["interrupted"].find("error")
    assert error is not None and error.get("type") == "interrupted" and "interrupted" in error.get("message", "")
    assert "durability" in got  # the partial run's checkers are there too
