"""`check` needs only the run folder: the tables a workload writes
beside its own are recorded in spec.json, and folders written before that
record still check the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checkers.create_race import NAME as CREATE_RACE
from harness.core.table import Column, TableDeclaration, TableSpec
from tests.conftest import load_results, only_run_dir, run_cli


def _create_race(run_dir: Path) -> dict:
    return next(c for c in load_results(run_dir)["checkers"] if c["checker"] == CREATE_RACE)


@pytest.mark.integration
def test_related_tables_are_read_from_the_run_folder(results_dir: Path) -> None:
    p = run_cli(
        "run",
        "--workload",
        "create-race",
        "--engine",
        "delta-rs",
        "--storage",
        "local",
        "--time-limit",
        "4",
        "--concurrency",
        "3",
        "--no-progress",
        "--results-dir",
        str(results_dir),
        timeout=240,
    )
    assert p.returncode in (0, 1), p.stderr[-2000:]
    run_dir = only_run_dir(results_dir)
    spec_path = run_dir / "spec.json"
    spec = json.loads(spec_path.read_text())
    assert spec["related_tables"] == ["races/*"]
    first = _create_race(run_dir)
    assert first["stats"]["rounds"] > 0

    # A folder from before the record: the same rounds, the same verdict.
    del spec["related_tables"]
    spec_path.write_text(json.dumps(spec))
    assert run_cli("check", str(run_dir)).returncode == p.returncode
    legacy = _create_race(run_dir)
    assert (legacy["verdict"], legacy["stats"]) == (first["verdict"], first["stats"])

    # The record is what check reads: with none recorded, the rounds' tables
    # are not read, and their acknowledged creates look lost.
    spec["related_tables"] = []
    spec_path.write_text(json.dumps(spec))
    assert run_cli("check", str(run_dir)).returncode == 1
    blind = _create_race(run_dir)
    assert first["verdict"] != "invalid" or "lost-create" not in {a["kind"] for a in first["anomalies"]}
    assert "lost-create" in {a["kind"] for a in blind["anomalies"]}


def test_a_mixed_engine_declaration_round_trips() -> None:
    d = TableDeclaration(
        table=TableSpec((Column("id", "BIGINT"),)),
        engine="sail",
        default_isolation="WriteSerializable",
        row_key="k",
        predicate_column="k",
        node_engines={"n1": "sail", "n2": "delta-rs"},
        default_isolation_by_engine={"sail": "WriteSerializable", "delta-rs": "Serializable"},
    )
    doc = json.loads(json.dumps(d.to_json()))
    assert TableDeclaration.from_json(doc) == d
    assert TableDeclaration.from_json({}) == TableDeclaration()
