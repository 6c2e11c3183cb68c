"""Small local files read in batches: all of a batch submitted to the disk
at once (through io_uring where the kernel offers it, harness.deltalog.
_batchread), else all of a batch opened first, each with the kernel asked
to read it in, then taken one by one."""

from __future__ import annotations

import os
from collections.abc import Sequence

try:
    from harness.deltalog import _batchread
except ImportError:  # built where the install found a C compiler
    _batchread = None  # type: ignore[assignment]


def _read_fd(fd: int) -> bytes:
    # os.read: a file object's setup costs more than reading a small data file.
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _opened_ahead(names: list[str | None]) -> list[int | Exception | None]:
    """The files of a batch opened, each with the kernel asked to read it
    in now: when the page cache does not hold a long run's files, the disk
    then reads a batch's files at once instead of one after another."""
    out: list[int | Exception | None] = []
    for name in names:
        if name is None:
            out.append(None)
            continue
        try:
            fd = os.open(name, os.O_RDONLY)
        except Exception as e:  # noqa: BLE001 - e.g. a name with a NUL: raised when the file is taken
            out.append(e)
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        except (OSError, AttributeError):
            pass
        out.append(fd)
    return out


def _take(fd: int | bytes | Exception | None) -> bytes:
    if isinstance(fd, bytes):
        return fd
    if isinstance(fd, Exception):
        raise fd
    if fd is None:
        raise ValueError("not a local path")
    return _read_fd(fd)


def _read_ahead(names: list[str | None]) -> Sequence[int | bytes | Exception | None]:
    """A batch of small files for _take: each read whole already where the
    batch went to the disk at once, else opened ahead. A file the batch
    read did not get (no path, an error, a file that changed size) is
    opened ahead here, so _take raises what reading it raises."""
    got = _batchread.read(names) if _batchread is not None else None
    if got is None:
        return _opened_ahead(names)
    missed = [name for name, data in zip(names, got, strict=True) if data is None]
    again = iter(_opened_ahead(missed) if missed else ())
    return [data if data is not None else next(again) for data in got]
