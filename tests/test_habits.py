"""The habits CI keeps: ruff's lint and format over the tree, and
mypy on the bottom layers (the paths are in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail(f"{name} is not installed in this venv: pip install -e '.[dev]'")
    return found


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_ruff_lint_is_clean() -> None:
    p = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_ruff_format_is_clean() -> None:
    p = _run(_tool("ruff"), "format", "--no-cache", "--check", ".")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_mypy_is_clean_on_the_bottom_layers() -> None:
    p = _run(_tool("mypy"), "--no-incremental")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "harness/core" in (REPO / "pyproject.toml").read_text()
