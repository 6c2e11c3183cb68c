"""The docs site: its reference pages are written from the code, so every
flag, workload, nemesis, checker and claim has its entry, and the site
builds with no warning."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import inspect
import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from checkers import CHECKERS
from checkers.claims import CLAIMS
from harness.cli.main import build_parser, with_command
from harness.cli.reference import PAGES, commands_of, flags, pages, subcommands
from nemeses import NEMESIS_NAMES
from tests.browser import png_size, static_server, visit
from workloads import WORKLOAD_NAMES

REPO = Path(__file__).resolve().parent.parent


def _sections(page: str) -> dict[str, str]:
    """A page's text under each `## name` heading."""
    parts = re.split(r"^## (.+)$", page, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_flag_of_every_command_is_documented_in_the_reference() -> None:
    parser, handlers = build_parser()
    cli = _sections(pages(commands_of(parser))["cli.md"])
    commands = subcommands(commands_of(parser))
    assert {name for name, _, _ in commands} == set(handlers) == set(cli)
    undocumented, absent = [], []
    for name, help_text, p in commands:
        assert help_text, f"command {name} has no help"
        for a in flags(p):
            where = f"{name} {'/'.join(a.option_strings) or a.dest}"
            if not a.help or a.help == argparse.SUPPRESS:
                undocumented.append(where)
            for opt in a.option_strings:
                if f"`{opt}" not in cli[name] and f" {opt}`" not in cli[name] and f", {opt}" not in cli[name]:
                    absent.append(where)
    assert not undocumented, f"flags with no help text, so no reference entry: {undocumented}"
    assert not absent, f"flags missing from the reference page: {absent}"


def test_every_workload_nemesis_checker_and_claim_has_its_entry() -> None:
    got = pages(commands_of(build_parser()[0]))
    assert list(got) == list(PAGES)
    for page, names in (
        ("workloads.md", WORKLOAD_NAMES),
        ("nemeses.md", [n for n in NEMESIS_NAMES if n != "none"]),
        ("checkers.md", list(CHECKERS)),
    ):
        sections = _sections(got[page])
        assert list(sections) == list(names), page
        empty = [n for n, text in sections.items() if len(text.strip()) < 40 or "(undocumented)" in text]
        assert not empty, f"{page}: entries without a description: {empty}"
    for cid in CLAIMS:
        assert f"<span id='{cid}'></span>**{cid}**" in got["claims.md"], cid


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path_factory.mktemp("docs") / "site"
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "docs" / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    return out, res


def test_the_docs_site_builds_strictly_with_no_warning(site: tuple[Path, subprocess.CompletedProcess]) -> None:
    out, res = site
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    for page in ("index.html", *(f"reference/{p.removesuffix('.md')}/index.html" for p in PAGES)):
        assert (out / page).is_file(), page
    assert "--nemesis-interval" in (out / "reference/cli/index.html").read_text()


def test_the_site_opens_in_a_browser(site: tuple[Path, subprocess.CompletedProcess], tmp_path: Path) -> None:
    """The index and the commands page in headless chromium: they load with
    no error and no request off the machine, the index links to every part,
    and the commands page holds a row per flag."""
    out, res = site
    assert res.returncode == 0, res.stderr
    parser, _ = build_parser()
    n_flags = sum(len(flags(p)) for _, _, p in subcommands(commands_of(parser)))
    with static_server(out) as base:
        links = ["a[href*='reference/']", "a[href*='explanation/']"]
        index = visit(f"{base}/index.html", tmp_path / "index.png", links)
        cli = visit(f"{base}/reference/cli/", tmp_path / "cli.png", ["h2", "[role='main'] table tbody tr"])
    for v in (index, cli):
        assert not v.console_errors and not v.page_errors and not v.failed_requests, v
        assert not v.foreign_requests(), v.foreign_requests()
        width, height = png_size(v.screenshot)
        assert width >= 1000 and height >= 600, (v.url, width, height)
    assert index.title.startswith("delta-jepsen")
    assert index.counts["a[href*='reference/']"] >= 5 and index.counts["a[href*='explanation/']"] >= 8, index.counts
    assert cli.title.startswith("Commands and flags")
    assert cli.counts["h2"] == len(subcommands(commands_of(parser))), cli.counts
    assert cli.counts["[role='main'] table tbody tr"] == n_flags, (cli.counts, n_flags)


def test_reference_writes_its_pages_and_refuses_an_unusable_folder(tmp_path: Path) -> None:
    out = tmp_path / "ref"
    res = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reference", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(PAGES)
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = subprocess.run(
        [sys.executable, "-m", "harness.cli", "reference", "--out", str(blocker / "x")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    for args in (["--store-conformance", str(blocker)], []):  # not a conformance.json; nothing asked
        res = subprocess.run(
            [sys.executable, "-m", "harness.cli", "reference", *args], capture_output=True, text=True, timeout=120
        )
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, (args, res.stderr)


def test_the_findings_page_lists_every_stored_deviation() -> None:
    from harness.cli.reference import DATA_DIR, stored_verdicts

    page = pages(commands_of(build_parser()[0]))["findings.md"]
    stored = json.loads((DATA_DIR / "conformance-delta-rs.json").read_text())
    deviations = [c for c in stored["cells"].values() if isinstance(c, dict)]
    assert deviations and "## delta-rs" in page
    verdicts = stored_verdicts(stored)
    assert sum(v.startswith("deviates") for v in verdicts.values()) == len(deviations)
    listed = sum(int(m) for m in re.findall(r"\| (\d+): [^|]*\|$", page, flags=re.M))
    assert listed == len(deviations), (listed, len(deviations))


def test_the_how_to_shows_the_example_ci_runs() -> None:
    """The how-to's code is docs/examples/pairs.py's, which
    tests/test_own_workload.py runs: the page cannot drift from it."""
    page = (REPO / "docs" / "src" / "howto" / "own-test.md").read_text()
    example = (REPO / "docs" / "examples" / "pairs.py").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 2
    for block in blocks:
        assert block in example, block[:200]


def test_every_seam_of_the_python_api_is_documented() -> None:
    """Each class of the API page has its own docstring, and each member a
    workload, an engine client or a nemesis of your own implements or
    calls says what it does, with its typed signature."""
    from harness.cli.reference import API, _first_paragraph, api_members

    page = pages(commands_of(build_parser()[0]))["api.md"]
    for module_name, names in API.items():
        module = importlib.import_module(module_name)
        for name in names:
            obj = getattr(module, name)
            assert f"`{name}" in page, name
            assert _first_paragraph(obj), f"{module_name}.{name} has no docstring of its own"
    yours = (("workloads.base", "Workload"), ("harness.engines.base", "EngineClient"), ("nemeses.base", "Nemesis"))
    for module_name, name in yours:
        cls = getattr(importlib.import_module(module_name), name)
        for member, fn in api_members(cls):
            target = fn.fget if isinstance(fn, property) else getattr(fn, "__func__", fn)
            assert _first_paragraph(target), f"{name}.{member} has no docstring"
            assert "->" in str(inspect.signature(target)), f"{name}.{member} has no return type"


def documented_commands() -> list[tuple[str, str]]:
    """(where, argv) of every `delta-jepsen` command in the README's and the
    docs' code blocks and in the example CI workflow."""
    texts = [(p, p.read_text()) for p in [REPO / "README.md", *sorted((REPO / "docs" / "src").rglob("*.md"))]]
    lines: list[tuple[str, str]] = []
    for path, text in texts:
        for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
            lines += [(path.name, line) for line in block.replace("\\\n", " ").splitlines()]
    workflow = yaml.safe_load((REPO / "docs" / "examples" / "nightly.yml").read_text())
    for job in workflow["jobs"].values():
        for step in job["steps"]:
            lines += [("nightly.yml", line) for line in str(step.get("run", "")).splitlines()]
    out = []
    for where, line in lines:
        for part in line.split("&&"):
            part = re.sub(r"^\s*(\$ )?([A-Z_]+=\S*\s+)*", "", part)
            if not part.startswith("delta-jepsen"):
                continue
            part = part.split(" #")[0].replace("${{ matrix.engine }}", "delta-rs")
            out.append((where, part.replace("${{ matrix.workload }}", "register")))
    return out


def test_every_documented_command_is_one_the_cli_accepts() -> None:
    """A flag renamed or a command dropped fails here, not in a reader's shell."""
    commands = documented_commands()
    assert len(commands) >= 40 and {w for w, _ in commands} >= {"README.md", "tutorial.md", "nightly.yml"}
    refused = []
    for where, command in commands:
        argv = with_command(shlex.split(command)[1:])
        parser, _ = build_parser()
        try:
            with contextlib.redirect_stderr(io.StringIO()) as err:
                parser.parse_args(argv)
        except SystemExit:
            refused.append(f"{where}: {command}: {err.getvalue().strip()}")
    assert not refused, "\n".join(refused)


def test_the_history_format_page_names_every_field_and_error_class() -> None:
    """The page is prose, so it is held to the code: its field table is
    the history event's fields, and every error class is named."""
    from dataclasses import fields

    from harness.core.history import ErrorClass, Event

    page = (REPO / "docs" / "src" / "history.md").read_text()
    documented = re.findall(r"^\| `(\w+)` \|", page, flags=re.M)
    assert sorted(documented) == sorted(f.name for f in fields(Event)), documented
    missing = [e.value for e in ErrorClass if f"`{e.value}`" not in page]
    assert not missing, f"error classes the history format page does not name: {missing}"
