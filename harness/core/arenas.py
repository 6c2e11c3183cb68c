"""CPython's small-object arenas kept for reuse and backed by huge pages
(the optional extension harness.core._arenas), for a process that builds
and frees millions of objects: the check of a long run."""

from __future__ import annotations

try:
    from harness.core import _arenas
except ImportError:  # built where the install found a C compiler
    _arenas = None  # type: ignore[assignment]


def keep_arenas() -> bool:
    """Install the arena allocator in this process (once; later calls do
    nothing). False where the extension was not built: CPython's own
    allocator then serves, and nothing differs but the time."""
    if _arenas is None:
        return False
    _arenas.install()
    return True
