"""`delta-jepsen reference`: the reference pages of the docs site, written
from the code itself (the argument parser, the registries of workloads,
nemeses and checkers, and the claims the checkers cite), so they cannot
drift from what the tool does."""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.cli.options import Handler
from harness.core.errors import HarnessError

# The pages, by file name, in the order the site lists them.
PAGES = ("cli.md", "workloads.md", "nemeses.md", "checkers.md", "claims.md", "api.md", "findings.md", "results.md")

# Stored conformance results, one file per engine, that the findings page is
# written from (`reference --store-conformance`); CI re-runs the cells and
# fails when the code's verdicts differ from them.
DATA_DIR = Path(__file__).resolve().parents[2] / "docs" / "data"

# The seams a workload, checker, nemesis or engine of your own uses, by module.
API: dict[str, tuple[str, ...]] = {
    "workloads.base": ("Workload", "OpSpec", "SlotGenerator"),
    "harness.engines.base": ("EngineClient", "OpResult", "Engine", "ClientConfig", "Capabilities"),
    "harness.core.table": ("TableSpec", "Column", "row_id"),
    "harness.core.history": ("History", "Op"),
    "harness.deltalog": ("TransactionLog", "Commit"),
    "checkers.base": ("CheckResult", "Anomaly", "Verdict"),
    "nemeses.base": ("Nemesis",),
}


def add_parsers(sub: argparse._SubParsersAction) -> dict[str, Handler]:
    r = sub.add_parser("reference", help="write the reference pages (Markdown) generated from the code")
    r.add_argument("--out", type=Path, help="folder to write the pages into (created if missing)")
    r.add_argument(
        "--store-conformance",
        type=Path,
        metavar="CONFORMANCE_JSON",
        help="store a conformance run's verdicts (its conformance.json) as the findings page's data, in docs/data/",
    )
    r.add_argument(
        "--store-releases",
        type=Path,
        metavar="MATRIX_JSON",
        help="store a workload matrix over releases of one engine (its matrix.json) as the findings page's data",
    )
    # `sub` holds every command once the parser is built, this one among them.
    return {"reference": lambda args: cmd_reference(args, sub)}


def cmd_reference(args: argparse.Namespace, sub: argparse._SubParsersAction) -> int:
    if args.out is None and args.store_conformance is None and args.store_releases is None:
        raise HarnessError("reference needs --out DIR (or --store-conformance FILE, --store-releases FILE)")
    if args.store_releases is not None:
        stored = stored_releases(args.store_releases)
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path = DATA_DIR / f"releases-{stored['engine']}.json"
        path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"stored {len(stored['releases'])} releases of {stored['engine']} in {path}")
    if args.store_conformance is not None:
        try:
            doc = json.loads(args.store_conformance.read_text())
            stored = stored_conformance(doc)
        except (ValueError, KeyError, TypeError) as e:
            raise HarnessError(f"{args.store_conformance}: not a conformance.json ({type(e).__name__}: {e})") from None
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        path = DATA_DIR / f"conformance-{stored['engine']}.json"
        path.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"stored {len(stored['cells'])} cells of {stored['engine']} in {path}")
    if args.out is not None:
        for name, text in pages(sub).items():
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / name).write_text(text)
        print(f"wrote {len(PAGES)} pages to {args.out}")
    return 0


def pages(sub: argparse._SubParsersAction) -> dict[str, str]:
    """Every reference page, by file name; `sub` holds the command line's
    commands (`commands_of` finds it in a parser)."""
    makers: dict[str, Callable[[], str]] = {
        "cli.md": lambda: cli_page(sub),
        "workloads.md": workloads_page,
        "nemeses.md": nemeses_page,
        "checkers.md": checkers_page,
        "claims.md": claims_page,
        "api.md": api_page,
        "findings.md": findings_page,
        "results.md": results_page,
    }
    return {name: makers[name]() for name in PAGES}


# -- a run folder ----------------------------------------------------------------------------


