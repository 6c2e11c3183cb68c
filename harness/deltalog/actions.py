"""A commit's actions: the JSON-lines parser, the checks that decide whether a
commit can be trusted, the :class:`Commit` view of its actions, and
:class:`LogProblem`, the record of anything wrong with the log itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from harness.core.fastjson import has_long_digits, orjson


@dataclass
class LogProblem:
    """Something wrong with the log itself, found while reading it."""

    # "gap" | "missing-commit" | "unparseable" | "unreadable" | "empty-log"
    # | "multiple-metadata" | "multiple-protocol" | "duplicate-file-action"
    # | "checkpoint-unreadable" | "checkpoint-mismatch" | "last-checkpoint"
    # | "data-file-missing" (the store has no such file: evidence of lost data)
    # | "data-file-unreadable" (read, but not decodable: no evidence either way)
    # | "deletion-vector-unreadable" (a DV that cannot
    # be read, decoded or does not fit its file: its add's rows are then
    # reported as none, as for an unreadable data file) | "partition-value"
    # | "duplicate-version" (from_commits only)
    # | "coordinator-state-missing" (staged commits of a coordinated table
    # that no kept coordinator state decides) | "in-commit-timestamp"
    kind: str
    version: int | None
    detail: str  # one line a human can read

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "version": self.version, "detail": self.detail}


def _int(x: Any) -> int | None:
    # bool is an int in Python; a boolean readVersion is garbage, not 1.
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _by_kind(actions: Any) -> tuple[tuple[str, ...], dict[str, list[dict]]] | None:
    """The kinds of `actions` in file order and each kind's contents, or
    None where `actions` is not a list of one-key objects."""
    if type(actions) is not list:
        return None
    by_kind: dict[str, list[dict]] = {}
    kinds = []
    for a in actions:
        if type(a) is not dict or len(a) != 1:
            return None
        for k, v in a.items():
            kinds.append(k)
            if k in by_kind:
                by_kind[k].append(v)
            else:
                by_kind[k] = [v]
    return tuple(kinds), by_kind


_NONE: list[dict] = []  # a commit's actions of a kind it has none of (never appended to)


class Commit:
    """One JSON commit: the actions of ``<version>.json`` in file order.

    Held as each kind's contents in file order plus the order of the kinds,
    not as the file's list of one-key objects: a long run holds a million
    commits, and the one-key wrappers and an index by kind cost 1.4 KB a
    commit of its 3.5 KB. `actions` gives the list back (a new one each
    time: a commit is not changed once read; assign a new list to change
    it). A list that is not all one-key objects is kept as it is, and the
    properties read it the plain way."""

    __slots__ = ("version", "_kinds", "_by_kind", "_raw")
    _kinds: tuple[str, ...]
    _by_kind: dict[str, list[dict]] | None  # None: not all one-key objects
    _raw: Any  # the list as given, where _by_kind is None

    def __init__(self, version: int, actions: list[dict] | None = None) -> None:
        self.version = version
        self.actions = [] if actions is None else actions

    @property
    def actions(self) -> list[dict]:
        if self._by_kind is None:
            return self._raw
        return [{k: v} for k, v in self.in_order()]

    @actions.setter
    def actions(self, actions: list[dict]) -> None:
        grouped = _by_kind(actions)
        if grouped is None:
            self._kinds, self._by_kind, self._raw = (), None, actions
        else:
            self._kinds, self._by_kind = grouped
            self._raw = None

    def __repr__(self) -> str:
        return f"Commit(version={self.version!r}, actions={self.actions!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commit):
            return NotImplemented
        return self.version == other.version and self.actions == other.actions

    __hash__ = None  # type: ignore[assignment]  # as the dataclass it was: mutable, unhashable

    def in_order(self) -> Iterator[tuple[str, Any]]:
        """(kind, content) of each action in file order, without building
        the one-key objects (each key of an action that has several)."""
        if self._by_kind is None:
            for a in self._raw:
                if isinstance(a, dict):
                    yield from a.items()
            return
        by_kind, at = self._by_kind, dict.fromkeys(self._by_kind, 0)
        for k in self._kinds:
            yield k, by_kind[k][at[k]]
            at[k] += 1

    def file_actions(self) -> tuple[tuple[str, ...], list[dict], list[dict]]:
        """(the kinds of the actions in file order, the adds' contents, the
        removes' contents): a replay walks the kinds and takes the next add
        or remove at each, with no generator. The commit's own lists: not
        to be changed."""
        by_kind = self._by_kind
        if by_kind is not None:
            return self._kinds, by_kind.get("add", _NONE), by_kind.get("remove", _NONE)
        pairs = list(self.in_order())
        return tuple(k for k, _ in pairs), [a for k, a in pairs if k == "add"], [a for k, a in pairs if k == "remove"]

    def has(self, kind: str) -> bool:
        """Whether the commit has a `kind` action (no list built)."""
        by_kind = self._by_kind
        return kind in by_kind if by_kind is not None else bool(self._inner(kind))

    def _inner(self, kind: str) -> list[dict]:
        """The `kind` actions' contents, in a list of the caller's own."""
        by_kind = self._by_kind
        if by_kind is None:
            return [x[kind] for x in self._raw if isinstance(x, dict) and kind in x]
        found = by_kind.get(kind)
        return list(found) if found else []

    def _one(self, kind: str, last: bool) -> dict | None:
        """The first (or last) `kind` action's content, without a list."""
        by_kind = self._by_kind
        found = by_kind.get(kind) if by_kind is not None else self._inner(kind)
        return (found[-1] if last else found[0]) if found else None

    @property
    def commit_info(self) -> dict | None:
        by_kind = self._by_kind
        if by_kind is None:
            return self._one("commitInfo", last=False)
        # Asked of every commit by several checkers: no call for the usual case.
        found = by_kind.get("commitInfo")
        return found[0] if found else None

    @property
    def adds(self) -> list[dict]:
        return self._inner("add")

    @property
    def removes(self) -> list[dict]:
        return self._inner("remove")

    @property
    def metadata(self) -> dict | None:
        # Several metaData in one commit is a protocol violation (recorded as
        # a problem); the last one is what a replaying reader ends up with.
        return self._one("metaData", last=True)

    @property
    def protocol(self) -> dict | None:
        return self._one("protocol", last=True)

    @property
    def txns(self) -> list[dict]:
        return self._inner("txn")

    def _info(self, key: str) -> Any:
        by_kind = self._by_kind
        found = by_kind.get("commitInfo") if by_kind is not None else self._inner("commitInfo")
        return found[0].get(key) if found and found[0] else None

    @property
    def timestamp(self) -> int | None:
        return _int(self._info("timestamp"))

    @property
    def operation(self) -> str | None:
        op = self._info("operation")
        return op if isinstance(op, str) else None

    @property
    def operation_parameters(self) -> dict:
        p = self._info("operationParameters")
        return p if isinstance(p, dict) else {}

    @property
    def read_version(self) -> int | None:
        return _int(self._info("readVersion"))

    @property
    def isolation_level(self) -> str | None:
        lvl = self._info("isolationLevel")
        return lvl if isinstance(lvl, str) else None

    @property
    def is_blind_append(self) -> bool | None:
        b = self._info("isBlindAppend")
        return b if isinstance(b, bool) else None


def _dv_id(action: dict) -> str | None:
    # Delta reconciles file actions on (path, deletion-vector id): a DV update
    # is remove(path, oldDV) + add(path, newDV) in one commit, in any order.
    dv = action.get("deletionVector")
    if not isinstance(dv, dict):
        return None
    off = dv.get("offset")
    return f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}" + (f"@{off}" if off is not None else "")


