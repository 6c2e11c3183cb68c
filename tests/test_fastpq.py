"""The reader processes' decoder of small parquet files (harness.deltalog._fastpq)
against Arrow's reader: on files pyarrow writes with every option that
changes their layout, it gives Arrow's values exactly or declines; it does
not decline the layouts it is there for; and broken files never crash it."""

from __future__ import annotations

import io
import math
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.deltalog import _pool
from harness.deltalog.schema import _read_parquet

try:
    import harness.deltalog._fastpq as _fastpq
except ImportError:
    if os.environ.get("CI"):  # CI has a C compiler (.ci/setup-debian): a build that lost it is a failure
        raise
    pytest.skip("the C decoder was not built: no C compiler at install time", allow_module_level=True)

# (Arrow type, values), for the types the decoder reads and two it leaves to Arrow.
_I32, _I64 = (-(2**31), 2**31 - 1), (-(2**63), 2**63 - 1)
_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy]] = {
    "int32": (pa.int32(), st.integers(*_I32)),
    "uint32": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "int64": (pa.int64(), st.integers(*_I64)),
    "uint64": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "float32": (pa.float32(), st.floats(width=32, allow_nan=True)),
    "float64": (pa.float64(), st.floats(allow_nan=True)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (pa.string(), st.text(max_size=12)),
    "large_string": (pa.large_string(), st.text(max_size=12)),
    "binary": (pa.binary(), st.binary(max_size=12)),
    "int16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "date32": (pa.date32(), st.dates()),
}
_READ = {"int32", "uint32", "int64", "uint64", "float32", "float64", "bool", "string", "large_string", "binary"}


@st.composite
def _tables(draw: Any) -> tuple[pa.Table, set[str]]:
    names = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=4))
    rows = draw(st.integers(0, 40))
    arrays, fields = [], []
    for i, name in enumerate(names):
        typ, values = _TYPES[name]
        nullable = draw(st.booleans())
        col = draw(st.lists(st.one_of(st.none(), values) if nullable else values, min_size=rows, max_size=rows))
        # A column of one repeated value: the dictionary's runs are RLE, not bit-packed.
        if rows and draw(st.booleans()):
            col = [col[0]] * rows
        arrays.append(pa.array(col, type=typ))
        fields.append(pa.field(f"c{i}", typ, nullable=nullable))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields)), set(names)


@st.composite
def _layouts(draw: Any) -> dict[str, Any]:
    return {
        "compression": draw(st.sampled_from(["none", "snappy", "zstd", "gzip"])),
        "use_dictionary": draw(st.booleans()),
        "data_page_size": draw(st.sampled_from([None, 16, 64])),
        "row_group_size": draw(st.sampled_from([None, 1, 7])),
        "data_page_version": draw(st.sampled_from(["1.0", "2.0"])),
        "store_schema": draw(st.booleans()),
        "write_statistics": draw(st.booleans()),
    }


def _write(table: pa.Table, layout: dict[str, Any]) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **layout)
    return sink.getvalue()


def _same(a: list[list[Any]], b: list[list[Any]]) -> bool:
    """Equal values, NaN equal to NaN, and of the same Python types."""

    def one(x: Any, y: Any) -> bool:
        if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
            return True
        return type(x) is type(y) and x == y

    return len(a) == len(b) and all(len(c) == len(d) and all(map(one, c, d)) for c, d in zip(a, b, strict=True))


@settings(
    max_examples=int(os.environ.get("FASTPQ_EXAMPLES", 400)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_tables(), _layouts())
def test_decodes_what_arrow_reads_or_declines(case: tuple[pa.Table, set[str]], layout: dict[str, Any]) -> None:
    table, types = case
    data = _write(table, layout)
    arrow = _read_parquet(data)
    key, declined = _fastpq.decode(data, {})
    assert declined is None  # an unknown footer: nothing decoded
    kinds = _pool._kinds_of(arrow.schema)
    got = _fastpq.decode(data, {key: kinds} if kinds else {})
    assert got is not None and got[0] == key
    if got[1] is not None:
        assert _same(got[1], [c.to_pylist() for c in arrow.columns])
    # What it is there for: version 1 pages, plain or dictionary, not
    # compressed or snappy, of the types it reads.
    ours = layout["compression"] in ("none", "snappy") and layout["data_page_version"] == "1.0"
    if ours and types <= _READ:
        assert got[1] is not None, f"declined a file of {sorted(types)} written with {layout}"
    if not types <= _READ:
        assert kinds is None or got[1] is None


def test_the_key_leaves_out_row_counts_only() -> None:
    """Files of one schema share a key whatever their rows; a schema that
    differs in a type, a name or its metadata gets another."""
    a = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "v": ["x", "y", None]})
    keys = {_fastpq.decode(_write(t, {}), {})[0] for t in (a, a.slice(0, 1), a.slice(1))}
    assert len(keys) == 1
    others = [
        a.cast(pa.schema([("k", pa.int32()), ("v", pa.string())])),
        a.rename_columns(["k", "w"]),
        a.replace_schema_metadata({"m": "1"}),
    ]
    assert not keys & {_fastpq.decode(_write(t, {}), {})[0] for t in others}


