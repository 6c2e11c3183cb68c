"""The bug report draft (repro/anomaly-N/REPORT.md): what an engine's
maintainers need to see the anomaly without this harness."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from checkers.claims import claim_text
from harness.repro.schedule import Schedule, describe_fault
from harness.repro.standalone import SCRIPT_NAME

# The docs' claims page (`delta-jepsen reference`), the contract as the project cites it.
_SPEC = "the contract under test, docs reference/claims"
_ENGINE_PACKAGES = ("deltalake", "pyspark", "pysail", "delta-spark", "python")


def _log_entries(run_dir: Path, first: int) -> list[str]:
    """The replay's commits from version `first` on, one line each, with
    the actions an engine developer looks at."""
    lines = []
    log = run_dir / "table" / "_delta_log"
    for f in sorted(log.glob("*.json")):
        v = int(f.stem)
        if v < first:
            continue
        info: dict[str, Any] = {}
        adds = removes = 0
        for line in f.read_text().splitlines():
            a = json.loads(line) if line.strip() else {}
            info = a.get("commitInfo", info)
            adds += "add" in a
            removes += "remove" in a
        keep = {k: info.get(k) for k in ("operation", "readVersion", "isolationLevel", "isBlindAppend", "dj.op")}
        keep = {k: v for k, v in keep.items() if v is not None}
        lines.append(f"- `{f.name}`: {json.dumps(keep)}, {adds} add(s), {removes} remove(s)")
    return lines


def bug_report(outcome: dict[str, Any], schedule: Schedule, run_dir: Path) -> str:
    a = outcome["anomaly"]
    claim = a.get("claim")
    versions = ", ".join(f"{k} {v}" for k, v in sorted(schedule.engine_versions.items()) if k in _ENGINE_PACKAGES)
    level = schedule.isolation or schedule.declaration.get("default_isolation")
    after = outcome.get("reproduced_after_shrink")
    k = outcome["repeat"]
    out = [
        f"# {schedule.engine}: {a.get('kind')}" + (f" (Delta spec claim {claim})" if claim else ""),
        "",
        f"- Engine: {schedule.engine}; versions: {versions or 'not recorded'}",
        f"- Isolation level: {level or 'not recorded'}" + ("" if schedule.isolation else " (the engine's default)"),
        f"- Found by delta-jepsen's `{a.get('checker')}` checker in run `{run_dir.name}`"
        + (f" (workload {schedule.workload}, seed {schedule.seed})" if schedule.seed is not None else ""),
        f"- Replayed with pinned snapshots: reproduced in {outcome['reproduced_before_shrink']} of {k}"
        + (f"; shrunk schedule: {after} of {k}" if after is not None else ""),
        f"- Shrunk from {tuple(outcome['size_before'])} to {tuple(outcome['size_after'])} "
        f"(transactions, setup commits, rows) in {outcome['shrink_steps']} step(s), {outcome['shrink_seconds']} s",
        "",
        "## Expected",
        "",
    ]
    if claim:
        text = claim_text(claim)
        out += [f"Spec claim {claim} ({_SPEC}): {text}", ""]
        same = re.search(r"\bas ([A-Z]+\d+)\b", text or "")
        if same:
            out += [f"{same.group(1)}: {claim_text(same.group(1))}", ""]
    out += ["## Schedule", ""]
    out += [f"{i}. {line}" for i, line in enumerate(schedule.describe(), start=1)]
    last = next((x for x in reversed(outcome["attempts_after"] or outcome["attempts_before"]) if x["reproduced"]), None)
    out += ["", "## Observed", "", "In the run: " + str(a.get("explanation") or "").strip(), ""]
    if last is not None and last["found"]:
        out += ["In the shrunk replay: " + str(last["found"][0].get("explanation") or "").strip(), ""]
    script = outcome.get("script")
    if schedule.fault:
        out += [
            "## The fault",
            "",
            f"The anomaly needs a storage fault: {describe_fault(schedule.fault)}. The harness re-applied it "
            "through its S3 fault proxy (embedded moto S3), and the shrinker's replay without the fault did not "
            "show the anomaly. Where one acknowledged commit was replaced by another, the replacing commit's PUT "
            "was held at the proxy while the other committed, then released: the store applied it although the "
            "version existed, as a store without put-if-absent does. The standalone script cannot apply such a "
            "fault by itself and says so (exit 3).",
            "",
        ]
    if script is not None:
        out += [
            f"## Standalone reproduction (`{SCRIPT_NAME}`)",
            "",
            f"Exit code {script['exit_code']} in {script['seconds']} s; its output:",
            "",
            "```",
            script["output"],
            "```",
            "",
        ]
    else:
        out += [
            "## Standalone reproduction",
            "",
            f"No script: {outcome.get('script_note') or schedule.engine + ' schedules have no standalone form yet'}."
            if outcome["reproduced_before_shrink"]
            else "No script: the anomaly did not reproduce.",
            "",
        ]
    if last is not None:
        out += ["## Log entries of the replay", ""]
        out += _log_entries(Path(last["run_dir"]), len(schedule.setup) + 1) or ["(none)"]
        out.append("")
    return "\n".join(out)


def cell_report(outcome: dict[str, Any], schedule: Schedule | None, row: dict[str, Any]) -> str:
    """The bug report draft of a conformance cell."""
    claim = row.get("claim")
    versions = ", ".join(
        f"{k} {v}" for k, v in sorted((schedule.engine_versions if schedule else {}).items()) if k in _ENGINE_PACKAGES
    )
    out = [
        f"# {outcome['engine']}: conformance cell `{outcome['cell']}` {outcome['verdict']}"
        + (f" (Delta spec claim {claim})" if claim else ""),
        "",
        f"- Engine: {outcome['engine']}; versions: {versions or 'not recorded'}",
        f"- Rule: {row.get('rule')}",
        f"- Ran again {outcome['repeat']} time(s): {outcome['verdict']} in {outcome['reproduced']} "
        f"(observed: {', '.join(outcome['observed'])})",
        "",
        "## Expected",
        "",
        f"{row.get('expected')}" + (f" (spec claim {claim}: {claim_text(claim)})" if claim else ""),
        "",
        "## Schedule",
        "",
    ]
    out += [f"{i}. {line}" for i, line in enumerate(schedule.describe() if schedule else [], start=1)]
    out += ["", "## Observed", "", f"{row.get('observed')}: {row.get('why') or ''}".strip(), ""]
    script = outcome.get("script")
    if script is not None:
        out += [f"## Standalone reproduction (`{SCRIPT_NAME}`)", "", f"Exit code {script['exit_code']}:", "", "```"]
        out += [script["output"], "```", ""]
    return "\n".join(out)
