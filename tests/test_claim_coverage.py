"""Every claim of the contract is exercised by a check that a real run
exercises, or is listed with the reason nothing does: not applicable to
the engines the harness runs, or not exercised yet. An anomaly kind counts
once the tamper suite plants it in a real run and its checker finds it;
conformance cells run on real engines (the delta-rs matrix in full, in this
suite)."""

from __future__ import annotations

from checkers.claims import CLAIMS
from harness.matrices.conformance import cells as C
from harness.matrices.coverage import JUDGED, NOT_APPLICABLE, NOT_YET, cell_claims, coverage, kind_claims
from tests.test_tamper import PLANTS


def _proven_kind_claims() -> set[str]:
    planted = {(p.checker, p.kind) for ps in PLANTS.values() for p in ps}
    return {claim for claim, pairs in kind_claims().items() if pairs & planted}


def test_every_claim_is_exercised_or_says_why_not() -> None:
    exercised = _proven_kind_claims() | set(cell_claims()) | set(JUDGED)
    lists = {"exercised": exercised, "not applicable": set(NOT_APPLICABLE), "not yet": set(NOT_YET)}
    for claim in CLAIMS:
        where = [name for name, claims in lists.items() if claim in claims]
        assert len(where) == 1, f"{claim}: {where or 'nothing exercises it, and no list says why'}"
    assert set().union(*lists.values()) <= set(CLAIMS), "a list names a claim the contract does not have"


def test_claims_judged_without_a_kind_have_the_cells_they_name() -> None:
    # C9: blind INSERTs as the loser, against writes and against metadata changes.
    insert_loser = {C.expectation(c).claim for c in C.all_cells() if c.loser == C.INSERT}
    assert {"M1", "M2", "M4", "C17"} <= insert_loser, insert_loser
    # C13: cells at both levels.
    assert {c.level for c in C.all_cells()} == {"Serializable", "WriteSerializable"}


def test_the_reference_page_shows_each_claims_coverage() -> None:
    lines = coverage()
    assert set(lines) == set(CLAIMS) and all(lines.values())
    assert lines["R3"].startswith("not applicable: ") and "`stalled-op`" in lines["C10"]
    assert "`stream-crossed-metadata-change`" in lines["C18"] and "`concurrent-identity-commit`" in lines["C19"]
    assert "`lost-write`" in lines["C7"] and "conformance cells" in lines["M3"]
