"""Small files read a batch at a time (harness.deltalog._batchread, through
io_uring): each file's bytes are what reading it alone gives, whatever the
batch holds (more files than the ring has entries, empty, large and
missing files, a directory, no path, a NUL in a name), a file the batch
did not read is read the ordinary way and raises what that raises, and a
forked child reads with a ring of its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from harness.deltalog import readahead

try:
    from harness.deltalog import _batchread
except ImportError:
    if os.environ.get("CI"):  # CI has a C compiler (.ci/setup-debian): a build that lost it is a failure
        raise
    pytest.skip("the batch reader was not built: no C compiler at install time", allow_module_level=True)


def _io_uring_offered() -> bool:
    try:
        return Path("/proc/sys/kernel/io_uring_disabled").read_text().strip() == "0"
    except OSError:
        return sys.platform.startswith("linux")


def _files(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        p = tmp_path / f"part-{i:05d}.parquet"
        p.write_bytes(os.urandom(i % 3000) + f"file {i}".encode())
        out.append(str(p))
    return out


def _taken(got: list) -> list[bytes | str]:
    """Each entry as _take gives it: its bytes, or the exception's type and text."""
    out: list[bytes | str] = []
    for entry in got:
        try:
            out.append(readahead._take(entry))
        except Exception as e:  # noqa: BLE001 - compared as text
            out.append(f"{type(e).__name__}: {e}")
    return out


def test_a_batch_reads_what_each_file_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names: list[str | None] = list(_files(tmp_path, 700))  # more than the ring's 256 entries
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "large").write_bytes(os.urandom(3 << 20))  # more than one 1 MB read of the ordinary way
    names[10:10] = [str(tmp_path / "empty"), str(tmp_path / "large"), str(tmp_path / "missing"), str(tmp_path)]
    names[500:500] = [None, str(tmp_path / "a\0b")]
    got = _taken(readahead._read_ahead(names))
    monkeypatch.setattr(readahead, "_batchread", None)
    assert got == _taken(readahead._read_ahead(names))  # the ordinary way, file by file
    assert got[10] == b"" and len(got[11]) == 3 << 20
    assert str(got[12]).startswith("FileNotFoundError") and str(got[13]).startswith("IsADirectoryError")
    assert got[500] == "ValueError: not a local path" and str(got[501]).startswith("ValueError")
    assert sum(isinstance(g, bytes) for g in got) == 702


@pytest.mark.skipif(not _io_uring_offered(), reason="this kernel or sandbox offers no io_uring")
def test_where_io_uring_is_offered_the_batch_reads_the_files(tmp_path: Path) -> None:
    """The batch read itself, not the ordinary way behind it: each readable
    file is read by it, each it could not read is left to that way."""
    names: list[str | None] = [*_files(tmp_path, 300), str(tmp_path / "missing"), str(tmp_path), None]
    got = _batchread.read(names)
    assert got is not None, "io_uring refused although the kernel offers it"
    assert got[:300] == [Path(n).read_bytes() for n in names[:300] if n is not None]
    assert got[300:] == [None, None, None]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_and_its_parent_each_read_on_their_own(tmp_path: Path) -> None:
    names: list[str | None] = list(_files(tmp_path, 300))
    want = [Path(n).read_bytes() for n in names if n is not None]
    assert _taken(readahead._read_ahead(names)) == want  # the parent's ring is set up
    pid = os.fork()
    if pid == 0:
        ok = all(_taken(readahead._read_ahead(names)) == want for _ in range(3))
        os._exit(0 if ok else 3)
    assert _taken(readahead._read_ahead(names)) == want
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert _taken(readahead._read_ahead(names)) == want
