"""Nemeses by name. The fault kinds themselves arrive with the nemesis issue;
this registry is where the runner and the CLI look them up."""

from __future__ import annotations

from harness.procs import HarnessError

NEMESIS_NAMES = ("none",)


def parse_nemeses(spec: str | None) -> list[str]:
    names = [n.strip() for n in (spec or "none").split(",") if n.strip()]
    bad = [n for n in names if n not in NEMESIS_NAMES]
    if bad:
        raise HarnessError(f"unknown nemesis {bad[0]!r}; valid: {', '.join(NEMESIS_NAMES)}")
    return [n for n in names if n != "none"]
