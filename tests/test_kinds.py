"""The table of anomaly kinds (checkers/kinds.py): every kind a
checker names is in it with the claims it breaks, the docs' checker
table ("What is checked") says the same, and an anomaly outside the table cannot be made."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from checkers.base import Anomaly
from checkers.kinds import KINDS, kind_of
from tests.test_tamper import _readme_kinds

REPO = Path(__file__).resolve().parent.parent


def _literal_anomalies() -> list[tuple[str, int, str, str | None]]:
    """(module, line, kind, claim) of every Anomaly(...) in checkers/ whose
    kind and claim are literals."""
    out = []
    for path in sorted((REPO / "checkers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Anomaly"):
                continue
            args = {**dict(zip(("kind", "claim"), node.args, strict=False)), **{k.arg: k.value for k in node.keywords}}
            kind, claim = args.get("kind"), args.get("claim")
            if isinstance(kind, ast.Constant) and isinstance(claim, ast.Constant):
                out.append((path.stem, node.lineno, kind.value, claim.value))
    return out


def test_every_literal_anomaly_is_in_the_table_with_its_claim() -> None:
    found = _literal_anomalies()
    assert len(found) > 30
    wrong = []
    for module, line, kind, claim in found:
        try:
            kind_of(kind, claim)
        except ValueError as e:
            wrong.append(f"checkers/{module}.py:{line}: {e}")
    assert wrong == []


def test_the_readme_checker_table_names_the_same_kinds() -> None:
    readme = {(c, k) for c, ks in _readme_kinds().items() for k in ks}
    table = {(c, k.kind) for k in KINDS.values() for c in k.checkers}
    assert readme == table, (sorted(readme - table), sorted(table - readme))


def test_an_anomaly_outside_the_table_is_a_harness_bug() -> None:
    with pytest.raises(ValueError, match="not in checkers/kinds.py"):
        Anomaly("lost-wirte", "C7", "typo")
    with pytest.raises(ValueError, match="not 'C12'"):
        Anomaly("lost-write", "C12", "wrong claim")
    a = Anomaly("lost-write", "C7", "ok")
    assert a.to_json()["title"] == "Lost write"
