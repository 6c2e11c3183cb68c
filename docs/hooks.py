"""MkDocs hook: write the reference pages from the code before each build,
so the site's reference is what this checkout's code does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.cli.main import build_parser
from harness.cli.reference import commands_of, pages


def on_pre_build(config: Any, **_: Any) -> None:
    out = Path(config["docs_dir"]) / "reference"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in pages(commands_of(build_parser()[0])).items():
        path = out / name
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
