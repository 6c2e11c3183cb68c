"""How fast this machine is at the two things a check spends its time on:
interpreted Python, and decoding small parquet files. The benchmarks print
it beside their figures, so that a figure from another machine (or the
same machine on a busier day: shared hosts vary by a factor of three) can
be read against its own."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from harness.deltalog import _pool
from harness.deltalog.schema import _read_parquet

LOOP_STEPS = 5_000_000
PARQUET_FILES = 2_000


def _python_loop_s() -> float:
    t0 = time.process_time()
    total = 0
    for i in range(LOOP_STEPS):
        total += i
    return time.process_time() - t0


def _parquet_file() -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    rows = pa.table({"k": [1, 2, 3], "writer": ["t1", "t2", "t3"], "prev_writer": [None, "t1", None]})
    pq.write_table(rows, buf, compression="snappy")
    return buf.getvalue()


def _decode_us(decode: Callable[[bytes], object], data: bytes) -> float:
    decode(data)  # the readers' decoder learns the file's footer from Arrow's read of it
    t0 = time.process_time()
    for _ in range(PARQUET_FILES):
        decode(data)
    return (time.process_time() - t0) / PARQUET_FILES * 1e6


def speed() -> dict[str, float]:
    """CPU seconds of a 5M-step Python loop, and CPU microseconds to decode
    one 3-row parquet file: by Arrow (the machine's figure, comparable
    across the project's history), and by the reader processes that decode
    a long log's data files (harness.deltalog._pool: their own decoder where
    it was built, else Arrow)."""
    data = _parquet_file()
    return {
        "python_loop_s": round(_python_loop_s(), 3),
        "parquet_decode_us": round(_decode_us(_read_parquet, data), 1),
        "reader_decode_us": round(_decode_us(_pool._decode_parquet, data), 1),
    }


def speed_line(s: dict[str, float] | None = None) -> str:
    s = s or speed()
    return (
        f"  this machine: a {LOOP_STEPS // 1_000_000}M-step Python loop takes {s['python_loop_s']:.2f} s of CPU, "
        f"a 3-row parquet file decodes in {s['parquet_decode_us']:.0f} us (figures from other machines scale by "
        f"these); the log's reader processes decode it in {s['reader_decode_us']:.1f} us "
        f"({s['reader_decode_us'] / s['parquet_decode_us']:.2f} of Arrow's time)"
    )
