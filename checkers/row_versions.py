"""The row versions a replay of the log holds alive, commit by commit: the
bookkeeping of the serializability checker's recovery of transactions.

A row version is (key, writer, prev) (checkers.serializability); `alive`
maps a live data file's path to the versions its rows hold, and `live`
counts the live copies of each (key, writer): a copy-on-write rewrite
carries a version over into a new file, so one version can be in several.

These are the reference implementations. Where the compiled module
(`checkers._rowversions`, built with the project) is present, the checker
uses its functions instead: the same steps, a third of the replay's time
on a long log. A property test holds the two to the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

Version = tuple[Any, Any, Any]  # (key, writer, prev)


def _take(alive: dict[str, list[Version]], removes: Sequence[dict]) -> list[Version]:
    """The versions of the files `removes` (remove actions) name, each
    file's list taken out of `alive`."""
    out: list[Version] = []
    for rm in removes:
        out += alive.pop(rm["path"], [])
    return out


def _keep(
    alive: dict[str, list[Version]],
    path: str,
    keys: Sequence[Any],
    writers: Sequence[Any] | None,
    prevs: Sequence[Any] | None,
    added: list[Version],
) -> None:
    """A file's versions, one per row as far as the shortest column goes
    (None or empty: a column the file lacks, every row's None), kept in
    `alive[path]` and appended to `added`."""
    versions = list(zip(keys, writers or [None] * len(keys), prevs or [None] * len(keys), strict=False))
    alive[path] = versions
    added += versions


def _fresh(live: dict[tuple[Any, Any], int], added: Sequence[Version]) -> tuple[list[tuple[Any, Any]], list[Version]]:
    """(each added version's (key, writer), the added versions no copy of
    which is alive): a commit's new versions."""
    ids = [(k, w) for k, w, _ in added]
    return ids, [r for r, kw in zip(added, ids, strict=True) if not live.get(kw)]


def _settle(
    live: dict[tuple[Any, Any], int],
    dropped: set[tuple[Any, Any]],
    removed: Sequence[Version],
    added_ids: Sequence[tuple[Any, Any]],
) -> set[tuple[Any, Any]]:
    """One live copy fewer of each removed version, one more of each added
    one (an absent count is 0); a count that reaches 0 leaves `live` for
    `dropped`. The removed (key, writer) not added back."""
    removed_ids = [(k, w) for k, w, _ in removed]
    gone = set(removed_ids).difference(added_ids)
    for kws, delta in ((removed_ids, -1), (added_ids, 1)):
        for kw in kws:
            n = live.get(kw, 0) + delta
            if n:
                live[kw] = n
            else:
                del live[kw]
                dropped.add(kw)
    return gone


REFERENCE: dict[str, Callable[..., Any]] = {"take": _take, "keep": _keep, "fresh": _fresh, "settle": _settle}

_compiled: ModuleType | None
try:  # optional (pyproject.toml): without a C compiler the functions above serve
    import checkers._rowversions as _compiled
except ImportError:  # pragma: no cover
    _compiled = None

take = _compiled.take if _compiled is not None else _take
keep = _compiled.keep if _compiled is not None else _keep
fresh = _compiled.fresh if _compiled is not None else _fresh
settle = _compiled.settle if _compiled is not None else _settle
