"""What exercises each claim of the contract (checkers/claims.py).

A claim is exercised by an anomaly kind that names it (checkers/kinds.py,
found by a checker on a run), by the conformance cells whose expectation
cites it, or by a check that judges it through narrower claims (`JUDGED`).
A claim nothing exercises is listed with its reason: not applicable to any
engine the harness runs (`NOT_APPLICABLE`), or not exercised yet
(`NOT_YET`). `tests/test_claim_coverage.py` keeps the lists in step, and
counts a kind only once the tamper suite has shown its checker finding it
in a real run. The reference page "The contract under test" shows the
result beside each claim.
"""

from __future__ import annotations

from checkers.claims import CLAIMS
from checkers.kinds import KINDS
from harness.matrices.conformance import cells as C

__all__ = ["JUDGED", "NOT_APPLICABLE", "NOT_YET", "cell_claims", "coverage", "kind_claims"]

# Claims a check judges without an anomaly kind of its own.
JUDGED: dict[str, str] = {
    "C9": "conformance cells whose loser is a blind INSERT: it commits over any concurrent write "
    "(M1, M2 at WriteSerializable, M4) and fails over a concurrent metadata change (C17)",
    "C11": "every check of a run with several nodes (`--nodes`), each a cluster of its own writing one table: "
    "log-sanity (C4), durability (C7), atomicity (C6), serializability (C14, C15)",
    "C13": "serializability and the conformance verdicts judge by the level the table carries in its log, "
    "and report it; a level the engine refuses at creation is reported, never assumed",
}

NOT_APPLICABLE: dict[str, str] = {
    **{
        f"R{i}": "row-level concurrency is a Databricks runtime feature (14.2 and later); no engine the "
        "harness runs declares it, so the conformance matrix judges every engine by the M-table"
        for i in range(1, 7)
    },
    "R7": "the fallback from row-level to file-level conflict detection needs row-level concurrency, a "
    "Databricks runtime feature no engine the harness runs declares",
    "R8": "REORG ... APPLY is a Databricks runtime command with row-level concurrency; no engine the "
    "harness runs declares it",
    "C3": "no engine the harness runs accepts a key declaration: delta-spark 4.0.1 and Sail 0.7.2 refuse "
    "PRIMARY KEY in CREATE TABLE with a syntax error (checked by hand), and deltalake's API has CHECK "
    "constraints only",
}

NOT_YET: dict[str, str] = {}


def kind_claims() -> dict[str, set[tuple[str, str]]]:
    """claim -> the (checker, kind) pairs whose anomaly names it."""
    out: dict[str, set[tuple[str, str]]] = {}
    for k in KINDS.values():
        for claim in k.claims:
            for one in _expand(claim):
                out.setdefault(one, set()).update((c, k.kind) for c in k.checkers)
    return out


def cell_claims() -> dict[str, int]:
    """claim -> how many conformance cells' expectations cite it."""
    out: dict[str, int] = {}
    for cell in C.all_cells():
        claim = C.expectation(cell).claim
        out[claim] = out.get(claim, 0) + 1
    return out


def _expand(claim: str | None) -> list[str]:
    if claim is None:
        return []
    if "-" in claim:  # a range, "E1-E6"
        first, last = claim.split("-")
        prefix = first.rstrip("0123456789")
        return [f"{prefix}{i}" for i in range(int(first[len(prefix) :]), int(last[len(prefix) :]) + 1)]
    return [claim]


def coverage() -> dict[str, str]:
    """claim -> one line: what exercises it, or why nothing does."""
    kinds, cells = kind_claims(), cell_claims()
    out = {}
    for claim in CLAIMS:
        parts = []
        if claim in kinds:
            by: dict[str, list[str]] = {}
            for checker, kind in sorted(kinds[claim]):
                by.setdefault(checker, []).append(f"`{kind}`")
            parts.append("; ".join(f"{checker}: {', '.join(ks)}" for checker, ks in by.items()))
        if claim in cells:
            parts.append(f"{cells[claim]} conformance cells")
        if claim in JUDGED:
            parts.append(JUDGED[claim])
        if claim in NOT_APPLICABLE:
            parts.append("not applicable: " + NOT_APPLICABLE[claim])
        if claim in NOT_YET:
            parts.append("not exercised yet: " + NOT_YET[claim])
        out[claim] = "; ".join(parts)
    return out
