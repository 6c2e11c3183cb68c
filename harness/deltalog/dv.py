"""Deletion vectors (PROTOCOL.md, "Deletion Vectors" and the appendix
"Deletion Vector Format"): the 0-based positions of a data file's rows that
an add's DV deletes, decoded from Z85, the DV file with its CRC-32 and the
RoaringBitmapArray over portable Roaring bitmaps. Written from the protocol
and the RoaringFormatSpec; no Roaring library is needed for reading."""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from harness.deltalog.actions import _int


class DeletionVectorError(ValueError):
    """A deletion vector that cannot be located, read or decoded."""


_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85_ALPHABET)}

# RoaringBitmapArray magic numbers: the portable format's (the protocol's;
# little endian) and the native one's (big endian).
DV_MAGIC = 1681511377
DV_MAGIC_NATIVE = 1681511376
_ROARING_COOKIE_NO_RUNS = 12346
_ROARING_COOKIE_RUNS = 12347  # low 16 bits; the high 16 bits hold size - 1
_ROARING_NO_OFFSET_THRESHOLD = 4  # run-cookie bitmaps with fewer containers have no offset header
_ROARING_ARRAY_MAX = 4096  # a non-run container with more values is a bitmap
_ROARING_BITMAP_BYTES = 8192
_DV_FILE_VERSION = 1


