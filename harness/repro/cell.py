"""Reproduce a deviating conformance cell: run it again K times through the
matrix's own runner and judge, and emit the standalone script of its two
transactions. A cell is already a minimal schedule (two transactions on one
snapshot): nothing to shrink."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core.errors import HarnessError
from harness.engines import ENGINE_NAMES
from harness.engines.envs import ensure
from harness.engines.releases import env_request, parse_engine_release
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.matrix import run_cells
from harness.matrices.conformance.rows import APP_ID, COLUMNS, SETUP, OpPlan, plans, table_spec
from harness.repro.extract import NothingToReproduce, load_json
from harness.repro.report import cell_report
from harness.repro.reproduce import run_script
from harness.repro.sail_script import sail_cell_script
from harness.repro.schedule import OK, Schedule, Txn
from harness.repro.standalone import REPORT_NAME, SCRIPT_NAME, deltars_script

CONFORMS = "conforms"
DEVIATIONS = ("deviates-safety", "deviates-availability")


@dataclass
class CellOutcome:
    cell_id: str
    engine: str
    original: dict[str, Any]  # the cell's row of conformance.json
    verdicts: list[str] = field(default_factory=list)  # one per repetition
    observed: list[str] = field(default_factory=list)
    schedule: Schedule | None = None
    out_dir: Path | None = None
    script: dict[str, Any] | None = None

    @property
    def reproduced(self) -> int:
        return sum(1 for v in self.verdicts if v == self.original["verdict"])

    @property
    def exit_code(self) -> int:
        return 1 if self.reproduced else 3

    def to_json(self) -> dict[str, Any]:
        return {
            "cell": self.cell_id,
            "engine": self.engine,
            "claim": self.original.get("claim"),
            "expected": self.original.get("expected"),
            "verdict": self.original.get("verdict"),
            "observed_in_matrix": self.original.get("observed"),
            "repeat": len(self.verdicts),
            "reproduced": self.reproduced,
            "verdicts": self.verdicts,
            "observed": self.observed,
            "schedule": self.schedule.describe() if self.schedule else None,
            "script": self.script,
        }


def find_cell(conf_dir: Path, cell_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    doc = load_json(conf_dir / "conformance.json", "not a conformance folder (delta-jepsen conformance writes one)")
    for row in doc.get("cells") or []:
        if row.get("id") == cell_id:
            return doc, row
    raise HarnessError(f"--cell {cell_id}: no such cell in {conf_dir}/conformance.json")


def _txn(plan: OpPlan, commit_version: int | None, attempt_after: int | None) -> Txn:
    return Txn(
        op_id=plan.op_id,
        f=plan.kind,
        value={"kind": plan.kind, "partition": plan.part, "n": plan.n, "partitioned": plan.partitioned},
        outcome=OK if commit_version is not None else "fail",
        read_version=2,
        commit_version=commit_version,
        attempt_after=attempt_after,
    )


def cell_schedule(cell: C.Cell, row: dict[str, Any], engine: str, versions: dict[str, str]) -> Schedule:
    """Both transactions read version 2 (create and two setup commits); the
    winner commits 3, the loser then tries."""
    wp, lp = plans(cell)
    obs = row.get("observation") or {}
    loser_committed = (obs.get("loser") or {}).get("status") == "committed"
    txns = [_txn(wp, 3, None), _txn(lp, 4 if loser_committed else None, 3)]
    return Schedule(
        engine=engine,
        workload="conformance",
        isolation=cell.level,
        table=table_spec(cell).to_json(),
        declaration={"default_isolation": cell.level},
        base_version=2,
        setup=[[list(r) for r in rows] for _, rows in SETUP],
        txns=txns,
        anomaly={
            "checker": "conformance",
            "kind": row.get("verdict"),
            "claim": row.get("claim"),
            "ops": [wp.op_id, lp.op_id],
            "versions": [3],
            "explanation": f"{cell.id}: {row.get('rule')}; expected {row.get('expected')}, "
            f"observed {row.get('observed')} ({row.get('why') or row.get('verdict')})",
        },
        engine_versions=dict(versions),
    )


def plan_calls(plan: OpPlan) -> list[dict[str, Any]]:
    """The deltalake calls the conformance backend makes for `plan`, in the
    form the standalone script is written from."""
    k = plan.kind
    if k == C.INSERT:
        return [{"primitive": "append", "args": {"rows": [list(r) for r in plan.new_rows()]}}]
    if k == C.APP_TXN:
        rows = [list(r) for r in plan.new_rows()]
        return [{"primitive": "append_idempotent", "args": {"rows": rows, "app_id": APP_ID, "txn_version": 1}}]
    if k == C.UPDATE:
        return [{"primitive": "update", "args": {"where": plan.where, "assignments": plan.assignments()}}]
    if k in (C.DELETE, C.DELETE_ALL):
        return [{"primitive": "delete", "args": {"where": plan.where}}]
    if k in (C.MERGE, C.MERGE_NOLIT):
        args = {
            "source_rows": [list(r) for r in plan.merge_source()],
            "source_columns": list(COLUMNS),
            "on": plan.merge_on(),
            "when_matched_set": plan.merge_set(),
            "insert_values": plan.merge_insert(),
        }
        return [{"primitive": "merge", "args": args}]
    if k == C.INSERT_SELECT:
        row = list(plan.select_row(0))
        args = {
            "count_sql": plan.select_sql("{table}"),
            "row": row,
            "count_column": COLUMNS.index("v"),
            "on": f"t.id = s.id AND t.p = '{plan.part}'",
            "columns": list(COLUMNS),
        }
        return [{"primitive": "count_then_merge", "args": args}]
    if k in (C.OPTIMIZE, C.ZORDER):
        args = {"zorder_by": ["k"] if k == C.ZORDER else None, "partition_filters": plan.partition_filters()}
        return [{"primitive": "optimize", "args": args}]
    if k == C.SET_PROPERTIES:
        return [{"primitive": "set_properties", "args": {"props": plan.properties()}}]
    return [{"primitive": k, "args": {}}]


def reproduce_cell(conf_dir: Path, cell_id: str, repeat: int, log: Any = print) -> CellOutcome:
    doc, row = find_cell(conf_dir, cell_id)
    engine = str(doc.get("engine"))
    outcome = CellOutcome(cell_id, engine, row)
    if row.get("verdict") == CONFORMS:
        raise NothingToReproduce(f"cell {cell_id} conforms: nothing to reproduce")
    if row.get("verdict") not in DEVIATIONS:
        raise NotADeviation(f"cell {cell_id} is {row.get('verdict')}, not a deviation: nothing was judged to reproduce")
    cell = C.Cell.from_json(row)
    log(
        f"cell {cell_id}: {row.get('verdict')} ({row.get('claim')}: expected {row.get('expected')}, "
        f"observed {row.get('observed')})"
    )
    with tempfile.TemporaryDirectory(prefix="dj-cell-") as tmp:
        for k in range(1, repeat + 1):
            (r,) = run_cells(engine, [cell], Path(tmp) / f"run-{k}")
            outcome.verdicts.append(r.verdict)
            outcome.observed.append(r.obs.observed())
    log(f"ran it {repeat} time(s): {row.get('verdict')} in {outcome.reproduced}")
    out = conf_dir / "repro" / cell_id.replace("/", "__").replace(">", "-then-")
    out.mkdir(parents=True, exist_ok=True)
    outcome.out_dir = out
    outcome.schedule = cell_schedule(cell, row, engine, doc.get("versions") or {})
    text: str | None = None
    wp, lp = plans(cell)
    er = parse_engine_release(engine, ENGINE_NAMES)
    python = None
    if outcome.reproduced and er.name == "sail":
        text = sail_cell_script(outcome.schedule, wp, lp, str(conf_dir))
        # A release's script runs in its own environment, as its cells did.
        python = ensure(env_request(er)).python if er.release is not None else None
    elif outcome.reproduced and engine == "delta-rs":
        calls = {wp.op_id: plan_calls(wp), lp.op_id: plan_calls(lp)}
        expect = {"must conflict": "fail", "cannot conflict": "commit"}.get(str(row.get("expected")))
        text = deltars_script(outcome.schedule, calls, str(conf_dir), expect={lp.op_id: expect} if expect else None)
    if text is not None:
        script = out / SCRIPT_NAME
        script.write_text(text)
        script.chmod(0o755)
        outcome.script = run_script(script, python)
    (out / "outcome.json").write_text(json.dumps(outcome.to_json(), indent=2, default=str))
    (out / REPORT_NAME).write_text(cell_report(outcome.to_json(), outcome.schedule, row))
    return outcome


class NotADeviation(HarnessError):
    """An uncontrolled or erroring cell: no verdict to reproduce (exit 3)."""
