"""Run folders written before the code was restructured into layers still check with the
same verdicts: five small delta-rs runs (four workloads, and one append run
with a planted lost write) recorded by the code as it stood, checked by the
code as it stands. Paths inside them are placeholders (`/RUN-ROOT/`): `check`
needs only the folder."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from harness.check.pipeline import check_run
from harness.core.history import load_history

ARCHIVE = Path(__file__).parent / "fixtures" / "runs-before-issue-12.tar.gz"

# run folder -> (verdict, {checker: sorted anomaly kinds}) as recorded.
EXPECTED = {
    "append-delta-rs_20261123T214003": ("valid", {}),
    # A read that had seen the replaced commit now saw a state the log lacks.
    "append-delta-rs_lost-write": ("invalid", {"durability": ["lost-write"], "read-validity": ["state-never-existed"]}),
    "bank-delta-rs_20261123T214011": ("valid", {}),
    "list-append-delta-rs_20261123T214009": ("valid", {}),
    "register-delta-rs_20261123T214006": ("valid", {}),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stored")
    with tarfile.open(ARCHIVE) as tar:
        members = tar.getmembers()
        assert all(not m.name.startswith(("/", "..")) and (m.isfile() or m.isdir()) for m in members)
        tar.extractall(root, members=members)
    return root


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_stored_run_checks_as_recorded(runs: Path, name: str) -> None:
    report = check_run(runs / name, write=False)
    verdict, kinds = EXPECTED[name]
    got = {r.checker: sorted({a.kind for a in r.anomalies}) for r in report.results if r.anomalies}
    assert (report.verdict.value, got) == (verdict, kinds), [
        (r.checker, r.verdict.value, r.explanation[:200]) for r in report.results if r.verdict.value != "valid"
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_recorded_table_declaration_reads_back_key_for_key(runs: Path, name: str) -> None:
    """The create-table op's value, as runs recorded it before it was typed,
    is what TableDeclaration writes: old and new histories read alike."""
    history = load_history(runs / name / "history.jsonl")
    recorded = next(e.value for e in history.events if e.f == "create-table" and e.type == "invoke")
    declared = history.table_declaration()
    assert declared.to_json() == recorded
    assert list(declared.to_json()) == list(recorded)  # the same keys in the same order
    assert declared.table is not None and declared.row_key is not None
