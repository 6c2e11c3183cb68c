"""load_history reads a history.jsonl's bytes line by line: what it makes of
any file is what parse_lines makes of the file's lines read as text
(UTF-8, undecodable bytes replaced, universal newlines), events and
problems alike, truncated last line included."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.core import fastjson, history
from harness.core.history import History, load_history, parse_lines


def _as_text(path: Path) -> History:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_lines(fh.readlines())


def _same(a: History, b: History) -> None:
    assert a.events == b.events
    assert a.problems == b.problems
    assert a.truncated == b.truncated


def _event(i: int, value: object = None) -> bytes:
    e = {"index": i, "time": 1000 * i, "process": i % 3, "type": "invoke", "f": "write", "id": f"{i}", "value": value}
    return json.dumps(e).encode()


_LINES = st.one_of(
    st.builds(_event, st.integers(0, 10**6), st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers()))),
    st.builds(_event, st.integers(0, 100), st.just(10**19)),  # an int orjson reads as a float
    st.builds(_event, st.integers(0, 100), st.text(max_size=8)),  # any character, escaped or not
    st.sampled_from([b"", b"   ", b"\xc2\xa0", b"\t", b"{", b"[]", b'{"index": 1}', b"\xff\xfe", b"\x1c", b"\r"]),
    st.binary(max_size=30),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINES, max_size=12), st.booleans(), st.integers(0, 40), st.sampled_from([1, 5, 64, history._BLOCK]))
def test_load_history_reads_any_file_as_parse_lines_reads_its_text(
    lines: list[bytes], ends: bool, cut: int, block: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if ends else b"")
    data = data[: len(data) - cut] if cut < len(data) else data  # a last line cut off, mid-event
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        path.write_bytes(data)
        was, history._BLOCK = history._BLOCK, block  # lines astride the blocks the file is read in
        try:
            got = load_history(path)
        finally:
            history._BLOCK = was
        _same(got, _as_text(path))


def test_a_long_history_is_read_by_its_bytes(tmp_path: Path) -> None:
    """Over the pieces the long-digit search maps: a run of 19 digits
    astride two pieces is still seen, and a history without one is read
    line by line by orjson, as the text would be."""
    path = tmp_path / "history.jsonl"
    lines = [_event(i, {"rows": i}) for i in range(60_000)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert len(path.read_bytes()) > fastjson._PIECE
    _same(load_history(path), _as_text(path))
    assert not fastjson.has_long_digits(path.read_bytes())
    astride = b" " * (fastjson._PIECE - 10) + b"1" * 19 + b" " * 100
    assert fastjson.has_long_digits(astride) and not fastjson.has_long_digits(astride.replace(b"1" * 19, b"1" * 18))
