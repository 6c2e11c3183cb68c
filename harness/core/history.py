"""The history: an append-only JSON Lines record of every op of a run.

This module is the contract between the runner (which writes histories) and
the checkers (which read them); it imports no engine.

One event per line::

    {"index": 17, "time": 1234567, "wall": 1795331333.75, "process": 3,
     "node": "n1", "type": "ok", "f": "append", "id": "3.17",
     "value": {...}, "version": null, "error": null}

- ``index``: position in the history, from 0.
- ``time``: monotonic nanoseconds since the run started (orders events).
- ``wall``: wall-clock seconds since the epoch (to line up with server logs).
- ``process``: the logical process; an int for client workers, a string for
  the harness itself ("setup", "nemesis").
- ``type``: ``invoke``, then one of ``ok`` (took effect), ``fail`` (definitely
  did not take effect) or ``info`` (indeterminate).
- ``id``: the op id, shared by an invoke and its completion; data written by
  the op carries it (the ``writer`` column), so every row traces to its op.
- ``version``: the table version the op committed or read, where known.
- ``error``: ``{"class": ..., "claim": ..., "raw": ...}`` on fail/info.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from harness.core import fastjson
from harness.core.table import TableDeclaration

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)
# How the runner's own time limit on an op begins its message (checkers.liveness).
NO_REPLY = "no reply within"
EVENT_TYPES = (INVOKE, *COMPLETIONS)


class ErrorClass(str, Enum):
    """How an engine's error is classified, after spec E1..E6."""

    CONCURRENT_APPEND = "ConcurrentAppendException"
    CONCURRENT_DELETE_READ = "ConcurrentDeleteReadException"
    CONCURRENT_DELETE_DELETE = "ConcurrentDeleteDeleteException"
    METADATA_CHANGED = "MetadataChangedException"
    CONCURRENT_TRANSACTION = "ConcurrentTransactionException"
    PROTOCOL_CHANGED = "ProtocolChangedException"
    # A commit failed because of a concurrent commit, but the engine does not
    # say which of E1..E6 it was (spec: a finding in its own right).
    UNCLASSIFIED_CONFLICT = "commit-conflict-unclassified"
    NOT_A_CONFLICT = "not-a-conflict"
    # The engine cannot run this op at all; definitely not applied.
    UNSUPPORTED = "unsupported"
    TIMEOUT = "timeout"
    CRASH = "crash"
    # A bug in the harness's own code hit while running the op (not the
    # engine's error): the op's outcome is unknown, and so is the run's.
    HARNESS_FAULT = "harness-fault"

    @property
    def claim(self) -> str | None:
        return _CLAIMS.get(self)

    @property
    def is_conflict(self) -> bool:
        return self in _CLAIMS or self is ErrorClass.UNCLASSIFIED_CONFLICT


_CLAIMS = {
    ErrorClass.CONCURRENT_APPEND: "E1",
    ErrorClass.CONCURRENT_DELETE_READ: "E2",
    ErrorClass.CONCURRENT_DELETE_DELETE: "E3",
    ErrorClass.METADATA_CHANGED: "E4",
    ErrorClass.CONCURRENT_TRANSACTION: "E5",
    ErrorClass.PROTOCOL_CHANGED: "E6",
}


def error_class_label(cls: str) -> str:
    """An error class with the spec claim it stands for: "X (E1)"."""
    try:
        claim = ErrorClass(cls).claim
    except ValueError:
        return cls
    return f"{cls} ({claim})" if claim else cls


@dataclass
class OpError:
    cls: ErrorClass
    raw: str

    def to_json(self) -> dict[str, Any]:
        return {"class": self.cls.value, "claim": self.cls.claim, "raw": self.raw}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OpError:
        try:
            klass = ErrorClass(d.get("class"))
        except ValueError:
            klass = ErrorClass.NOT_A_CONFLICT
        return cls(klass, str(d.get("raw", "")))


