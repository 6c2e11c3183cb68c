"""Committed transactions as columns: the input of the dependency analysis
(checkers.txn_graph).

One entry per committed transaction, in commit order, and flat arrays of
what each one observed, installed, inserted and evaluated, sliced per
transaction by offsets (`ref_off[i]:ref_off[i + 1]` are transaction i's
row versions observed). Numbers instead of objects, so the analysis runs as
a few sorts and array passes whatever the history's length:

- a row key is a code into `keys`;
- a row version's writer is a transaction index, `INITIAL_CODE` for the
  version that existed before the history, or `foreign_code(n)` for a
  writer that did not commit (`foreign[n]` names it);
- a predicate bound and an inserted row's predicate attribute are ordinals
  (`Ordinals`): a class and a value, equal classes comparing as the
  original values do, and values of different classes never matching (a
  predicate on ints does not match a string key).

`TxnHistory` (checkers.txn_model) is the same history as objects; `encode`
turns one into the other, and the simulator writes columns directly.
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory, Write
from harness.core.isolation import SERIALIZABLE

INITIAL_CODE = -1
_I64 = (-(2**63), 2**63 - 1)


def foreign_code(n: int) -> int:
    return -2 - n


class Ordinals:
    """Values a predicate compares, as (class, value) int pairs that order as
    the values do. When every value is an int (of 64 bits), each is its own
    value in class 0; otherwise each value is ranked among the values of its
    class (numbers together, every other type on its own)."""

    def __init__(self, values: list[Any]) -> None:
        self._ranks: dict[Hashable, tuple[int, dict[Any, int], list[Any]]] = {}
        self.ints = all(type(v) is int and _I64[0] <= v <= _I64[1] for v in values)
        if self.ints:
            return
        by_cls: dict[Hashable, dict[Any, None]] = {}
        for v in values:
            by_cls.setdefault(self._cls(v), {})[v] = None
        for n, (cls, seen) in enumerate(by_cls.items()):
            ordered = list(seen)
            try:
                ordered.sort()
            except TypeError:  # values of one type that do not order: none matches a range
                ordered = []
            self._ranks[cls] = (n, {v: r for r, v in enumerate(ordered)}, ordered)

    @staticmethod
    def _cls(v: Any) -> Hashable:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return "number"
        return type(v).__qualname__

    def codes(self, values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        """(classes, values) of `values`; class -1 matches nothing."""
        if self.ints:
            return np.zeros(len(values), dtype=np.int64), np.array(values, dtype=np.int64)
        out = []
        for v in values:
            cls, ranks, _ = self._ranks.get(self._cls(v), (-1, {}, []))
            r = ranks.get(v)
            out.append((cls, r) if r is not None else (-1, 0))
        return np.array([c for c, _ in out], dtype=np.int64), np.array([r for _, r in out], dtype=np.int64)

    def value(self, cls: int, v: int) -> Any:
        if self.ints:
            return v
        for n, _, ordered in self._ranks.values():
            if n == cls:
                return ordered[v]
        return None


@dataclass
class TxnColumns:
    ids: Sequence[str]
    version: np.ndarray
    read_version: np.ndarray  # -1: unknown
    serializable: np.ndarray  # bool: committed at Serializable
    operation: Sequence[str]
    ref_off: np.ndarray  # row versions observed: reads, versions writes replaced, versions deleted
    ref_key: np.ndarray
    ref_writer: np.ndarray
    inst_off: np.ndarray  # rows it installed a version of (written or deleted), each once
    inst_key: np.ndarray
    ins_off: np.ndarray  # rows it inserted (a write replacing no version), in write order
    ins_key: np.ndarray
    ins_cls: np.ndarray
    ins_val: np.ndarray
    pred_off: np.ndarray  # key ranges it evaluated at its read version
    pred_cls: np.ndarray
    pred_lo: np.ndarray
    pred_hi: np.ndarray
    keys: Sequence[Any]  # row key by code
    ordinals: Ordinals
    foreign: list[str] = field(default_factory=list)
    twice: dict[str, int] = field(default_factory=dict)  # ids committed more than once: the last one
    failed: set[str] = field(default_factory=set)
    unknown: dict[str, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.version)

    def writer_id(self, w: int) -> str:
        return self.ids[w] if w >= 0 else INITIAL if w == INITIAL_CODE else self.foreign[-2 - w]

    def ref(self, key: int, writer: int) -> RowRef:
        return RowRef(self.keys[key], self.writer_id(writer))

    def predicate(self, p: int) -> Predicate:
        cls = int(self.pred_cls[p])
        return Predicate(self.ordinals.value(cls, int(self.pred_lo[p])), self.ordinals.value(cls, int(self.pred_hi[p])))

    def label(self, i: int) -> str:
        rv = int(self.read_version[i])
        op = f" {self.operation[i]}" if self.operation[i] else ""
        read = f", read version {rv}" if rv >= 0 else ""
        return f"txn {self.ids[i]}{op} (v{int(self.version[i])}{read})"


class SeqIds(Sequence[str]):
    """Transaction ids that are a prefix and a number (the simulator's), kept
    as the numbers: ten million of them take 80 MB, not a gigabyte of str."""

    def __init__(self, prefix: str, numbers: np.ndarray) -> None:
        self.prefix, self.numbers = prefix, numbers

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [f"{self.prefix}{n}" for n in self.numbers[i].tolist()]
        return f"{self.prefix}{int(self.numbers[i])}"


class _SeqIndex:
    """Transaction index by id, for ids that are small non-negative ints: an
    array, not a dict of millions of entries."""

    def __init__(self) -> None:
        self.pos = array("q")

    def get(self, tid: Any, default: int | None = None) -> int | None:
        if type(tid) is int and 0 <= tid < len(self.pos):
            i = self.pos[tid]
            if i >= 0:
                return i
        return default

    def __contains__(self, tid: Any) -> bool:
        return self.get(tid) is not None

    def __getitem__(self, tid: Any) -> int:
        i = self.get(tid)
        if i is None:
            raise KeyError(tid)
        return i

    def __setitem__(self, tid: int, i: int) -> None:
        if tid >= len(self.pos):
            self.pos.extend(array("q", [-1]) * (tid + 1 - len(self.pos) + 4096))
        self.pos[tid] = i


class ColumnsBuilder:
    """Appends committed transactions in commit order; `finish` gives the
    columns. Writers are resolved to transaction indexes as they come (a
    transaction committed later, or twice, is settled at the end)."""

    def __init__(self, key_range: int | None = None, seq_ids: str | None = None) -> None:
        """`key_range`: every row key is an int in [0, key_range), its own
        code. `seq_ids`: every id is a non-negative int, named with this
        prefix (`SeqIds`)."""
        self.seq_ids = seq_ids
        self.ids: list[Any] | array = array("q") if seq_ids is not None else []
        self.operation: list[str] = []
        self.index: dict[Any, int] | _SeqIndex = _SeqIndex() if seq_ids is not None else {}
        self.version, self.read_version = array("q"), array("q")
        self.serializable = array("b")
        self.ref_key, self.ref_writer, self.ref_off = array("q"), array("q"), array("q", [0])
        self.inst_key, self.inst_off = array("q"), array("q", [0])
        self.ins_key, self.ins_off = array("q"), array("q", [0])
        self.ins_attr: list[Any] = []
        self.pred_lo: list[Any] = []
        self.pred_hi: list[Any] = []
        self.pred_off = array("q", [0])
        self.key_range = key_range
        self.key_code: dict[Any, int] = {}
        self.keys: Sequence[Any] = range(key_range) if key_range is not None else []
        self._later: list[tuple[int, str]] = []  # (ref position, writer id) not yet committed
        self._twice: list[str] = []  # ids committed more than once: the last commit is theirs
        # What `add` appends to and looks up, in the order _columns.c names them.
        self._state = (
            self.index, self.ids, self.operation, self.version, self.read_version, self.serializable,
            self.ref_key, self.ref_writer, self.ref_off, self.inst_key, self.inst_off, self.ins_key, self.ins_off,
            self.ins_attr, self.pred_lo, self.pred_hi, self.pred_off, self.key_code, self.keys, self.key_range,
            self._later, self._twice, INITIAL, SERIALIZABLE,
        )  # fmt: skip

    def add(
        self,
        tid: Any,
        version: int,
        read_version: int | None,
        reads: Iterable[RowRef],
        writes: Iterable[Write],
        deletes: Iterable[RowRef],
        predicates: Iterable[Predicate],
        isolation: str,
        operation: str,
    ) -> None:
        append_txn(self._state, tid, version, read_version, reads, writes, deletes, predicates, isolation, operation)

    def read_write_count(self) -> int:
        """How many transactions so far observed a row version (read one,
        updated or deleted it) or evaluated a predicate: the read-write ones."""
        observed = np.diff(np.frombuffer(self.ref_off, dtype=np.int64)) > 0
        return int(np.count_nonzero(observed | (np.diff(np.frombuffer(self.pred_off, dtype=np.int64)) > 0)))

    def add_txn(self, t: Txn) -> None:
        self.add(t.id, t.version, t.read_version, t.reads, t.writes, t.deletes, t.predicates, t.isolation, t.operation)

    def _name(self, tid: Any) -> str:
        return f"{self.seq_ids}{tid}" if self.seq_ids is not None else tid

    def finish(self, failed: Iterable[Any] = (), unknown: dict[str, str] | None = None) -> TxnColumns:
        def arr(a: array) -> np.ndarray:
            return np.frombuffer(a, dtype=np.int64) if len(a) else np.zeros(0, dtype=np.int64)

        ids: Sequence[str] = (
            SeqIds(self.seq_ids, arr(self.ids))
            if self.seq_ids is not None and isinstance(self.ids, array)
            else self.ids
        )

        ref_writer = arr(self.ref_writer).copy()
        if self._twice:
            # A writer id names the last transaction committed under it.
            twice = set(self._twice)
            remap = np.arange(len(self.ids), dtype=np.int64)
            for i, tid in enumerate(self.ids):
                if tid in twice:
                    remap[i] = self.index[tid]
            mask = ref_writer >= 0
            ref_writer[mask] = remap[ref_writer[mask]]
        foreign: dict[str, int] = {}
        for pos, w in self._later:
            found = self.index.get(w)
            ref_writer[pos] = (
                found if found is not None else foreign_code(foreign.setdefault(self._name(w), len(foreign)))
            )
        ordinals = Ordinals(self.ins_attr + self.pred_lo + self.pred_hi)
        ins_cls, ins_val = ordinals.codes(self.ins_attr)
        lo_cls, pred_lo = ordinals.codes(self.pred_lo)
        hi_cls, pred_hi = ordinals.codes(self.pred_hi)
        # A range whose bounds are of different classes matches nothing.
        pred_cls = np.where(lo_cls == hi_cls, lo_cls, -1)
        return TxnColumns(
            ids=ids,
            version=arr(self.version),
            read_version=arr(self.read_version),
            serializable=np.frombuffer(self.serializable, dtype=np.int8).astype(bool)
            if len(self.serializable)
            else np.zeros(0, dtype=bool),
            operation=self.operation,
            ref_off=arr(self.ref_off),
            ref_key=arr(self.ref_key),
            ref_writer=ref_writer,
            inst_off=arr(self.inst_off),
            inst_key=arr(self.inst_key),
            ins_off=arr(self.ins_off),
            ins_key=arr(self.ins_key),
            ins_cls=ins_cls,
            ins_val=ins_val,
            pred_off=arr(self.pred_off),
            pred_cls=pred_cls,
            pred_lo=pred_lo,
            pred_hi=pred_hi,
            keys=self.keys,
            ordinals=ordinals,
            foreign=list(foreign),
            twice={self._name(tid): self.index[tid] for tid in self._twice},
            failed={self._name(t) for t in failed},
            unknown=dict(unknown or {}),
        )


def _add(
    state: tuple,
    tid: Any,
    version: int,
    read_version: int | None,
    reads: Iterable[RowRef],
    writes: Iterable[Write],
    deletes: Iterable[RowRef],
    predicates: Iterable[Predicate],
    isolation: str,
    operation: str,
) -> None:
    """ColumnsBuilder.add on the builder's state: the reference for the
    compiled `checkers._columns.add`, which a long log's replay uses."""
    (index, ids, operations, versions, read_versions, serializable, rk, rw, ref_off, inst_key, inst_off,
     ins_key, ins_off, ins_attr, pred_lo, pred_hi, pred_off, key_code, keys, key_range, later, twice,
     initial, serializable_name) = state  # fmt: skip

    def code(k: Any) -> Any:
        if key_range is not None:
            if type(k) is not int or not 0 <= k < key_range:
                raise ValueError(f"row key {k!r} is not an int in [0, {key_range})")
            return k
        c = key_code.get(k)
        if c is None:
            c = key_code[k] = len(keys)
            keys.append(k)
        return c

    if tid in index:
        twice.append(tid)
    index[tid] = len(ids)
    ids.append(tid)
    operations.append(operation)
    versions.append(version)
    read_versions.append(-1 if read_version is None else read_version)
    serializable.append(isolation == serializable_name)
    installed = []
    observed = [(r.key, r.writer) for r in reads]
    for wr in writes:
        k = wr.key
        c = code(k)
        installed.append(c)
        if wr.prev is not None:
            observed.append((k, wr.prev))
        else:
            ins_key.append(c)
            ins_attr.append(k if wr.attr is None else wr.attr)
    for d in deletes:
        k = d.key
        installed.append(code(k))
        observed.append((k, d.writer))
    for k, writer in observed:
        rk.append(code(k))
        w = index.get(writer)
        if w is None:
            w = INITIAL_CODE
            if writer != initial:  # committed later, or never: settled in `finish`
                later.append((len(rw), writer))
        rw.append(w)
    for p in predicates:
        pred_lo.append(p.lo)
        pred_hi.append(p.hi)
    ref_off.append(len(rk))
    inst_key.extend(dict.fromkeys(installed) if len(installed) > 1 else installed)
    inst_off.append(len(inst_key))
    ins_off.append(len(ins_key))
    pred_off.append(len(pred_lo))


_compiled: ModuleType | None
try:  # optional (pyproject.toml): without a C compiler `_add` serves
    import checkers._columns as _compiled
except ImportError:  # pragma: no cover
    _compiled = None

append_txn = _compiled.add if _compiled is not None else _add


def encode(h: TxnHistory) -> TxnColumns:
    """The columns of a history of objects (its transactions in commit order)."""
    b = ColumnsBuilder()
    for t in sorted(h.txns, key=lambda t: t.version):
        b.add_txn(t)
    return b.finish(h.failed, h.unknown)