def test_reader_processes_use_it_after_arrow_read_the_first_file() -> None:
    """_pool's decoder learns a schema from Arrow's read of its first file,
    and decodes the next files of that schema itself, to the same values."""
    _pool._fast_kinds.clear()
    _pool._fast_schemas.clear()
    files = [pa.table({"k": pa.array([i, i + 1], pa.int64()), "writer": [f"t{i}", None]}) for i in range(3)]
    got = [_pool._decode_parquet(_write(t, {})) for t in files]
    assert isinstance(got[0][1], pa.Table)
    assert all(isinstance(g[1], list) for g in got[1:])
    assert all(g[0] is got[0][0] for g in got)
    assert [g[1] for g in got[1:]] == [[c.to_pylist() for c in t.columns] for t in files[1:]]
    assert [g[2] for g in got] == [2, 2, 2]


def test_a_schema_it_reads_wrongly_goes_back_to_arrow() -> None:
    """Were the decoder to disagree with Arrow on a schema's first file,
    that schema's files are left to Arrow from then on."""
    _pool._fast_kinds.clear()
    _pool._fast_schemas.clear()
    t = pa.table({"k": pa.array([1, 2], pa.int64())})
    key = _fastpq.decode(_write(t, {}), {})[0]
    real = _pool._FAST_KINDS
    try:
        _pool._FAST_KINDS = {**real, pa.int64(): "Q"}  # right width, wrong sign
        _pool._decode_parquet(_write(pa.table({"k": pa.array([-1, 2], pa.int64())}), {}))
    finally:
        _pool._FAST_KINDS = real
    assert _pool._fast_kinds[key] is None
    assert isinstance(_pool._decode_parquet(_write(t, {}))[1], pa.Table)


@settings(max_examples=int(os.environ.get("FASTPQ_EXAMPLES", 600)), deadline=None)
@given(st.data())
def test_broken_files_are_declined_or_read_as_arrow_reads_them(data: st.DataObject) -> None:
    """Bytes changed anywhere or cut short: the decoder never crashes, and
    what it does read, Arrow reads too, to the same values. A file Arrow
    turns down (a required field gone, a histogram of the wrong length, an
    empty run of dictionary indices) it declines, so that the file stays
    unreadable to the check, as it is to Arrow."""
    table = pa.table(
        {
            "k": pa.array([5, 6, 7, None], pa.int64()),
            "s": ["a", "bb", None, "dddd"],
            "b": [True, None, False, True],
        }
    )
    layout = data.draw(_layouts())
    layout["compression"] = data.draw(st.sampled_from(["none", "snappy"]))
    layout["data_page_version"] = "1.0"
    good = _write(table, layout)
    key = _fastpq.decode(good, {})[0]
    kinds = {key: "qsb"}
    buf = bytearray(good)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(buf) - 1))
        buf[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(buf)))
    broken = bytes(buf[:cut] if data.draw(st.booleans()) else buf)
    got = _fastpq.decode(broken, kinds)
    assert got is None or (isinstance(got[0], bytes) and (got[1] is None or len(got[1]) == 3))
    if got is not None and got[1] is not None:
        arrow = _read_parquet(broken)  # raises if Arrow turns it down
        assert _same(got[1], [c.to_pylist() for c in arrow.columns])


@pytest.mark.parametrize(
    "fixture, engine",
    [("two-jvm-single-driver", "parquet-mr"), ("runs-before-issue-12", "delta-rs")],
)
def test_engines_files_decode_as_arrow_reads_them(fixture: str, engine: str) -> None:
    """Data files that delta-spark (parquet-mr) and delta-rs wrote in real
    runs: each the reader processes decode gives Arrow's values, and all
    but the first of each footer key come from the decoder, not Arrow."""
    _pool._fast_kinds.clear()
    _pool._fast_schemas.clear()
    fast = arrow = 0
    with tarfile.open(Path(__file__).parent / "fixtures" / f"{fixture}.tar.gz") as tar:
        for member in tar.getmembers():
            if not member.name.endswith(".parquet") or "_delta_log" in member.name:
                continue
            f = tar.extractfile(member)
            assert f is not None
            data = f.read()
            assert engine in pq.ParquetFile(io.BytesIO(data)).metadata.created_by
            _schema, got, n = _pool._decode_parquet(data)
            want = [c.to_pylist() for c in _read_parquet(data).columns]
            if isinstance(got, list):
                fast += 1
                assert got == want, member.name
            else:
                arrow += 1
            assert n == len(want[0])
    assert arrow <= len(_pool._fast_kinds) and fast > 3 * arrow