@dataclass(slots=True)  # a long run's history holds hundreds of thousands
class Event:
    index: int
    time: int
    process: int | str
    type: str
    f: str
    id: str
    value: Any = None
    version: int | None = None
    error: OpError | None = None
    node: str | None = None
    wall: float | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["error"] = self.error.to_json() if self.error else None
        return d

    @classmethod
    def from_json(cls, d: Any) -> Event:
        """The event a history line's JSON value records; ValueError where it
        is no object, lacks a required field or has no known type."""
        # One call an event, checks included: a long run loads millions.
        if not isinstance(d, dict):
            raise ValueError("not a JSON object")
        if not _REQUIRED_SET <= d.keys():
            missing = next(key for key in _REQUIRED if key not in d)
            raise ValueError(f"missing field {missing!r}")
        kind = d["type"]
        if kind not in EVENT_TYPES:
            raise ValueError(f"unknown event type {kind!r}")
        err, f, node = d.get("error"), d["f"], d.get("node")
        # Positional, in the fields' order (keywords cost a third of the
        # call); the few names that recur over the events, one copy each.
        return cls(
            int(d["index"]),
            int(d["time"]),
            d["process"],
            _TYPE_NAMES[kind],
            sys.intern(f) if type(f) is str else f,
            str(d["id"]),
            d.get("value"),
            d.get("version"),
            OpError.from_json(err) if isinstance(err, dict) else None,
            sys.intern(node) if type(node) is str else node,
            d.get("wall"),
        )


@dataclass(slots=True)
class Op:
    """An invocation paired with its completion (None while in flight)."""

    invoke: Event
    completion: Event | None

    @property
    def id(self) -> str:
        return self.invoke.id

    @property
    def f(self) -> str:
        return self.invoke.f

    @property
    def process(self) -> int | str:
        return self.invoke.process

    @property
    def type(self) -> str:
        """ok / fail / info; an op that never completed is indeterminate."""
        return self.completion.type if self.completion else INFO

    @property
    def value(self) -> Any:
        if self.completion is not None and self.completion.value is not None:
            return self.completion.value
        return self.invoke.value

    @property
    def version(self) -> int | None:
        return self.completion.version if self.completion else None

    @property
    def error(self) -> OpError | None:
        return self.completion.error if self.completion else None

    @property
    def start(self) -> int:
        return self.invoke.time

    @property
    def end(self) -> int | None:
        """Completion time; None if the op never completed (may still apply)."""
        return self.completion.time if self.completion else None


@dataclass
class History:
    """A run's history: every event of `history.jsonl`, in order."""

    events: list[Event]
    # Lines the loader could not parse: (line number, reason). A truncated
    # last line is expected after a crash; anything else means corruption.
    problems: list[tuple[int, str]] = field(default_factory=list)
    truncated: bool = False

    def ops(self) -> list[Op]:
        """Pair invocations with completions, in invocation order."""
        # Every checker and the report ask, a dozen times a check: paired
        # once, and again only when events were added or the list replaced.
        cached = self.__dict__.get("_ops_cache")
        if cached is not None and cached[0] is self.events and cached[1] == len(self.events):
            return list(cached[2])
        out = self._pair()
        self.__dict__["_ops_cache"] = (self.events, len(self.events), out)
        return list(out)

    def _pair(self) -> list[Op]:
        pending: dict[str, Op] = {}
        out: list[Op] = []
        for e in self.events:
            if e.type == INVOKE:
                op = Op(e, None)
                pending[e.id] = op
                out.append(op)
            elif e.type in COMPLETIONS:
                started = pending.pop(e.id, None)
                if started is not None:
                    started.completion = e
        return out

    def client_ops(self) -> list[Op]:
        """The clients' ops: not the setup's or the nemesis's."""
        return [op for op in self.ops() if isinstance(op.process, int)]

    def table_declaration(self) -> TableDeclaration:
        """The run's create-table op's record; empty when there is none."""
        for e in self.events:
            if e.type == INVOKE and e.f == "create-table" and isinstance(e.value, dict):
                return TableDeclaration.from_json(e.value)
        return TableDeclaration()

    def __len__(self) -> int:
        return len(self.events)


_REQUIRED = ("index", "time", "process", "type", "f", "id")
_REQUIRED_SET = frozenset(_REQUIRED)
_TYPE_NAMES = {t: t for t in EVENT_TYPES}


