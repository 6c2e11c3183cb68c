"""`delta-jepsen check`: the checkers on a stored run folder, without any engine."""

from __future__ import annotations

import argparse
import json
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
        report = check_run(run_dir.resolve() if run_dir.is_symlink() else run_dir)
        rec.suites.append(junit.report_suite(report))
    print(json.dumps(report.doc, indent=2, default=str) if args.json else report.summary, end="\n" if args.json else "")
    return report.exit_code