def z85_decode(text: str) -> bytes:
    """ZeroMQ Z85 (RFC 32): every 5 characters are 4 bytes, big endian."""
    if len(text) % 5:
        raise DeletionVectorError(f"Z85 text of {len(text)} characters is not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        n = 0
        for j, c in enumerate(text[i : i + 5]):
            v = _Z85_VALUE.get(c)
            if v is None:
                raise DeletionVectorError(f"{c!r} at position {i + j} is not a Z85 character")
            n = n * 85 + v
        if n > 0xFFFFFFFF:
            raise DeletionVectorError(f"Z85 group {text[i : i + 5]!r} is more than 32 bits")
        out += n.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """The inverse of z85_decode; len(data) must be a multiple of 4."""
    if len(data) % 4:
        raise ValueError(f"Z85 encodes multiples of 4 bytes, not {len(data)}")
    out: list[str] = []
    for i in range(0, len(data), 4):
        n = int.from_bytes(data[i : i + 4], "big")
        group = []
        for _ in range(5):
            n, r = divmod(n, 85)
            group.append(_Z85_ALPHABET[r])
        out.extend(reversed(group))
    return "".join(out)


def _need(data: bytes, pos: int, n: int, what: str) -> None:
    if n < 0 or pos + n > len(data):
        raise DeletionVectorError(f"truncated: {what} needs {n} byte(s) at offset {pos}, the data has {len(data)}")


def _roaring32(data: bytes, pos: int, what: str) -> tuple[list[int], int]:
    """One 32-bit Roaring bitmap in the portable format, starting at `pos`:
    (its values in ascending order, the offset just past it)."""
    start = pos
    _need(data, pos, 4, f"{what}: cookie")
    (cookie,) = struct.unpack_from("<I", data, pos)
    pos += 4
    run_flags: bytes | None = None
    if cookie & 0xFFFF == _ROARING_COOKIE_RUNS:
        n = (cookie >> 16) + 1
        _need(data, pos, (n + 7) // 8, f"{what}: run-container flags")
        run_flags = data[pos : pos + (n + 7) // 8]
        pos += (n + 7) // 8
        has_offsets = n >= _ROARING_NO_OFFSET_THRESHOLD
    elif cookie == _ROARING_COOKIE_NO_RUNS:
        _need(data, pos, 4, f"{what}: container count")
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        has_offsets = True
    else:
        raise DeletionVectorError(
            f"{what}: cookie {cookie} at offset {start} is neither {_ROARING_COOKIE_NO_RUNS}"
            f" nor {_ROARING_COOKIE_RUNS} (with runs)"
        )
    if n > 1 << 16:
        raise DeletionVectorError(f"{what}: {n} containers, more than 16-bit keys allow")
    _need(data, pos, 4 * n, f"{what}: container descriptors")
    header = struct.unpack_from(f"<{2 * n}H", data, pos)
    pos += 4 * n
    offsets: tuple[int, ...] = ()
    if has_offsets:
        _need(data, pos, 4 * n, f"{what}: container offsets")
        offsets = struct.unpack_from(f"<{n}I", data, pos)
        pos += 4 * n
    values: list[int] = []
    prev_key = -1
    for i in range(n):
        key, card = header[2 * i], header[2 * i + 1] + 1
        where = f"{what}, container {i} (key {key})"
        if key <= prev_key:
            raise DeletionVectorError(f"{where}: keys are not ascending")
        prev_key = key
        if has_offsets and offsets[i] != pos - start:
            raise DeletionVectorError(
                f"{where}: the offset header says {offsets[i]}, the container starts at {pos - start}"
            )
        high = key << 16
        if run_flags is not None and run_flags[i >> 3] >> (i & 7) & 1:
            _need(data, pos, 2, f"{where}: run count")
            (nruns,) = struct.unpack_from("<H", data, pos)
            pos += 2
            _need(data, pos, 4 * nruns, f"{where}: runs")
            runs = struct.unpack_from(f"<{2 * nruns}H", data, pos)
            pos += 4 * nruns
            got, next_free = 0, 0
            for r in range(nruns):
                lo, length = runs[2 * r], runs[2 * r + 1] + 1
                if lo < next_free or lo + length > 1 << 16:
                    raise DeletionVectorError(
                        f"{where}: run {r} [{lo}, {lo + length}) overlaps, is out of order or past 65535"
                    )
                values.extend(range(high + lo, high + lo + length))
                got += length
                next_free = lo + length
        elif card <= _ROARING_ARRAY_MAX:
            _need(data, pos, 2 * card, f"{where}: array container")
            arr = struct.unpack_from(f"<{card}H", data, pos)
            pos += 2 * card
            if any(a >= b for a, b in zip(arr, arr[1:], strict=False)):
                raise DeletionVectorError(f"{where}: array values are not strictly ascending")
            values.extend(high | v for v in arr)
            got = card
        else:
            _need(data, pos, _ROARING_BITMAP_BYTES, f"{where}: bitmap container")
            words = struct.unpack_from("<1024Q", data, pos)
            pos += _ROARING_BITMAP_BYTES
            got = 0
            for wi, w in enumerate(words):
                base = high | (wi << 6)
                while w:
                    low = w & -w
                    values.append(base | (low.bit_length() - 1))
                    w ^= low
                    got += 1
        if got != card:
            raise DeletionVectorError(f"{where}: holds {got} value(s), its descriptor says {card}")
    return values, pos


def decode_roaring_bitmap_array(data: bytes) -> list[int]:
    """The 64-bit values of a serialized RoaringBitmapArray, in ascending
    order; anything malformed raises DeletionVectorError.

    The protocol's format ("portable", magic 1681511377, little endian
    throughout): the magic number, an 8-byte bucket count, and per bucket a
    4-byte key, the values' high 32 bits, and a 32-bit Roaring bitmap of
    their low 32 bits. Also read: the "native" format of the protocol's own
    inline example (magic 1681511376; magic, bitmap count and per bitmap
    its byte size big endian; bitmap i holds the values whose high 32 bits
    are i)."""
    _need(data, 0, 4, "magic number")
    if struct.unpack_from("<I", data, 0)[0] == DV_MAGIC:
        return _portable_array(data)
    if struct.unpack_from(">I", data, 0)[0] == DV_MAGIC_NATIVE:
        return _native_array(data)
    raise DeletionVectorError(
        f"magic number {struct.unpack_from('<I', data, 0)[0]} (little endian) is not {DV_MAGIC}"
        f" (the portable RoaringBitmapArray format), nor {DV_MAGIC_NATIVE} big endian (native)"
    )


def _portable_array(data: bytes) -> list[int]:
    _need(data, 4, 8, "bucket count")
    (buckets,) = struct.unpack_from("<Q", data, 4)
    if buckets > (len(data) - 12) // 12:  # a bucket takes at least 12 bytes
        raise DeletionVectorError(f"{buckets} buckets cannot fit in {len(data)} bytes")
    pos, prev_key = 12, -1
    values: list[int] = []
    for b in range(buckets):
        _need(data, pos, 4, f"bucket {b}: key")
        (key,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if key & 0x80000000:
            raise DeletionVectorError(f"bucket {b}: key {key} has its most significant bit set")
        if key <= prev_key:
            raise DeletionVectorError(f"bucket {b}: keys are not ascending ({prev_key}, then {key})")
        prev_key = key
        low, pos = _roaring32(data, pos, f"bucket {b} (key {key})")
        values.extend(low if key == 0 else ((key << 32) | v for v in low))
    if pos != len(data):
        raise DeletionVectorError(f"{len(data) - pos} byte(s) after the last bucket")
    return values


def _native_array(data: bytes) -> list[int]:
    _need(data, 4, 4, "bitmap count")
    (count,) = struct.unpack_from(">I", data, 4)
    if count > 0x7FFFFFFF or count > (len(data) - 8) // 12:  # a bitmap takes at least 12 bytes
        raise DeletionVectorError(f"{count} bitmaps cannot fit in {len(data)} bytes")
    pos = 8
    values: list[int] = []
    for key in range(count):
        _need(data, pos, 4, f"bitmap {key}: size")
        (size,) = struct.unpack_from(">I", data, pos)
        pos += 4
        _need(data, pos, size, f"bitmap {key}")
        low, end = _roaring32(data[: pos + size], pos, f"bitmap {key}")
        if end != pos + size:
            raise DeletionVectorError(f"bitmap {key}: {size} byte(s) announced, {end - pos} used")
        pos = end
        values.extend(low if key == 0 else ((key << 32) | v for v in low))
    if pos != len(data):
        raise DeletionVectorError(f"{len(data) - pos} byte(s) after the last bitmap")
    return values


def dv_file_path(path_or_inline: str) -> str:
    """The DV file of a storageType "u" descriptor, relative to the table
    root: <prefix>/deletion_vector_<uuid>.bin, the UUID being the Z85 of its
    last 20 characters."""
    if len(path_or_inline) < 20:
        raise DeletionVectorError(f"{path_or_inline!r} is shorter than a Z85-encoded UUID (20)")
    prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def dv_from_file(data: bytes, offset: int, size: int | None) -> bytes:
    """The serialized RoaringBitmapArray at `offset` of a DV file (format
    version byte 1 at its start; per DV a 4-byte size, the bytes and their
    CRC-32, big endian), its CRC checked."""
    if not data:
        raise DeletionVectorError("empty DV file")
    if data[0] != _DV_FILE_VERSION:
        raise DeletionVectorError(f"DV file format version {data[0]}, not {_DV_FILE_VERSION}")
    if offset < 1:
        raise DeletionVectorError(f"offset {offset} is inside the file header")
    _need(data, offset, 4, "DV size")
    (n,) = struct.unpack_from(">I", data, offset)
    if size is not None and n != size:
        raise DeletionVectorError(f"the file holds {n} byte(s) at offset {offset}, sizeInBytes says {size}")
    _need(data, offset + 4, n + 4, "DV data and checksum")
    body = data[offset + 4 : offset + 4 + n]
    (stored,) = struct.unpack_from(">I", data, offset + 4 + n)
    computed = zlib.crc32(body)
    if stored != computed:
        raise DeletionVectorError(
            f"CRC-32 mismatch at offset {offset}: stored {stored:#010x}, computed {computed:#010x}"
        )
    return body


def dv_bytes(dv: Any, read_rel: Any, read_path: Any) -> bytes:
    """The serialized RoaringBitmapArray a deletion-vector descriptor names:
    inline ("i", Z85 in the log), or in a file ("u": next to the table,
    read with read_rel; "p": an absolute path, read with read_path)."""
    if not isinstance(dv, dict):
        raise DeletionVectorError(f"deletionVector is a {type(dv).__name__}, not an object")
    storage, where = dv.get("storageType"), dv.get("pathOrInlineDv")
    size, offset = _int(dv.get("sizeInBytes")), _int(dv.get("offset"))
    if not isinstance(where, str):
        raise DeletionVectorError("no string pathOrInlineDv")
    if size is None or size < 0:
        raise DeletionVectorError(f"sizeInBytes {dv.get('sizeInBytes')!r} is not a size")
    if storage == "i":
        data = z85_decode(where)
        # Z85 carries multiples of 4 bytes: the encoding is padded past sizeInBytes.
        if not size <= len(data) < size + 4:
            raise DeletionVectorError(f"inline DV of {len(data)} bytes does not match sizeInBytes {size}")
        return data[:size]
    if storage == "u":
        data = read_rel(dv_file_path(where))
    elif storage == "p":
        data = read_path(where)
    else:
        raise DeletionVectorError(f"unknown storageType {storage!r}")
    if offset is None:
        raise DeletionVectorError(f"storageType {storage!r} with no offset")
    return dv_from_file(data, offset, size)


def dv_positions(dv: Any, read_rel: Any, read_path: Any) -> list[int]:
    """The row positions (ascending) a deletion-vector descriptor deletes;
    the descriptor's cardinality must be their number."""
    positions = decode_roaring_bitmap_array(dv_bytes(dv, read_rel, read_path))
    card = _int(dv.get("cardinality"))
    if card != len(positions):
        raise DeletionVectorError(f"decodes to {len(positions)} row(s), cardinality says {dv.get('cardinality')!r}")
    return positions


def _without_positions(table: pa.Table, positions: list[int]) -> pa.Table:
    """`table` without the rows at `positions` (ascending, all < num_rows)."""
    if not positions:
        return table
    keep = bytearray(b"\x01") * table.num_rows
    for p in positions:
        keep[p] = 0
    mask = pa.Array.from_buffers(pa.uint8(), table.num_rows, [None, pa.py_buffer(bytes(keep))])
    return table.filter(pc.not_equal(mask, 0))
