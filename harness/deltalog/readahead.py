"""Small local files read in batches: all of a batch opened first, each with
the kernel asked to read it in, then taken one by one."""

from __future__ import annotations

import os


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


def _take(fd: int | Exception | None) -> bytes:
    if isinstance(fd, Exception):
        raise fd
    if fd is None:
        raise ValueError("not a local path")
    return _read_fd(fd)
