"""The checkpoint reader of harness.deltalog._fastpq against Arrow's: on
checkpoints pyarrow writes with every option that changes their layout, the
summary a checkpoint comparison uses (its adds' paths, its metaData and
protocol actions) is Arrow's exactly; two checkpoints the reader gives one
metaData/protocol key hold the same actions, wherever their rows lie; what it
cannot read it declines; and delta-spark's checkpoints it reads."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.deltalog import checkpoints

try:
    import harness.deltalog._fastpq as _fastpq
except ImportError:
    if os.environ.get("CI"):  # CI has a C compiler (.ci/setup-debian): a build that lost it is a failure
        raise
    pytest.skip("the C decoder was not built: no C compiler at install time", allow_module_level=True)

_STR_MAP = pa.map_(pa.string(), pa.string())
_ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", _STR_MAP),
        ("size", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
    ]
)
_REMOVE = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64())])
_META = pa.struct(
    [
        ("id", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
_PROTOCOL = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])

_short = st.text(max_size=6)
_maps = st.lists(st.tuples(_short, st.one_of(st.none(), _short)), max_size=3, unique_by=lambda kv: kv[0])
_metas = st.fixed_dictionaries(
    {
        "id": st.sampled_from(["a", "b"]),
        "format": st.one_of(st.none(), st.fixed_dictionaries({"provider": st.just("parquet"), "options": _maps})),
        "schemaString": st.one_of(st.none(), st.sampled_from(["{}", '{"type":"struct"}'])),
        "partitionColumns": st.one_of(st.none(), st.lists(_short, max_size=2)),
        "configuration": st.one_of(st.none(), _maps),
        "createdTime": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
    }
)
_protocols = st.fixed_dictionaries(
    {"minReaderVersion": st.integers(1, 3), "minWriterVersion": st.one_of(st.none(), st.integers(2, 7))}
)
_adds = st.fixed_dictionaries(
    {
        "path": st.one_of(st.none(), st.text(min_size=1, max_size=20)),
        "partitionValues": _maps,
        "size": st.integers(0, 2**40),
        "dataChange": st.booleans(),
        "stats": st.one_of(st.none(), _short),
    }
)


@st.composite
def _rows(draw: Any, metas: list[dict], protocols: list[dict]) -> list[tuple[str, dict]]:
    """A checkpoint's actions, one a row: the given metaData and protocol
    rows, in that order, among adds and removes at places drawn."""
    others = draw(
        st.lists(st.one_of(st.tuples(st.just("add"), _adds), st.tuples(st.just("remove"), _adds)), max_size=40)
    )
    rows: list[tuple[str, dict]] = [
        (k, {"path": a["path"], "deletionTimestamp": 1} if k == "remove" else a) for k, a in others
    ]
    ours = [("metaData", m) for m in metas] + [("protocol", p) for p in protocols]
    places = sorted(draw(st.lists(st.integers(0, len(rows)), min_size=len(ours), max_size=len(ours))))
    for shift, (at, row) in enumerate(zip(places, ours, strict=True)):
        rows.insert(at + shift, row)
    return rows


def _table(rows: list[tuple[str, dict]]) -> pa.Table:
    cols = {"add": _ADD, "remove": _REMOVE, "metaData": _META, "protocol": _PROTOCOL}
    return pa.table({c: pa.array([a if k == c else None for k, a in rows], t) for c, t in cols.items()})


@st.composite
def _layouts(draw: Any) -> dict[str, Any]:
    return {
        "compression": draw(st.sampled_from(["none", "snappy", "snappy", "zstd"])),
        "use_dictionary": draw(st.booleans()),
        "data_page_size": draw(st.sampled_from([None, 16, 256])),
        "row_group_size": draw(st.sampled_from([None, 3, 11])),
        "data_page_version": draw(st.sampled_from(["1.0", "1.0", "2.0"])),
        "write_statistics": draw(st.booleans()),
    }


def _write(table: pa.Table, layout: dict[str, Any]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **layout)
    return sink.getvalue()


@settings(
    max_examples=int(os.environ.get("FASTPQ_EXAMPLES", 300)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_summaries_are_arrows_and_one_key_means_the_same_actions(data: st.DataObject) -> None:
    """Two checkpoints written alike, with metaData and protocol rows that
    are the same or not, among other actions: each one's summary is what
    Arrow reads; where the reader gives them one footer key and one
    metaData/protocol key, Arrow reads the same actions from both; and the
    checkpoints of the same actions at other rows get one key (else the
    cache of Arrow's reads would not save a thing)."""
    layout = data.draw(_layouts())
    metas = data.draw(st.lists(_metas, min_size=0, max_size=2))
    protocols = data.draw(st.lists(_protocols, min_size=0, max_size=1))
    same = data.draw(st.booleans())
    files = []
    for i in range(2):
        if i == 1 and not same:
            metas = data.draw(st.lists(_metas, min_size=0, max_size=2))
            protocols = data.draw(st.lists(_protocols, min_size=0, max_size=1))
        files.append(_write(_table(data.draw(_rows(metas, protocols))), layout))
    got = [_fastpq.checkpoint(f) for f in files]
    want = [checkpoints._arrow_summary(f, with_paths=True) for f in files]
    for g, w, f in zip(got, want, files, strict=True):
        if g is not None:
            assert g[1] == w[0]
        assert checkpoints._summary_of(f) == w  # the cache of Arrow's reads included
    if got[0] is not None and got[1] is not None and (got[0][0], got[0][2]) == (got[1][0], got[1][2]):
        assert want[0][1] == want[1][1]
    if same and layout["data_page_version"] == "1.0" and layout["compression"] != "zstd":
        assert got[0] is not None and got[1] is not None  # the layouts it is there for
        assert got[0][2] == got[1][2]


def test_what_it_does_not_read_it_declines() -> None:
    """A sidecar column (a v2 checkpoint's adds may be in other files), data
    pages of version 2, a compression it does not decode, a file cut short,
    no add.path, bytes that are no parquet: None, and Arrow decides."""
    rows = [("metaData", {"id": "a"}), ("add", {"path": "x", "partitionValues": [], "size": 1, "dataChange": False})]
    table = _table(rows)
    good = _write(table, {"compression": "snappy"})
    assert _fastpq.checkpoint(good) is not None
    sidecar = table.append_column("sidecar", pa.nulls(len(rows), pa.struct([("path", pa.string())])))
    no_add = table.drop_columns(["add"])
    for data in (
        _write(sidecar, {}),
        _write(table, {"data_page_version": "2.0"}),
        _write(table, {"compression": "gzip"}),
        good[: len(good) // 2] + good[-8:],
        _write(no_add, {}),
        b"PAR1" + b"\0" * 40 + b"PAR1",
        b"",
    ):
        assert _fastpq.checkpoint(data) is None


def test_a_footer_it_reads_wrongly_goes_back_to_arrow(monkeypatch: pytest.MonkeyPatch) -> None:
    """_fastpq is trusted for a footer only after the first checkpoint with
    it gave Arrow's paths: one that did not is read by Arrow from then on."""
    data = _write(_table([("add", {"path": "p", "partitionValues": [], "size": 1, "dataChange": False})]), {})
    real = _fastpq.checkpoint(data)
    assert real is not None
    wrong = (real[0], {"not p"}, real[2])
    monkeypatch.setattr(checkpoints, "_fast_footers", {})
    monkeypatch.setattr(checkpoints, "_fast_actions", {})
    monkeypatch.setattr(checkpoints._fastpq, "checkpoint", lambda _data: wrong)
    assert checkpoints._summary_of(data) == ({"p"}, [])
    assert checkpoints._fast_footers == {real[0]: False}
    assert checkpoints._summary_of(data) == ({"p"}, [])


@pytest.mark.parametrize("fixture", ["two-jvm-single-driver", "coordinator-ambiguous"])
def test_delta_sparks_checkpoints_are_read_as_arrow_reads_them(fixture: str) -> None:
    """Checkpoints delta-spark (parquet-mr) wrote in real runs, with their
    deletion vector, tags and row tracking columns: the reader reads them,
    to Arrow's paths, metaData and protocol."""
    read = 0
    with tarfile.open(Path(__file__).parent / "fixtures" / f"{fixture}.tar.gz") as tar:
        for member in tar.getmembers():
            if not (member.name.endswith(".checkpoint.parquet")):
                continue
            f = tar.extractfile(member)
            assert f is not None
            data = f.read()
            assert "parquet-mr" in (pq.ParquetFile(io.BytesIO(data)).metadata.created_by or "")
            got = _fastpq.checkpoint(data)
            want = checkpoints._arrow_summary(data, with_paths=True)
            assert got is not None and got[1] == want[0], member.name
            assert checkpoints._summary_of(data) == want
            read += 1
    assert read == 2


def _outcome(summarize: Any, data: bytes) -> Any:
    try:
        return summarize(data)
    except Exception:  # noqa: BLE001 - the full reader then decides, and reports the checkpoint broken
        return None


@settings(max_examples=int(os.environ.get("FASTPQ_EXAMPLES", 600)), deadline=None)
@given(st.data())
def test_broken_checkpoints_are_summarized_as_arrow_summarizes_them(data: st.DataObject) -> None:
    """A checkpoint with bytes changed or cut short, after one written the
    same way was read (so its footer is trusted and its metaData/protocol
    key known): the summary is Arrow's, and where Arrow cannot read the
    file the summary fails too, so the checkpoint is reported broken as it
    was before the reader. (Without the row count checked against the
    row group's, or a dictionary page's bit width read where it has no
    values, this test fails.)"""
    rows = [("metaData", {"id": "a", "configuration": [("k", "v")], "partitionColumns": ["p"]})]
    rows += [("protocol", {"minReaderVersion": 1, "minWriterVersion": 2})]
    rows += [("add", {"path": f"part-{i}", "partitionValues": [], "size": i, "dataChange": False}) for i in range(30)]
    layout = {
        "compression": data.draw(st.sampled_from(["none", "snappy"])),
        "use_dictionary": data.draw(st.booleans()),
        "row_group_size": data.draw(st.sampled_from([None, 7])),
        "data_page_size": data.draw(st.sampled_from([None, 64])),
    }
    good = _write(_table(rows), layout)
    assert checkpoints._summary_of(good) == checkpoints._arrow_summary(good, with_paths=True)
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 3))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    broken = bytes(buf[:cut] if data.draw(st.booleans()) else buf)
    want = _outcome(lambda b: checkpoints._arrow_summary(b, with_paths=True), broken)
    assert _outcome(checkpoints._summary_of, broken) == want
