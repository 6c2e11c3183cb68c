"""The test plan: built once from a RunSpec, every part checked
before anything starts, and what spec.json records of it."""

from __future__ import annotations

import pytest

from checkers import CHECKERS
from harness.core.errors import HarnessError
from harness.run.plan import RunSpec, TestPlan


def test_a_plan_composes_the_run_and_records_it() -> None:
    plan = TestPlan.build(RunSpec(workload="create-race", engine="sail,delta-rs", storage="local", seed=3))
    assert [e.name for e in plan.engines] == ["sail", "delta-rs"] and plan.engine.name == "sail"
    assert plan.checkers[-2:] == ["exception-classes", "liveness"] and set(plan.checkers) <= set(CHECKERS)
    doc = plan.to_json()
    assert doc["related_tables"] == ["races/*"]
    assert doc["repro"].startswith("delta-jepsen run --workload create-race --engine sail,delta-rs")
    assert RunSpec.from_json(doc["spec"]) == plan.spec
    assert set(doc["engines"]) == {"sail", "delta-rs"}


@pytest.mark.parametrize(
    "spec, message",
    [
        (RunSpec(workload="nope"), "unknown workload 'nope'"),
        (RunSpec(engine="nope"), "unknown engine 'nope'"),
        (RunSpec(storage="nope"), "unknown storage 'nope'"),
        (RunSpec(isolation="Snapshot"), "unknown isolation level 'Snapshot'"),
        (RunSpec(log_store="nope"), "unknown --log-store 'nope'"),
        (RunSpec(storage="local", nemesis=["partition"]), "partition"),
    ],
)
def test_bad_input_is_refused_before_anything_starts(spec: RunSpec, message: str) -> None:
    with pytest.raises(HarnessError, match=message):
        TestPlan.build(spec)


def test_delta_spark_on_seaweedfs_goes_through_the_proxy_which_decodes_its_chunked_uploads() -> None:
    plan = TestPlan.build(RunSpec(engine="delta-rs,delta-spark", storage="seaweedfs"))
    assert plan.spec.s3_proxy and "--s3-proxy" in plan.spec.cli_args()
    assert not TestPlan.build(RunSpec(engine="delta-rs", storage="seaweedfs")).spec.s3_proxy


def test_the_matrix_runs_a_cell_with_the_arguments_its_spec_gives() -> None:
    spec = RunSpec(workload="bank", engine="delta-rs", isolation="Serializable", storage="local", seed=9)
    args = spec.cli_args()
    assert args[args.index("--isolation") + 1] == "Serializable" and args[args.index("--seed") + 1] == "9"
    assert "--spark-jars" not in args and "--local-root" not in args
