from collections.abc import Iterable
from typing import Any

def add(
    state: tuple,
    tid: Any,
    version: int,
    read_version: int | None,
    reads: Iterable[Any],
    writes: Iterable[Any],
    deletes: Iterable[Any],
    predicates: Iterable[Any],
    isolation: str,
    operation: str,
) -> None: ...
