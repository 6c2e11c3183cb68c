"""Loading a "module:attribute" name: the registries' entries, and the
workloads and checkers users bring of their own."""

from __future__ import annotations

import importlib

from harness.core.errors import HarnessError


def load_object(target: str, what: str) -> object:
    """`module:attribute`, imported; a HarnessError in one line if it is not there."""
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as e:
        raise HarnessError(f"{what} {target!r} cannot be loaded: {type(e).__name__}: {e}") from None
