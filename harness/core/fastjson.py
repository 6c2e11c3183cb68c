"""json.loads, by orjson wherever that gives exactly what json.loads gives
(several times faster on the hundreds of thousands of lines of a long run's
history and log), else by json itself."""

from __future__ import annotations

import json
from typing import Any

try:
    import orjson
except ImportError:  # the json module alone gives the same values, slower
    orjson = None  # type: ignore[assignment]

# An int of 19 digits or more may not fit 64 bits, and orjson then reads it
# as a float; json keeps it an int. Digits map to "0" and everything else to
# " ", so a run of 19 is one substring search (a regular expression for it
# cost as much as the parse).
_DIGIT_MAP = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_RUN = b"0" * 19
# A long history is mapped in pieces of this many bytes (each overlapping the
# next by a run less one digit): a mapped copy of all of it would be
# hundreds of MB of fresh pages.
_PIECE = 1 << 22


def has_long_digits(text: str | bytes) -> bool:
    """Whether `text` holds 19 digits in a row (an int orjson may misread)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if len(data) <= _PIECE:
        return _RUN in data.translate(_DIGIT_MAP)
    return any(_RUN in data[i : i + _PIECE + len(_RUN) - 1].translate(_DIGIT_MAP) for i in range(0, len(data), _PIECE))


def loads(text: str | bytes, *, short: bool = False) -> Any:
    """What json.loads(text) returns or raises. orjson refuses whatever json
    reads otherwise or only with care (NaN, an overflowing float, lone
    surrogates, a BOM): json decides those. `short`: the caller knows the
    text has no 19 digits in a row (has_long_digits of all of it)."""
    if orjson is not None and (short or not has_long_digits(text)):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)
