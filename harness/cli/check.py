"""`delta-jepsen check`: the checkers on a stored run folder, without any engine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli.options import Handler
from harness.core.errors import HarnessError


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    c = sub.add_parser("check", help="re-run the checkers on a stored run, without any engine")
    c.add_argument("run_dir", help="a run folder, e.g. results/latest")
    c.add_argument("--json", action="store_true", help="print results.json instead of the summary")
    c.add_argument("--junit-xml", metavar="PATH", default=None, help="also write the verdicts as JUnit XML for CI")
    return {"check": cmd_check}


def cmd_check(args: argparse.Namespace) -> int:
    from harness.check import junit
    from harness.check.pipeline import check_run

    target = junit.check_target(args.junit_xml)
    run_dir = Path(args.run_dir)
    with junit.recording(target, "delta-jepsen.check", junit.classname_of(run_dir)) as rec:
        if not run_dir.exists():
            raise HarnessError(f"no such run folder: {run_dir}")
        run_dir = run_dir.resolve() if run_dir.is_symlink() else run_dir
        _recover_table(run_dir)
        report = check_run(run_dir)
        rec.suites.append(junit.report_suite(report))
    print(json.dumps(report.doc, indent=2, default=str) if args.json else report.summary, end="\n" if args.json else "")
    # The process ends next (entry() skips the interpreter's teardown): the
    # run's objects are left to the exit, not freed one by one first.
    _FINISHED.append(report)
    return report.exit_code


_FINISHED: list = []


def _recover_table(run_dir: Path) -> None:
    """A harness killed before it copied the table out left no table/ in the
    run folder; a store whose data lives in the run folder (SeaweedFS) still
    holds it, so it is copied out first, to be judged like any other run."""
    from harness.run.seaweed import recover_table

    table = run_dir / "table"  # where check_run reads it
    if (table / "_delta_log").is_dir() and any((table / "_delta_log").iterdir()):
        return
    recover_table(run_dir, table, log=lambda msg: print(msg, file=sys.stderr))