def _file_key(action: dict) -> tuple[str, str | None]:
    return (action["path"], _dv_id(action))


def _dv_key(action: dict) -> tuple[str, str]:
    # add_rows' cache key; a deletionVector that is no object gets one too.
    return (action["path"], _dv_id(action) or f"invalid:{action.get('deletionVector')!r}")


def _check_actions(version: int | None, actions: Any) -> tuple[str | None, list[LogProblem]]:
    """Validate one commit's actions.

    Returns (fatal error, problems): a fatal error means the commit cannot be
    trusted at all (half-applying a commit would invent a state no reader
    ever saw); problems are protocol violations worth reporting whose commit
    is still usable.
    """
    if not isinstance(actions, list):
        return f"actions are a {type(actions).__name__}, not a list", []
    problems: list[LogProblem] = []
    n_meta = n_proto = 0
    seen: dict[tuple[str, str | None], int] = {}
    for i, a in enumerate(actions):
        if not isinstance(a, dict) or len(a) != 1:
            return f"action {i} is not a one-key object: {str(a)[:120]}", []
        ((kind, inner),) = a.items()
        if not isinstance(inner, dict):
            return f"action {i} ({kind}) is not an object", []
        if kind in ("add", "remove"):
            path = inner.get("path")
            if not isinstance(path, str):
                return f"action {i} ({kind}) has no string path", []
            pv = inner.get("partitionValues")
            if pv is not None and not isinstance(pv, dict):
                return f"action {i} ({kind}) has non-object partitionValues", []
            # Most file actions have no deletion vector: keyed without a call.
            key = (path, None) if inner.get("deletionVector") is None else _file_key(inner)
            seen[key] = seen.get(key, 0) + 1
        elif kind == "metaData":
            n_meta += 1
        elif kind == "protocol":
            n_proto += 1
    if n_meta > 1:
        problems.append(LogProblem("multiple-metadata", version, f"{n_meta} metaData actions in one commit"))
    if n_proto > 1:
        problems.append(LogProblem("multiple-protocol", version, f"{n_proto} protocol actions in one commit"))
    dups = [k for k, n in seen.items() if n > 1]
    if dups:
        problems.append(
            LogProblem(
                "duplicate-file-action",
                version,
                f"{len(dups)} file(s) with more than one add/remove in one commit, e.g. {dups[0][0]}",
            )
        )
    return None, problems


