from collections.abc import Sequence
from typing import Any

Version = tuple[Any, Any, Any]

def take(alive: dict[str, list[Version]], removes: Sequence[dict]) -> list[Version]: ...
def keep(
    alive: dict[str, list[Version]],
    path: str,
    keys: Sequence[Any],
    writers: Sequence[Any] | None,
    prevs: Sequence[Any] | None,
    added: list[Version],
) -> None: ...
def fresh(
    live: dict[tuple[Any, Any], int], added: Sequence[Version]
) -> tuple[list[tuple[Any, Any]], list[Version]]: ...
def settle(
    live: dict[tuple[Any, Any], int],
    dropped: set[tuple[Any, Any]],
    removed: Sequence[Version],
    added_ids: Sequence[tuple[Any, Any]],
) -> set[tuple[Any, Any]]: ...