_ASAN_FUZZ = """
import io, random, sys
sys.path.insert(0, sys.argv[1])
import _fastpq
import pyarrow as pa, pyarrow.parquet as pq
rnd = random.Random(7)
kinds_of = {"int64": "q", "string": "s", "bool": "b", "int32": "i", "float": "f", "binary": "y", "uint64": "Q",
            "double": "d"}
tables = [
    pa.table({"k": pa.array([5, 6, 7, None], pa.int64()), "s": ["a", "bb", None, "dddd"],
              "b": [True, None, False, True]}),
    pa.table({"i": pa.array(range(50), pa.int32()), "f": pa.array([x / 3 for x in range(50)], pa.float32()),
              "y": [bytes([x]) * (x % 5) for x in range(50)]}),
    pa.table({"u": pa.array([1] * 30, pa.uint64()), "d": pa.array([None] * 30, pa.float64()), "s": ["same"] * 30}),
]
def mutated(good, cut_out):
    buf = bytearray(good)
    for _ in range(rnd.randint(1, 4)):
        buf[rnd.randrange(len(buf))] = rnd.randrange(256)
    if rnd.random() < 0.2:
        buf = buf[: rnd.randrange(len(buf) + 1)]
    elif cut_out and rnd.random() < 0.3:  # pages cut out, the footer kept: its offsets now point past the end
        foot = len(good) - 8 - int.from_bytes(good[-8:-4], "little")
        at = rnd.randrange(4, foot)
        buf = buf[:at] + buf[rnd.randrange(at, foot + 1) :]
    return bytes(buf)
decoded = 0
for t in tables:
    for layout in ({"compression": "none"}, {"compression": "snappy", "use_dictionary": False},
                   {"compression": "snappy", "row_group_size": 7, "data_page_size": 64}):
        sink = io.BytesIO()
        pq.write_table(t, sink, **layout)
        good = sink.getvalue()
        key = _fastpq.decode(good, {})[0]
        kinds = {key: "".join(kinds_of[str(f.type)] for f in t.schema)}
        assert _fastpq.decode(good, kinds)[1] is not None, layout
        for _ in range(1500):
            got = _fastpq.decode(mutated(good, True), kinds)
            decoded += got is not None and got[1] is not None
str_map = pa.map_(pa.string(), pa.string())
meta = pa.struct([("id", pa.string()), ("configuration", str_map), ("partitionColumns", pa.list_(pa.string()))])
add = pa.struct([("path", pa.string()), ("size", pa.int64()), ("dataChange", pa.bool_())])
proto = pa.struct([("minReaderVersion", pa.int32())])
n = 40
checkpoint = pa.table({
    "add": pa.array([None, None] + [{"path": f"part-{i}", "size": i, "dataChange": False} for i in range(n)], add),
    "metaData": pa.array([{"id": "t", "configuration": [("k", "v")], "partitionColumns": ["p"]}] + [None] * (n + 1),
                         meta),
    "protocol": pa.array([None, {"minReaderVersion": 1}] + [None] * n, proto),
})
for layout in ({"compression": "none"}, {"compression": "snappy", "use_dictionary": False},
               {"compression": "snappy", "row_group_size": 7, "data_page_size": 64}):
    sink = io.BytesIO()
    pq.write_table(checkpoint, sink, **layout)
    good = sink.getvalue()
    assert _fastpq.checkpoint(good) is not None, layout
    for _ in range(1500):
        got = _fastpq.checkpoint(mutated(good, True))
        decoded += got is not None
print("decoded", decoded)
"""


def test_no_byte_out_of_bounds_under_address_sanitizer(tmp_path: Path) -> None:
    """The decoder built with AddressSanitizer, on thousands of data files
    and checkpoints with bytes changed, cut off or cut out: no read or write
    outside the buffers it allocates (snappy's output, a dictionary, levels,
    indices) or past the end of the file it is given. A run without a crash proves less: a stray
    access seldom crashes. (Without the check of a snappy copy's length, or
    of a dictionary index, this test fails.)"""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc")
    lib = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(lib):
        pytest.skip("gcc has no AddressSanitizer runtime")
    src = Path(__file__).parents[1] / "harness" / "deltalog" / "_fastpq.c"
    so = tmp_path / ("_fastpq" + sysconfig.get_config_var("EXT_SUFFIX"))
    include = sysconfig.get_paths()["include"]
    build = [gcc, "-O1", "-g", "-fsanitize=address", "-shared", "-fPIC", f"-I{include}", str(src), "-o", str(so)]
    subprocess.run(build, check=True, timeout=120)
    env = {**os.environ, "LD_PRELOAD": lib, "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=86"}
    run = subprocess.run(
        [sys.executable, "-c", _ASAN_FUZZ, str(tmp_path)], env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert int(run.stdout.split()[-1]) > 0  # some changed files were still read: the decoding was exercised
