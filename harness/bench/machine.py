"""How fast this machine is at the things a check spends its time on:
interpreted Python, decoding small parquet files, and summarizing a
checkpoint to compare it with the JSON replay. The benchmarks print
it beside their figures, so that a figure from another machine (or the
same machine on a busier day: shared hosts vary by a factor of three) can
be read against its own."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from harness.bench.synth_files import PROTOCOL, _checkpoint_table, metadata
from harness.deltalog import _pool, checkpoints
from harness.deltalog.schema import _read_parquet

LOOP_STEPS = 5_000_000
PARQUET_FILES = 2_000
CHECKPOINT_ADDS = 3_000  # the live files of the stored runs' tables (10,000 keys)
CHECKPOINTS = 50


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


def _checkpoint_file() -> bytes:
    import pyarrow.parquet as pq

    live = {
        f"part-{i:05d}-{i:032x}-c000.snappy.parquet": {
            "path": f"part-{i:05d}-{i:032x}-c000.snappy.parquet",
            "size": 1000 + i % 97,
            "modificationTime": 1767225600000 + i,
            "stats": f'{{"numRecords":3,"minValues":{{"k":{i}}},"maxValues":{{"k":{i + 7}}}}}',
        }
        for i in range(CHECKPOINT_ADDS)
    }
    meta = metadata("bench", "WriteSerializable", 1767225600000)
    buf = io.BytesIO()
    pq.write_table(_checkpoint_table(live, meta, PROTOCOL), buf)
    return buf.getvalue()


def _summary_us(summarize: Callable[[bytes], object], data: bytes) -> float:
    summarize(data)  # the reader learns the footer and the metaData/protocol from Arrow's read of them
    t0 = time.process_time()
    for _ in range(CHECKPOINTS):
        summarize(data)
    return (time.process_time() - t0) / CHECKPOINTS * 1e6


def speed() -> dict[str, float]:
    """CPU seconds of a 5M-step Python loop, and CPU microseconds to decode
    one 3-row parquet file: by Arrow (the machine's figure, comparable
    across the project's history), and by the reader processes that decode
    a long log's data files (harness.deltalog._pool: their own decoder where
    it was built, else Arrow); and CPU microseconds to summarize a checkpoint
    (its add paths, metaData and protocol) by Arrow and by the readers."""
    data = _parquet_file()
    checkpoint = _checkpoint_file()
    return {
        "python_loop_s": round(_python_loop_s(), 3),
        "parquet_decode_us": round(_decode_us(_read_parquet, data), 1),
        "reader_decode_us": round(_decode_us(_pool._decode_parquet, data), 1),
        "checkpoint_arrow_us": round(_summary_us(lambda b: checkpoints._arrow_summary(b, with_paths=True), checkpoint)),
        "checkpoint_reader_us": round(_summary_us(checkpoints._summary_of, checkpoint)),
    }


def speed_line(s: dict[str, float] | None = None) -> str:
    s = s or speed()
    return (
        f"  this machine: a {LOOP_STEPS // 1_000_000}M-step Python loop takes {s['python_loop_s']:.2f} s of CPU, "
        f"a 3-row parquet file decodes in {s['parquet_decode_us']:.0f} us (figures from other machines scale by "
        f"these); the log's reader processes decode it in {s['reader_decode_us']:.1f} us "
        f"({s['reader_decode_us'] / s['parquet_decode_us']:.2f} of Arrow's time); a checkpoint of "
        f"{CHECKPOINT_ADDS:,} adds is summarized for comparison with the log in {s['checkpoint_arrow_us']:,.0f} us by "
        f"Arrow, {s['checkpoint_reader_us']:,.0f} us by the readers "
        f"({s['checkpoint_reader_us'] / s['checkpoint_arrow_us']:.2f} of Arrow's time)"
    )