def results_page() -> str:
    from harness.run.results import RESULTS_ENV, RUN_FILES

    out = [
        "# Results files",
        "",
        "Generated from the code (`harness/run/results.py`). A run lands in "
        f"`results/<workload>-<engine>/<UTC timestamp>/` (the root: `--results-dir`, else `${RESULTS_ENV}`, "
        "else `./results`); `results/latest` points to the newest. The guide to results says how to read them.",
        "",
        "| file | what it holds |",
        "|---|---|",
    ]
    out += [f"| `{name}` | {_cell(what)} |" for name, what in RUN_FILES.items()]
    out += [
        "",
        "Beside the run folders: `results/matrix/<stamp>/` (matrix.md, matrix.json, matrix.html, and cells/ with "
        "a run folder per cell), `results/conformance-<engine>/<stamp>/` (conformance.md, .json, .html), "
        "`results/qualify-<engine>-<baseline>-vs-<candidate>/<stamp>/` (qualify.md, .json, .html, and each side's "
        "conformance and matrix folders) and `results/compare/<stamp>/`.",
        "",
    ]
    return "\n".join(out)


# -- commands and flags ----------------------------------------------------------------------


def commands_of(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def subcommands(sub: argparse._SubParsersAction) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of every command, in `--help` order."""
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return [(name, helps.get(name, ""), p) for name, p in sub.choices.items()]


def flags(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]


def _flag_name(a: argparse.Action) -> str:
    if a.option_strings:
        return ", ".join(a.option_strings)
    return str(a.metavar or a.dest).upper()


def _default(a: argparse.Action) -> str:
    if a.required or a.default in (None, argparse.SUPPRESS, False) or not a.option_strings:
        return ""
    if isinstance(a, argparse._StoreTrueAction):
        return ""
    return f"`{a.default}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def cli_page(sub: argparse._SubParsersAction) -> str:
    out = [
        "# Commands and flags",
        "",
        "Generated from the command line's own parser (`delta-jepsen reference`).",
        "`delta-jepsen` alone, or followed by flags only, runs `run`.",
        "",
        "Exit codes: 0 valid, 1 invalid (a guarantee did not hold), 2 bad input or a harness error, "
        "3 unknown, 130 interrupted.",
        "",
    ]
    for name, help_text, p in subcommands(sub):
        out += [f"## {name}", "", f"{help_text}.".replace("..", "."), ""]
        fl = flags(p)
        if not fl:
            out += ["No flags.", ""]
            continue
        out += ["| flag | what it does | default |", "|---|---|---|"]
        for a in fl:
            choices = f" One of: {', '.join(map(str, a.choices))}." if a.choices else ""
            required = " Required." if a.required else ""
            out.append(f"| `{_flag_name(a)}` | {_cell(str(a.help or ''))}{choices}{required} | {_default(a)} |")
        out.append("")
    return "\n".join(out)


# -- registries ----------------------------------------------------------------------------


def _doc(obj: object) -> str:
    return inspect.cleandoc(getattr(obj, "__doc__", None) or "(undocumented)")


def _entry_doc(name: str, target: str) -> str:
    """A registry entry's text: its class's docstring, else its module's,
    or the module's bullet for it where one module holds several."""
    module_name, cls = target.split(":")
    module = importlib.import_module(module_name)
    own = getattr(module, cls).__doc__
    if own:
        return inspect.cleandoc(own)
    doc = _doc(module)
    if doc.startswith(f"{name}:"):
        return doc
    bullet = re.search(rf"^- {re.escape(name)}:.*?(?=^- |^\s*$|\Z)", doc, re.M | re.S)
    return inspect.cleandoc(bullet.group(0)[2:]) if bullet else doc


def workloads_page() -> str:
    from workloads import _REGISTRY

    out = ["# Workloads", "", "Generated from the workload registry (`--workload NAME`).", ""]
    for name, target in _REGISTRY.items():
        out += [f"## {name}", "", _entry_doc(name, target), ""]
    return "\n".join(out)


def nemeses_page() -> str:
    from nemeses import _REGISTRY

    out = [
        "# Nemeses",
        "",
        "Generated from the nemesis registry (`--nemesis a,b,...`; `none` injects no fault).",
        "",
    ]
    for name, target in _REGISTRY.items():
        out += [f"## {name}", "", _entry_doc(name, target), ""]
    return "\n".join(out)


def checkers_page() -> str:
    from checkers import CHECKERS

    out = ["# Checkers", "", "Generated from the checker registry: each judges (history, transaction log).", ""]
    for name, fn in CHECKERS.items():
        out += [f"## {name}", "", _doc(sys.modules[fn.__module__]), ""]
    return "\n".join(out)


def claims_page() -> str:
    from checkers.claims import CLAIMS
    from harness.matrices.coverage import coverage

    exercised = coverage()
    out = [
        "# The contract under test",
        "",
        "Each claim the checkers and the conformance matrix cite, by id (`checkers/claims.py`). "
        "An anomaly names the claim it breaks. Beside each claim, what exercises it: the anomaly kinds "
        "that name it (by checker), the conformance cells whose expectation cites it, or the checks that "
        "judge it through narrower claims; or why nothing does (`harness/matrices/coverage.py`).",
        "",
        "| claim | what it says | exercised by |",
        "|---|---|---|",
    ]
    out += [
        f"| <span id='{cid}'></span>**{cid}** | {_cell(text)} | {_cell(exercised[cid])} |"
        for cid, text in CLAIMS.items()
    ]
    return "\n".join(out) + "\n"


# -- the Python API ----------------------------------------------------------------------


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(...)"


def _first_paragraph(obj: object) -> str:
    """The first paragraph of `obj`'s own docstring ("" for a class without
    one: never its base's, nor a dataclass's generated signature)."""
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else getattr(obj, "__doc__", None)
    if not doc or (isinstance(obj, type) and doc.startswith(f"{obj.__name__}(")):
        return ""
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")


def api_members(obj: type) -> list[tuple[str, object]]:
    """A class's public methods and properties, its own and inherited from
    the project's bases, in source order."""
    out: dict[str, object] = {}
    for klass in reversed(obj.__mro__):
        if klass is object or klass.__module__.split(".")[0] not in ("workloads", "harness", "checkers", "nemeses"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or not (inspect.isfunction(member) or isinstance(member, property | staticmethod)):
                continue
            out[name] = member
    return list(out.items())


def api_page() -> str:
    out = [
        "# Python API",
        "",
        "Generated from the code: the seams a workload, a checker, a nemesis or an engine of your own uses, "
        "by the module to import them from. How-to: a workload and a checker of your own.",
        "",
    ]
    for module_name, names in API.items():
        module = importlib.import_module(module_name)
        out += [f"## {module_name}", ""]
        for name in names:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                out += [f"### `{name}{_signature(obj)}`", "", _first_paragraph(obj) or "", ""]
                continue
            out += [f"### `{name}`", "", f"`from {module_name} import {name}`", "", _first_paragraph(obj), ""]
            members = api_members(obj)
            if members:
                out += ["| member | signature | what it does |", "|---|---|---|"]
                for mname, member in members:
                    target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                    sig = "(property)" if isinstance(member, property) else _signature(target)
                    out.append(f"| `{mname}` | `{_cell(sig)}` | {_cell(_first_paragraph(target))} |")
                out.append("")
    return "\n".join(out)


# -- findings, from stored conformance results -------------------------------------------------

CONFORMS, UNSUPPORTED = "conforms", "unsupported"


def stored_conformance(doc: dict) -> dict:
    """What the findings page keeps of a conformance run: each cell's
    verdict, and for a cell that did not conform, what was expected and seen."""
    cells: dict[str, object] = {}
    for c in doc["cells"]:
        if c["verdict"] in (CONFORMS, UNSUPPORTED):
            cells[c["id"]] = c["verdict"]
        else:
            cells[c["id"]] = {k: c[k] for k in ("verdict", "claim", "expected", "observed", "operations", "rule")}
    return {"engine": doc["engine"], "versions": doc["versions"], "counts": doc["counts"], "cells": cells}


def stored_verdicts(stored: dict) -> dict[str, str]:
    return {i: c if isinstance(c, str) else c["verdict"] for i, c in stored["cells"].items()}


def stored_releases(matrix_json: Path) -> dict[str, Any]:
    """A workload matrix over releases of one engine, reduced to what the
    findings page shows: per release and workload, the verdict, what was
    supported and the anomaly kinds."""
    try:
        cells = json.loads(matrix_json.read_text())
        entries = [(str(c["engine"]).partition("=="), c) for c in cells]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise HarnessError(f"{matrix_json}: not a matrix.json ({type(e).__name__}: {e})") from None
    engines = {name for (name, _sep, _rel), _c in entries}
    if len(engines) != 1 or any(not rel for (_n, _s, rel), _c in entries):
        raise HarnessError(f"{matrix_json}: not a matrix over releases of one engine (engine==release)")
    releases: dict[str, dict[str, Any]] = {}
    for (_name, _sep, rel), c in entries:
        releases.setdefault(rel, {})[str(c["workload"])] = {
            "verdict": c.get("verdict"),
            "supported": c.get("supported"),
            "anomalies": sorted(c.get("anomalies") or []),
            "note": c.get("note") or "",
        }
    first = cells[0] if cells else {}
    return {
        "engine": engines.pop(),
        "setup": f"{first.get('isolation')}, storage {first.get('storage', 'local')}, one run per cell",
        "releases": releases,
    }


def findings_page() -> str:
    out = [
        "# Findings: the conformance matrix, per engine",
        "",
        "Generated from the stored results of `delta-jepsen conformance` (`docs/data/`): every documented "
        "conflict claim as two-transaction schedules, per table layout and isolation level. CI runs the "
        "delta-rs matrix again and fails when the code's verdicts differ from these; "
        "`delta-jepsen reference --store-conformance <conformance.json>` stores a new run.",
        "",
    ]
    files = sorted(DATA_DIR.glob("conformance-*.json")) if DATA_DIR.is_dir() else []
    if not files:
        return "\n".join([*out, "No stored results in this installation."]) + "\n"
    for path in files:
        stored = json.loads(path.read_text())
        versions = ", ".join(f"{k} {v}" for k, v in sorted(stored["versions"].items()))
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(stored["counts"].items()))
        out += [f"## {stored['engine']}", "", f"{versions}; {len(stored['cells'])} cells ({counts}).", ""]
        groups: dict[tuple[str, str, str, str, str], list[str]] = {}
        for cell_id, c in sorted(stored["cells"].items()):
            if isinstance(c, str):
                continue
            key = (c["verdict"], str(c["claim"]), c["operations"], c["expected"], c["observed"])
            groups.setdefault(key, []).append(cell_id)
        if not groups:
            out += ["Every cell conforms or is unsupported.", ""]
            continue
        out += ["| verdict | claim | operations | expected | observed | cells |", "|---|---|---|---|---|---|"]
        for (verdict, claim, ops, expected, observed), ids in sorted(groups.items()):
            where = sorted({"/".join(i.split("/")[:2]) for i in ids})
            out.append(
                f"| {verdict} | [{claim}](claims.md#{claim}) | {_cell(ops)} | {_cell(expected)} | {_cell(observed)} "
                f"| {len(ids)}: {_cell(', '.join(where))} |"
            )
        out.append("")
    for path in sorted(DATA_DIR.glob("releases-*.json")) if DATA_DIR.is_dir() else []:
        out += releases_section(json.loads(path.read_text()))
    return "\n".join(out)


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split(".") if x.isdigit())


def releases_section(stored: dict[str, Any]) -> list[str]:
    releases = sorted(stored["releases"], key=_release_key)
    workloads = list(dict.fromkeys(w for r in releases for w in stored["releases"][r]))
    out = [
        f"## {stored['engine']}: one run per release and workload",
        "",
        f"Generated from a stored `delta-jepsen matrix` over releases ({stored['setup']}; "
        "`delta-jepsen reference --store-releases <matrix.json>`). A cell: the verdict, and the anomaly kinds "
        "found; `-` where the release lacks the workload's ops.",
        "",
        "| release | " + " | ".join(workloads) + " |",
        "|---|" + "---|" * len(workloads),
    ]
    for r in releases:
        row = []
        for w in workloads:
            c = stored["releases"][r].get(w)
            if c is None or str(c.get("supported", "")).startswith("no"):
                row.append("-")
                continue
            kinds = ", ".join(c["anomalies"])
            partial = f" ({c['supported']})" if str(c.get("supported", "")).startswith("partial") else ""
            row.append(_cell(f"{c['verdict']}{partial}" + (f": {kinds}" if kinds else "")))
        out.append(f"| {r} | " + " | ".join(row) + " |")
    out.append("")
    return out
