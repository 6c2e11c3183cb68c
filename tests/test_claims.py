"""checkers/claims.py says what the spec says: every claim a kind or a
conformance rule cites has its text, and the text is the spec's own
wherever the spec is beside the checkout (`../shared/spec/`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from checkers.claims import CLAIMS, PROJECT_CLAIM_PREFIXES, claim_text
from checkers.kinds import KINDS
from harness.matrices.conformance import cells

SPEC = Path(__file__).resolve().parent.parent.parent / "shared" / "spec" / "delta-guarantees.md"


def _spec_claims(text: str) -> dict[str, str]:
    """Claims as the spec writes them: bullets `- C7. ...` / `- E1 Name: ...`
    (continued on indented lines), and the cells of the conflict tables,
    named by their row and column."""
    claims: dict[str, str] = {}
    current = None
    lines = text.splitlines()
    for line in lines:
        m = re.match(r"^- ([CMRPE]\d+)\.? (.*)$", line)
        if m:
            current = m.group(1)
            claims[current] = m.group(2).strip()
        elif current and line.startswith("  ") and line.strip():
            claims[current] += " " + line.strip()
        else:
            current = None
    header: list[str] = []
    for line in lines:
        if line.startswith(("| later committer", "| |")):
            header = [c.strip() for c in line.strip("|").split("|")]
        elif line.startswith("|") and header and not line.startswith("|---"):
            row, *values = (c.strip() for c in line.strip("|").split("|"))
            for column, value in zip(header[1:], values, strict=False):
                m = re.match(r"^([MR]\d+) (.*)$", value)
                if m:
                    claims[m.group(1)] = f"{row} vs {column}: {m.group(2)}"
    return claims


def test_every_kind_claim_has_its_text() -> None:
    cited = {c for k in KINDS.values() for c in k.claims if c}
    assert cited and not [c for c in cited if not claim_text(c)]


def test_every_conformance_claim_has_its_text() -> None:
    cited = set(re.findall(r'"([CMRPE]\d+)"', Path(cells.__file__).read_text()))
    assert cited and not [c for c in cited if c not in CLAIMS]


def test_an_unknown_claim_has_no_text() -> None:
    assert claim_text("Z9") == "" and claim_text(None) == "" and claim_text("E1-E9") == ""


def test_a_range_names_each_claim_in_it() -> None:
    assert claim_text("E1-E3") == (
        "One of E1 ConcurrentAppendException; E2 ConcurrentDeleteReadException; E3 ConcurrentDeleteDeleteException."
    )


@pytest.mark.may_skip("the spec's own text lives beside a checkout, not in it: a fresh clone has none")
def test_the_text_is_the_specs() -> None:
    if not SPEC.is_file():
        pytest.skip(f"the spec is not beside this checkout ({SPEC.parent.parent.name}/spec/)")
    spec_claims = {c: t for c, t in CLAIMS.items() if not c.startswith(PROJECT_CLAIM_PREFIXES)}
    assert _spec_claims(SPEC.read_text()) == spec_claims


def test_the_parser_reads_bullets_and_table_cells() -> None:
    text = (
        "- C1. One\n  continued.\n- E2 Name: two\n\n"
        "| later committer \\ earlier | INSERT | OPT |\n|---|---|---|\n| INSERT | M1 cannot | |\n"
    )
    assert _spec_claims(text) == {"C1": "One continued.", "E2": "Name: two", "M1": "INSERT vs INSERT: cannot"}