def parse_lines(lines: Iterable[str]) -> History:
    events: list[Event] = []
    problems: list[tuple[int, str]] = []
    lines = list(lines)
    short = not fastjson.has_long_digits("".join(lines))
    truncated = False
    for n, line in enumerate(lines, start=1):
        truncated |= _parse_line(line, n, n == len(lines), short, events, problems)
    return History(events, problems, truncated)


def _parse_line(
    line: str, n: int, last: bool, short: bool, events: list[Event], problems: list[tuple[int, str]]
) -> bool:
    """Appends the event line `n` records, or what is wrong with it; True
    where it is the last line, cut off."""
    if not line.strip():
        return False
    try:
        events.append(Event.from_json(fastjson.loads(line, short=short)))
    except (ValueError, TypeError, KeyError) as e:
        if last and not line.endswith("\n"):
            problems.append((n, "truncated last line"))
            return True
        problems.append((n, f"unparseable event: {e}"))
    return False


def load_history(path: str | os.PathLike[str]) -> History:
    """The history a history.jsonl holds: what parse_lines makes of its
    lines read as text (UTF-8, undecodable bytes replaced)."""
    if fastjson.orjson is None:
        return _load_as_text(path)
    # Each line's bytes to orjson, a block of lines at a time (a long run has
    # millions: no decoded copy of them, no line as a str, no copy of the
    # whole file); a line it or Event refuses, a blank one, and those of a
    # block with an int orjson may misread, read as text as parse_lines does.
    events: list[Event] = []
    problems: list[tuple[int, str]] = []
    truncated = False
    n = 0
    event, loads = Event.from_json, fastjson.orjson.loads
    rest = b""
    with open(path, "rb") as fh:
        while True:
            block = fh.read(_BLOCK)
            if b"\r" in block:
                return _load_as_text(path)  # text mode ends a line at a lone \r too
            if not block:
                if rest:  # the last line, with no newline after it
                    n += 1
                    text = rest.decode("utf-8", "replace")
                    truncated |= _parse_line(text, n, True, not fastjson.has_long_digits(rest), events, problems)
                return History(events, problems, truncated)
            data = rest + block
            end = data.rfind(b"\n")
            if end < 0:
                rest = data
                continue
            rest = data[end + 1 :]
            short = not fastjson.has_long_digits(data)
            for line in data[:end].split(b"\n"):
                n += 1
                if short:
                    try:
                        events.append(event(loads(line)))
                        continue
                    except Exception:  # noqa: BLE001, S112 - the line read again as text says what is wrong
                        pass
                truncated |= _parse_line(line.decode("utf-8", "replace") + "\n", n, False, short, events, problems)


_BLOCK = 1 << 22  # bytes of a history.jsonl read at a time


def _load_as_text(path: str | os.PathLike[str]) -> History:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_lines(fh.readlines())


class HistoryWriter:
    """Appends events and flushes each one, so a crash leaves a checkable prefix.

    Thread-safe: the runner's slot threads record concurrently; the lock also
    makes ``index`` and ``time`` agree with the order of lines in the file.
    """

    def __init__(self, path: str | os.PathLike[str], t0: int | None = None):
        self.path = Path(path)
        self._fh = open(self.path, "a", encoding="utf-8")
        self._lock = threading.Lock()
        self._index = 0
        self.t0 = time.monotonic_ns() if t0 is None else t0
        self.counts = {OK: 0, FAIL: 0, INFO: 0}

    def record(
        self,
        *,
        process: int | str,
        type: str,
        f: str,
        id: str,
        value: Any = None,
        version: int | None = None,
        error: OpError | None = None,
        node: str | None = None,
    ) -> Event:
        with self._lock:
            ev = Event(
                index=self._index,
                time=time.monotonic_ns() - self.t0,
                process=process,
                type=type,
                f=f,
                id=id,
                value=value,
                version=version,
                error=error,
                node=node,
                wall=time.time(),
            )
            self._index += 1
            self._fh.write(json.dumps(ev.to_json(), separators=(",", ":")) + "\n")
            self._fh.flush()
            if type in self.counts and isinstance(process, int):
                self.counts[type] += 1
            return ev

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def iter_completed(ops: Iterable[Op], type: str) -> Iterator[Op]:
    return (op for op in ops if op.type == type)
