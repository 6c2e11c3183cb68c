"""`delta-jepsen reproduce`: from an anomaly of a checked run folder to a
minimal, deterministic, standalone reproduction."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from harness.cli.options import Handler
from harness.core.errors import HarnessError

EXIT_NOTHING = 0


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    c = sub.add_parser(
        "reproduce",
        help="replay an anomaly of a run with pinned snapshots, shrink it, and write a standalone script",
    )
    c.add_argument("run_dir", help="a checked run folder (e.g. results/latest), or a conformance folder with --cell")
    c.add_argument(
        "--anomaly",
        default="1",
        metavar="N|KIND",
        help="which anomaly: its number (as --list shows) or the first of a kind a replay can hold (default 1)",
    )
    c.add_argument("--repeat", type=int, default=5, metavar="K", help="replays before and after shrinking (default 5)")
    c.add_argument("--no-shrink", action="store_true", help="replay only; keep the schedule the anomaly names")
    c.add_argument(
        "--cell",
        default=None,
        metavar="ID",
        help="a deviating cell of a conformance folder, e.g. 'unpartitioned/Serializable/insert>delete-all'",
    )
    c.add_argument("--list", action="store_true", help="list the run's anomalies with their numbers and stop")
    return {"reproduce": cmd_reproduce}


def _numbers(run_dir: Path, which: str) -> list[int]:
    """The anomaly a number names, or every anomaly of a kind, in order."""
    from harness.repro.extract import anomalies, load_json

    if which.isdigit():
        return [int(which)]
    refs = anomalies(load_json(run_dir / "results.json", "check the run first (delta-jepsen check RUN_DIR)"))
    numbers = [r.number for r in refs if r.anomaly.get("kind") == which]
    if numbers:
        return numbers
    kinds = sorted({str(r.anomaly.get("kind")) for r in refs})
    raise HarnessError(f"--anomaly {which}: no anomaly of that kind; the run has: {', '.join(kinds) or 'none'}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    from harness.repro.extract import NothingToReplay, NothingToReproduce, anomalies, load_json
    from harness.repro.replay import NotReplayable
    from harness.repro.reproduce import reproduce

    run_dir = Path(args.run_dir)
    if args.repeat < 1:
        raise HarnessError("--repeat must be at least 1")
    if args.cell is not None:
        return _cell(run_dir, args.cell, args.repeat)
    if not (run_dir / "history.jsonl").is_file():
        raise HarnessError(f"{run_dir} is not a run folder (no history.jsonl)")
    run_dir = run_dir.resolve()
    if args.list:
        for r in anomalies(load_json(run_dir / "results.json", "check the run first (delta-jepsen check RUN_DIR)")):
            print(r.label())
        return 0
    # A kind names every anomaly of it: the first that can be replayed is
    # reproduced (one may hold more transactions at once than a replay can).
    skipped: list[str] = []
    for number in _numbers(run_dir, args.anomaly):
        try:
            outcome = reproduce(run_dir, number, args.repeat, shrink=not args.no_shrink)
            break
        except NothingToReproduce as e:
            print(f"nothing to reproduce: {e}")
            return EXIT_NOTHING
        except (NotReplayable, NothingToReplay) as e:
            shutil.rmtree(run_dir / "repro" / f"anomaly-{number}", ignore_errors=True)
            skipped.append(f"anomaly #{number}: {e}")
    else:
        print(f"not reproduced: {'; '.join(skipped)}", file=sys.stderr)
        return 3
    if skipped:
        print(f"skipped {len(skipped)} that cannot be replayed ({skipped[0]}{', ...' if len(skipped) > 1 else ''})")
    k = outcome.repeat
    if outcome.reproduced:
        which = "shrunk" if outcome.after else "original"
        print(f"REPRODUCED in {outcome.reproduced} of {k} replay(s) of the {which} schedule:")
        for i, line in enumerate(outcome.shrunk.describe(), start=1):
            print(f"  {i}. {line}")
        if outcome.script is not None:
            print(f"standalone script {_script_verdict(outcome.script)}: {outcome.out_dir}/reproduce.py")
        print(f"bug report draft: {outcome.out_dir}/REPORT.md")
    else:
        tried = f"{k} replay(s) of {len(outcome.original.txns)} transaction(s) with pinned snapshots"
        why = f"; {outcome.uncontrolled} uncontrolled (the pins did not take)" if outcome.uncontrolled else ""
        print(f"not reproduced: the anomaly did not show in {tried}{why}; details: {outcome.out_dir}/outcome.json")
    return outcome.exit_code


def _cell(conf_dir: Path, cell_id: str, repeat: int) -> int:
    from harness.repro.cell import NotADeviation, reproduce_cell
    from harness.repro.extract import NothingToReproduce

    if not (conf_dir / "conformance.json").is_file():
        raise HarnessError(f"{conf_dir} is not a conformance folder (no conformance.json)")
    try:
        outcome = reproduce_cell(conf_dir.resolve(), cell_id, repeat)
    except NothingToReproduce as e:
        print(f"nothing to reproduce: {e}")
        return EXIT_NOTHING
    except NotADeviation as e:
        print(f"not reproduced: {e}", file=sys.stderr)
        return 3
    if outcome.reproduced:
        print(f"REPRODUCED in {outcome.reproduced} of {repeat} run(s) of the cell:")
        for i, line in enumerate(outcome.schedule.describe() if outcome.schedule else [], start=1):
            print(f"  {i}. {line}")
        if outcome.script is not None:
            print(f"standalone script {_script_verdict(outcome.script)}: {outcome.out_dir}/reproduce.py")
        print(f"bug report draft: {outcome.out_dir}/REPORT.md")
    else:
        print(
            f"not reproduced: the cell ran {repeat} time(s) and gave {', '.join(sorted(set(outcome.verdicts)))}, "
            f"never {outcome.original.get('verdict')}; details: {outcome.out_dir}/outcome.json"
        )
    return outcome.exit_code


def _script_verdict(script: dict) -> str:
    code = script["exit_code"]
    what = {
        1: "shows the anomaly",
        0: "did NOT show the anomaly",
        # exit 3 is the script's own "control did not take": a fault it
        # cannot apply, or an order in time that did not hold.
        3: next(
            (
                line.strip()
                for line in (script.get("output") or "").splitlines()
                if line.startswith(("not run:", "uncontrolled:"))
            ),
            "could not control the schedule",
        ),
    }.get(code, "failed")
    return f"{what} (exit {code})"
