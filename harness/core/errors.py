"""The harness's own errors: what is not a verdict about the engine."""

from __future__ import annotations

__all__ = ["HarnessError"]


class HarnessError(Exception):
    """A failure of the harness or its environment (exit code 2), not a verdict."""
