"""The docs site: its reference pages are written from the code, so every
flag, workload, nemesis, checker and claim has its entry, and the site
builds with no warning."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from checkers import CHECKERS
from checkers.claims import CLAIMS
from harness.cli.main import build_parser
from harness.cli.reference import PAGES, commands_of, flags, pages, subcommands
from nemeses import NEMESIS_NAMES
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


def test_the_docs_site_builds_strictly_with_no_warning(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(REPO / "docs" / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    site = tmp_path / "site"
    for page in ("index.html", *(f"reference/{p.removesuffix('.md')}/index.html" for p in PAGES)):
        assert (site / page).is_file(), page
    assert "--nemesis-interval" in (site / "reference/cli/index.html").read_text()


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