_JSON_WS = json.decoder.WHITESPACE.match  # type: ignore[attr-defined]  # not in typeshed
_raw_decode = json.decoder.JSONDecoder().raw_decode
_BYTES_WS = " \t\n\r\x0b\x0c"  # what bytes.strip() strips


def parse_commit_bytes(data: bytes) -> list[dict]:
    """Parse newline-delimited JSON actions; raises ValueError when malformed.

    Splits on b"\\n" only: str.splitlines would also split on U+2028 etc.,
    which serde_json (delta-rs) writes unescaped inside strings.
    """
    return parse_commit_bytes_by(data)[0]


def parse_commit_bytes_by(data: bytes) -> tuple[list[dict], bool]:
    """parse_commit_bytes, and whether orjson parsed it (then the bytes hold
    no int orjson may misread: _parse_orjson need not look again)."""
    actions = _parse_orjson(data)
    if actions is not None:
        return actions, True
    actions = _parse_utf8_lines(data)
    return (actions if actions is not None else _parse_lines(data)), False


def _parse_orjson(data: bytes, digits_checked: bool = False) -> list[Any] | None:
    """orjson where it gives exactly what json.loads gives (4x faster on a
    long log), else None. It refuses whatever json reads otherwise or only
    with care (NaN, lone surrogates, a BOM, bytes not UTF-8: the other
    paths decide those), and an int of 19 digits or more is left to json.
    `digits_checked`: a worker process found no such int in these bytes."""
    if orjson is None or (not digits_checked and has_long_digits(data)):
        return None
    actions = []
    try:
        for line in data.split(b"\n"):
            if line.strip():
                actions.append(orjson.loads(line))
    except orjson.JSONDecodeError:
        return None
    return actions or None


def _parse_utf8_lines(data: bytes) -> list[dict] | None:
    """The fast path of parse_commit_bytes (a commit is parsed 100k times in
    a long run): decode once, then one raw_decode per line. It gives exactly
    what json.loads per line gives, or None (then the line-by-line path
    decides, with its error messages): json.loads(bytes) picks the encoding
    per line and treats a BOM or NUL bytes specially, so any of those, or
    anything that fails, goes the slow way."""
    if b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    if "\ufeff" in text:
        return None
    actions = []
    try:
        for line in text.split("\n"):
            if not line.strip(_BYTES_WS):
                continue
            obj, end = _raw_decode(line, _JSON_WS(line, 0).end())
            if _JSON_WS(line, end).end() != len(line):
                return None
            actions.append(obj)
    except (ValueError, RecursionError):
        return None
    return actions or None


def _parse_lines(data: bytes) -> list[dict]:
    actions = []
    for i, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        try:
            actions.append(json.loads(line))
        except (ValueError, RecursionError) as e:
            raise ValueError(f"line {i + 1}: {e}") from None
    if not actions:
        raise ValueError("empty commit file")
    return actions
