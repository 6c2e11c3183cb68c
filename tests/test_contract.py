"""A run outside its engines' or store's documented contract says so, and a
lost commit names the commit that replaced it.

The stored run (tests/fixtures/two-jvm-single-driver.tar.gz) is a real
`delta-jepsen run` of the append workload on two delta-spark JVMs with
S3SingleDriverLogStore on embedded S3: one acknowledged append (op 0.2 on n1)
is lost. Both JVMs logged committing version 1, and the log's version 1 holds
op 3.1 of n2. Its JVM logs are cut to their "Committed delta" lines."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from harness.check.junit import report_suite
from harness.check.pipeline import check_run
from harness.core.contract import LOST_COMMIT_KINDS, breaches, outside_contract_text
from harness.run.plan import RunSpec

FIXTURE = Path(__file__).parent / "fixtures" / "two-jvm-single-driver.tar.gz"


@pytest.fixture
def stored_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(run, filter="data")
    return run


def _spec(**kw: object) -> dict:
    return {"engine": "delta-spark", "storage": "s3", "nodes": 2, "log_store": "coordinated", **kw}


@pytest.mark.parametrize(
    ("spec", "outside"),
    [
        (_spec(), False),  # coordinated commits: Delta's way for several clusters
        (_spec(log_store="single-driver"), True),
        (_spec(log_store="default"), True),  # the name stored runs give it
        (_spec(log_store="single-driver", nodes=1), False),  # one driver: its contract
        # HDFSLogStore on a local directory: Hadoop's check and rename are two
        # steps, so one JVM only, alone.
        (_spec(storage="local"), True),
        (_spec(storage="local", nodes=1), False),
        (_spec(engine="delta-spark,delta-rs", storage="local", nodes=1), True),
        (_spec(engine="delta-rs,sail", storage="local"), False),  # both create-if-absent
        (_spec(engine="sail", storage="local", nodes=3), False),
        (_spec(engine="delta-rs", log_store="single-driver"), False),  # no delta-spark cluster at all
        (_spec(engine="delta-rs,sail"), False),  # both commit by put-if-absent
        (_spec(engine="delta-spark,delta-rs"), True),  # two commit primitives on one table
        (_spec(nemesis=["unsafe-put"]), True),
        (_spec(nemesis=["stale-list"]), True),
        (_spec(nemesis=["kill", "ambiguous"]), False),
        (_spec(workload="create-race"), True),  # version 0 goes through the file system
        (_spec(workload="create-race", nodes=1), False),
    ],
)
def test_which_runs_leave_the_contract(spec, outside):
    found = breaches(spec)
    assert bool(found) is outside, [b.why for b in found]
    assert bool(outside_contract_text(found)) is outside


@pytest.mark.parametrize(
    ("engine", "storage", "nodes"),
    [
        ("delta-spark", "local", 1),  # a second JVM would be outside HDFSLogStore's contract
        ("delta-spark==3.3.2", "local", 1),
        ("delta-spark", "s3", 2),  # coordinated commits let two clusters write
        ("delta-spark,delta-rs", "local", 2),  # outside contract on any count: says so
        ("delta-rs", "local", 2),
        ("sail", "seaweedfs", 2),
    ],
)
def test_a_run_naming_no_node_count_starts_one_inside_the_contract(engine, storage, nodes):
    spec = RunSpec(engine=engine, storage=storage)
    assert spec.nodes == nodes
    assert RunSpec(engine=engine, storage=storage, nodes=3).nodes == 3  # a count given stays
    # The re-run command names the count, so it runs the same on a release
    # whose default differs.
    assert spec.cli_args()[spec.cli_args().index("--nodes") + 1] == str(nodes)
    if engine != "delta-spark,delta-rs":
        assert breaches(spec.to_json()) == [], engine


def test_the_single_driver_breach_explains_the_lost_commits_it_causes():
    (b,) = breaches(_spec(log_store="single-driver"))
    assert "S3SingleDriverLogStore" in b.why and "2 delta-spark clusters" in b.why
    assert {"lost-write", "state-never-existed", "multiple-creators"} <= b.explains == LOST_COMMIT_KINDS


def test_a_stored_two_jvm_run_is_outside_contract_and_names_the_commit_that_replaced_the_lost_one(stored_run):
    report = check_run(stored_run)
    assert report.exit_code == 1  # the guarantee did not hold: still invalid
    first = report.summary.splitlines()[0]
    assert first.startswith("verdict: INVALID (outside contract: 2 delta-spark clusters write one table through ")
    assert report.doc["contract"]["inside"] is False
    (lost,) = [a for r in report.results for a in r.anomalies]
    assert lost.kind == "lost-write" and lost.ops == ["0.2"]
    assert lost.explanation.startswith("Outside contract (2 delta-spark clusters")
    assert lost.details["replaced_by"] == [
        {
            "version": 1,
            "logged_by": "n1",
            "logged_txn": "e31775ac",
            "now_op": "3.1",
            "now_node": "n2",
            "now_txn": "6dfe433c",
        }
    ]
    assert "version 1 now holds op 3.1 of node n2" in lost.explanation
    # Every place a person reads it: results.json, summary.txt, report.html.
    doc = json.loads((stored_run / "results.json").read_text())
    assert doc["contract"]["outside"].startswith("outside contract: 2 delta-spark clusters")
    assert "outside contract" in (stored_run / "summary.txt").read_text().splitlines()[0]
    assert 'id="outside-contract"' in (stored_run / "report.html").read_text()
    (case,) = [c for c in report_suite(report).cases if c.name == "durability"]
    assert case.message == "1 anomaly: lost-write (spec C7); 1 outside contract"


def test_the_same_run_inside_its_contract_would_blame_nothing_on_the_contract(stored_run):
    # Were the run's protocol coordinated commits, the lost write would be the
    # engine's: no "outside contract" anywhere, and the evidence still names it.
    spec = json.loads((stored_run / "spec.json").read_text())
    spec["spec"]["log_store"] = "coordinated"
    (stored_run / "spec.json").write_text(json.dumps(spec))
    report = check_run(stored_run, write=False)
    assert report.exit_code == 1 and report.doc["contract"]["inside"] is True
    assert "outside contract" not in report.summary
    (lost,) = [a for r in report.results for a in r.anomalies]
    assert lost.details["replaced_by"][0]["now_op"] == "3.1"
