"""An in-memory model of concurrent Delta commits, for testing the
transaction analysis (``checkers.txn_graph``) without an engine.

What it models (spec C8, C9, C12-C16, M1-M3, E1-E2):

* The table is a map key -> live row version (:class:`RowRef`). Version 0 is
  the table as created: a fraction of the key space is live, written by
  :data:`INITIAL`. Every committed transaction is the next version.
* Optimistic concurrency (C8). A transaction reads the table at
  ``read_version`` = the latest version when it starts (C12: one snapshot),
  computes its writes from that snapshot, and at commit is validated against
  every commit in ``(read_version, now]``. On a conflict it fails (its id goes
  to ``TxnHistory.failed``), otherwise it commits as version ``now + 1``.
* Conflicts are file-level with one row per file, i.e. the M-table of a table
  partitioned by the key, predicates being partition predicates:
    - E2 (ConcurrentDeleteRead / DeleteDelete): a concurrent commit replaced or
      deleted a row version this transaction read or deletes.
    - E1 (ConcurrentAppend): a concurrent commit inserted a key matching one of
      this transaction's predicates. Under WriteSerializable a concurrent
      *blind* insert does not conflict (M2), which is what allows C16's
      reordering; under Serializable it does.
    - the E1 caveat ("blind appends can still conflict when several concurrent
      DELETE/UPDATE/MERGE operations could reference the values they
      inserted"): with ``ws_append_caveat`` (the default) a concurrent blind
      insert does conflict under WriteSerializable once another concurrent
      commit has read, replaced or deleted a row it inserted. Without it the
      model follows the bare M2 rule of open-source Delta's ConflictChecker,
      which admits a non-serializable G2 cycle (the schedule is
      ``tests/test_simulate.py::bare_m2_g2_schedule``). With it, every
      history this model produces is acyclic over ww/wr/rw edges; the only
      edges that go against the commit order are predicate anti-dependencies
      from a WriteSerializable reader to a blind insert (C16 reorderings).
  Blind inserts read nothing and never conflict (C9, M1).
* Operations (weights configurable):
    ``insert``         blind INSERT of 1-3 new keys (Delta op ``WRITE``);
    ``update``         UPDATE of 1-3 live keys: reads them, replaces them;
    ``delete``         DELETE WHERE key in [lo, hi]: predicate, reads the rows
                       it matches, deletes them;
    ``insert_select``  INSERT ... SELECT / MERGE-like: predicate [lo, hi],
                       reads its rows, inserts one new key inside it;
    ``transfer``       bank-like read-modify-write of two live keys.
  An op that cannot run on the current table (no live keys, no free key in a
  range) falls back to another one; fallbacks are counted in the stats.
  Keys inserted are never live nor reserved by an in-flight insert, so a key
  has at most one live version (nothing in Delta enforces keys, C3; the model
  keeps rows unique so every row version is named by (key, writer)).

Cost: commit validation looks only at the commits in ``(read_version, now]``,
whose number is about the concurrency; per committed transaction the model
keeps one :class:`Txn`. Failed transactions keep only their id.

Anomaly injection (:mod:`harness.bench.inject`) splices a few hand-made transactions that
realise one named anomaly into a history, on keys no other transaction
touches, so nothing else is changed by accident.
"""

from __future__ import annotations

import gc
import random
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from checkers.txn_columns import ColumnsBuilder, TxnColumns
from checkers.txn_model import INITIAL, Predicate, RowRef, Txn, TxnHistory, Write
from harness.core.isolation import LEVELS, WRITE_SERIALIZABLE

OPS = ("insert", "update", "delete", "insert_select", "transfer")
DEFAULT_WEIGHTS: dict[str, float] = {"insert": 2, "update": 3, "delete": 2, "insert_select": 2, "transfer": 2}
# The Delta operation name each op commits with (commitInfo.operation).
OPERATION = {"insert": "WRITE", "update": "UPDATE", "delete": "DELETE", "insert_select": "MERGE", "transfer": "MERGE"}

# Conflict reasons, as the exception a Delta writer raises (spec E-list).
E1 = "E1"  # ConcurrentAppendException: a concurrent insert matches a predicate
E1_CAVEAT = "E1-ws-caveat"  # a referenced concurrent blind append (WriteSerializable)
E2 = "E2"  # ConcurrentDeleteRead/DeleteDelete: a version read or deleted was replaced

Isolation = str | Mapping[str, float] | Callable[[int], str]


@dataclass
class SimConfig:
    n_txns: int = 1000  # transactions attempted (committed + failed)
    concurrency: int = 4  # at most this many in flight
    n_keys: int = 64  # keys are ints in [0, n_keys)
    initial_fill: float = 0.5  # fraction of keys live (writer INITIAL) at version 0
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # The table's level at each commit: a level, {level: weight} drawn per
    # commit, or a function of the version being committed.
    isolation: Isolation = WRITE_SERIALIZABLE
    ws_append_caveat: bool = True
    max_range: int = 8  # widest predicate [lo, hi] (number of keys)
    max_keys_per_op: int = 3  # insert / update size
    start_bias: float = 0.5  # P(start a txn rather than commit one) while below concurrency
    seed: int = 0
    id_prefix: str = "t"


@dataclass
class SimStats:
    attempted: int = 0
    committed: int = 0
    failed: int = 0
    committed_by_op: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    failed_by_op: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    conflicts: dict[str, int] = field(default_factory=lambda: {E1: 0, E1_CAVEAT: 0, E2: 0})
    # Concurrent blind inserts matching a predicate that WriteSerializable let
    # through (each one a C16-style reordering).
    ws_blind_skips: int = 0
    fallbacks: int = 0
    max_window: int = 0  # most commits any validation had to look at


@dataclass
class SimResult:
    history: TxnHistory
    stats: SimStats
    initial_keys: tuple[int, ...] = ()  # keys live at version 0 (writer INITIAL)


class Pending:
    """A transaction between its start (snapshot) and its commit attempt."""

    __slots__ = ("id", "op", "rv", "reads", "read_keys", "writes", "deletes", "predicates", "bounds", "new_keys")

    def __init__(
        self, id, op, rv, reads=(), read_keys=None, writes=(), deletes=(), predicates=(), bounds=(), new_keys=()
    ):
        self.id = id
        self.op = op
        self.rv = rv
        self.reads = reads
        self.read_keys = read_keys  # frozenset of keys read or deleted, or None
        self.writes = writes
        self.deletes = deletes
        self.predicates = predicates
        self.bounds = bounds  # ((lo, hi), ...) of the predicates
        self.new_keys = new_keys  # keys it inserts (reserved until it ends)


class _Commit:
    """What validation needs to know about one committed version."""

    __slots__ = ("writer", "touched", "inserted", "blind", "referenced")

    def __init__(self, writer, touched, inserted, blind):
        self.writer = writer
        self.touched = touched  # frozenset of keys whose version it replaced or deleted, or None
        self.inserted = inserted  # tuple of keys it inserted, or None
        self.blind = blind
        self.referenced = False  # a later commit read/replaced/deleted a row it inserted


class _KeyPool:
    """A set of ints with O(1) add, remove and uniform random choice."""

    __slots__ = ("items", "pos")

    def __init__(self, keys=()):
        self.items: list[int] = list(keys)
        self.pos: dict[int, int] = {k: i for i, k in enumerate(self.items)}

    def __len__(self):
        return len(self.items)

    def __contains__(self, k):
        return k in self.pos

    def add(self, k):
        self.pos[k] = len(self.items)
        self.items.append(k)

    def remove(self, k):
        i = self.pos.pop(k)
        last = self.items.pop()
        if last != k:
            self.items[i] = last
            self.pos[last] = i


class DeltaSim:
    """The table, its commit log window and the conflict rule.

    Drive it with :meth:`begin_*` (take a snapshot, compute the writes) and
    :meth:`commit` (validate and commit, or fail). :func:`simulate` drives it
    randomly; tests script exact schedules with it.
    """

    def __init__(
        self,
        n_keys: int = 64,
        initial_keys=None,
        *,
        isolation: Isolation = WRITE_SERIALIZABLE,
        ws_append_caveat: bool = True,
        rng: random.Random | None = None,
        id_prefix: str = "t",
        initial_fill: float = 0.5,
        stats: SimStats | None = None,
    ):
        self.rng = rng or random.Random(0)
        self.n_keys = n_keys
        self.keys = list(range(n_keys))  # shared int objects
        if initial_keys is None:
            initial_keys = [k for k in self.keys if self.rng.random() < initial_fill]
        self.table: dict[int, RowRef] = {k: RowRef(k, INITIAL) for k in initial_keys}
        self.initial_keys = tuple(sorted(self.table))
        self.live = _KeyPool(sorted(self.table))
        self.free = _KeyPool(k for k in self.keys if k not in self.table)  # neither live nor reserved
        self.version = 0
        self.ws_append_caveat = ws_append_caveat
        self.id_prefix = id_prefix
        self.seq = 0
        self.stats = stats or SimStats()
        self.failed: set[str] = set()
        # Commits of versions base, base+1, ..., version (a window, pruned).
        self._recs: list[_Commit] = []
        self._base = 1
        self._blind: dict[str, _Commit] = {}  # writer id -> its record, for blind inserts in the window
        self._inflight_rv: dict[str, int] = {}
        # Where committed transactions go as columns instead of Txn objects
        # (`run_columns`): commit then returns None for them too.
        self.sink: ColumnsBuilder | None = None
        self._set_isolation(isolation)

    # -- isolation ----------------------------------------------------------
    def _set_isolation(self, isolation: Isolation) -> None:
        if isinstance(isolation, str):
            if isolation not in LEVELS:
                raise ValueError(f"unknown isolation level {isolation!r}; one of {LEVELS}")
            level = isolation
            self._level = lambda v: level
        elif callable(isolation):
            self._level = isolation
        else:
            levels = list(isolation)
            cum, total = [], 0.0
            for lv in levels:
                total += float(isolation[lv])
                cum.append(total)
            rnd = self.rng.random

            last = len(levels) - 1

            def pick(v, levels=levels, cum=cum, total=total):
                return levels[min(bisect_right(cum, rnd() * total), last)]

            self._level = pick

    # -- starting transactions ------------------------------------------------
    def _new_id(self) -> str:
        self.seq += 1
        # Writing columns, an id is its number (checkers.txn_columns.SeqIds).
        return self.seq if self.sink is not None else f"{self.id_prefix}{self.seq}"  # type: ignore[return-value]

    def _start(self, p: Pending) -> Pending:
        self._inflight_rv[p.id] = p.rv
        self.stats.attempted += 1
        return p

    def _rows_in(self, lo: int, hi: int) -> tuple[RowRef, ...]:
        get = self.table.get
        return tuple(r for r in map(get, range(lo, hi + 1)) if r is not None)

    def begin_insert(self, keys) -> Pending:
        """Blind INSERT of new keys (C9): reads nothing. `keys` must be free."""
        tid = self._new_id()
        for k in keys:
            self.free.remove(k)
        writes = tuple(Write(k, None) for k in keys)
        return self._start(Pending(tid, "insert", self.version, writes=writes, new_keys=tuple(keys)))

    def begin_update(self, keys, op: str = "update") -> Pending:
        """UPDATE (or transfer) of live keys: reads each, replaces each."""
        tid = self._new_id()
        table = self.table
        reads = tuple(table[k] for k in keys)
        writes = tuple(Write(r.key, r.writer) for r in reads)
        return self._start(Pending(tid, op, self.version, reads=reads, read_keys=frozenset(keys), writes=writes))

    def begin_delete(self, lo: int, hi: int) -> Pending:
        """DELETE WHERE key in [lo, hi]: reads the rows it matches, deletes them."""
        tid = self._new_id()
        rows = self._rows_in(lo, hi)
        return self._start(
            Pending(
                tid,
                "delete",
                self.version,
                reads=rows,
                read_keys=frozenset(r.key for r in rows),
                deletes=rows,
                predicates=(Predicate(self.keys[lo], self.keys[hi]),),
                bounds=((lo, hi),),
            )
        )

    def begin_insert_select(self, lo: int, hi: int, key: int) -> Pending:
        """INSERT ... SELECT / MERGE-like: reads rows in [lo, hi], inserts `key` (free, in range)."""
        tid = self._new_id()
        rows = self._rows_in(lo, hi)
        self.free.remove(key)
        return self._start(
            Pending(
                tid,
                "insert_select",
                self.version,
                reads=rows,
                read_keys=frozenset(r.key for r in rows),
                writes=(Write(key, None),),
                predicates=(Predicate(self.keys[lo], self.keys[hi]),),
                bounds=((lo, hi),),
                new_keys=(key,),
            )
        )

    # -- random choices ---------------------------------------------------------
    # (int(random() * n) rather than randrange: this is the hot path.)
    def _range(self, max_range: int) -> tuple[int, int]:
        rnd = self.rng.random
        w = 1 + int(rnd() * min(max_range, self.n_keys))
        lo = int(rnd() * (self.n_keys - w + 1))
        return lo, lo + w - 1

    def _pick(self, items: list[int], n: int) -> list[int]:
        """n distinct elements of items (len(items) >= n)."""
        rnd = self.rng.random
        m = len(items)
        if n == 1:
            return [items[int(rnd() * m)]]
        out: list[int] = []
        while len(out) < n:
            k = items[int(rnd() * m)]
            if k not in out:
                out.append(k)
        return out

    def begin_random(self, op: str, max_range: int = 8, max_keys: int = 3) -> Pending | None:
        """Start a random transaction of kind `op` on the current table,
        falling back to another kind when `op` cannot run; None when no
        kind can (every key reserved by an in-flight insert)."""
        rnd = self.rng.random
        for _attempt in range(5):
            if op == "insert":
                n = min(1 + int(rnd() * max_keys), len(self.free))
                if n:
                    return self.begin_insert(self._pick(self.free.items, n))
                op = "update"
            elif op == "update":
                n = min(1 + int(rnd() * max_keys), len(self.live))
                if n:
                    return self.begin_update(self._pick(self.live.items, n))
                op = "insert"
            elif op == "transfer":
                if len(self.live) >= 2:
                    return self.begin_update(self._pick(self.live.items, 2), "transfer")
                op = "update"
            elif op == "delete":
                for _ in range(3):
                    lo, hi = self._range(max_range)
                    if any(k in self.table for k in range(lo, hi + 1)):
                        return self.begin_delete(lo, hi)
                op = "update"
            elif op == "insert_select":
                for _ in range(3):
                    lo, hi = self._range(max_range)
                    free = [k for k in range(lo, hi + 1) if k in self.free]
                    if free:
                        return self.begin_insert_select(lo, hi, free[int(rnd() * len(free))])
                op = "insert"
            else:
                raise ValueError(f"unknown op {op!r}")
            self.stats.fallbacks += 1
        return None

    # -- commit -------------------------------------------------------------------
    def _end(self, p: Pending) -> None:
        del self._inflight_rv[p.id]
        for k in p.new_keys:
            if k not in self.table:
                self.free.add(k)

    def conflict(self, p: Pending, level: str) -> str | None:
        """The reason `p` may not commit now at `level` (None: it may)."""
        if p.read_keys is None and not p.bounds:
            return None  # a blind insert (C9, M1)
        now = self.version
        if now - p.rv > self.stats.max_window:
            self.stats.max_window = now - p.rv
        recs, off = self._recs, self._base
        read_keys, bounds = p.read_keys, p.bounds
        ws = level == WRITE_SERIALIZABLE
        for v in range(p.rv + 1, now + 1):
            c = recs[v - off]
            if c.touched is not None and read_keys and not read_keys.isdisjoint(c.touched):
                return E2
            if bounds and c.inserted is not None:
                skip = False
                if c.blind and ws:
                    if not (self.ws_append_caveat and c.referenced):
                        skip = True
                for k in c.inserted:
                    for lo, hi in bounds:
                        if lo <= k <= hi:
                            if skip:
                                self.stats.ws_blind_skips += 1
                                break
                            return E1_CAVEAT if (c.blind and ws) else E1
        return None

    def commit(self, p: Pending, isolation: str | None = None) -> Txn | None:
        """Validate `p` against the commits since its snapshot; commit it as
        the next version (returns its Txn) or fail it (returns None)."""
        version = self.version + 1
        level = isolation or self._level(version)
        stats = self.stats
        reason = self.conflict(p, level)
        if reason is not None:
            self._end(p)
            self.failed.add(p.id)
            stats.failed += 1
            stats.failed_by_op[p.op] += 1
            stats.conflicts[reason] += 1
            return None
        tid = p.id
        del self._inflight_rv[tid]
        table = self.table
        touched = None
        inserted = None
        for w in p.writes:
            k = w.key
            if w.prev is None:
                self.live.add(k)
                if inserted is None:
                    inserted = [k]
                else:
                    inserted.append(k)
            else:
                if touched is None:
                    touched = [k]
                else:
                    touched.append(k)
            table[k] = RowRef(k, tid)
        if p.deletes:
            for r in p.deletes:
                k = r.key
                del table[k]
                self.live.remove(k)
                self.free.add(k)
                if touched is None:
                    touched = [k]
                else:
                    touched.append(k)
        blind = p.read_keys is None and not p.bounds
        rec = _Commit(
            tid,
            frozenset(touched) if touched is not None else None,
            tuple(inserted) if inserted is not None else None,
            blind,
        )
        if p.reads:
            bl = self._blind
            if bl:
                for r in p.reads:
                    c = bl.get(r.writer)
                    if c is not None:
                        c.referenced = True
        if blind:
            self._blind[tid] = rec
        self._recs.append(rec)
        self.version = version
        if len(self._recs) > 256 and len(self._recs) & 255 == 0:
            self._prune()
        stats.committed += 1
        stats.committed_by_op[p.op] += 1
        if self.sink is not None:
            self.sink.add(tid, version, p.rv, p.reads, p.writes, p.deletes, p.predicates, level, OPERATION[p.op])
            return None
        return Txn(tid, version, p.rv, p.reads, p.writes, p.deletes, p.predicates, level, OPERATION[p.op])

    def _prune(self) -> None:
        """Forget commits no in-flight transaction can still conflict with."""
        floor = min(self._inflight_rv.values(), default=self.version) + 1  # oldest version still checked
        drop = floor - self._base
        if drop <= 0:
            return
        for c in self._recs[:drop]:
            if c.blind:
                self._blind.pop(c.writer, None)
        del self._recs[:drop]
        self._base = floor


def make_sim(config: SimConfig) -> DeltaSim:
    return DeltaSim(
        config.n_keys,
        isolation=config.isolation,
        ws_append_caveat=config.ws_append_caveat,
        rng=random.Random(config.seed),
        id_prefix=config.id_prefix,
        initial_fill=config.initial_fill,
    )


def iter_simulation(config: SimConfig, sim: DeltaSim | None = None) -> Iterator[Txn]:
    """Run the random schedule of `config`; yield committed Txns in commit
    order, without keeping them (for very long histories).

    Pass `sim` (from :func:`make_sim`) to read ``sim.stats`` and
    ``sim.failed`` afterwards; all randomness comes from ``sim.rng``."""
    if sim is None:
        sim = make_sim(config)
    rng = sim.rng
    cum, ops, total = [], [], 0.0
    for op in OPS:
        w = float(config.weights.get(op, 0))
        if w > 0:
            total += w
            cum.append(total)
            ops.append(op)
    if not ops:
        raise ValueError("all op weights are zero")
    last = len(ops) - 1
    unknown = set(config.weights) - set(OPS)
    if unknown:
        raise ValueError(f"unknown ops in weights: {sorted(unknown)}")
    rnd = rng.random
    begin, commit = sim.begin_random, sim.commit
    max_range, max_keys = max(1, config.max_range), max(1, config.max_keys_per_op)
    concurrency, bias = max(1, config.concurrency), config.start_bias
    inflight: list[Pending] = []
    started = 0
    n = config.n_txns
    while started < n or inflight:
        k = len(inflight)
        if started < n and (k == 0 or (k < concurrency and rnd() < bias)):
            p = begin(ops[min(bisect_right(cum, rnd() * total), last)], max_range, max_keys)
            if p is not None:
                inflight.append(p)
                started += 1
                continue
            if not k:
                raise RuntimeError("no transaction can start on an empty key space")
        i = int(rnd() * k)
        p = inflight[i]
        inflight[i] = inflight[-1]
        inflight.pop()
        t = commit(p)
        if t is not None:
            yield t


def run(config: SimConfig | None = None, **overrides) -> SimResult:
    """Simulate and collect: the TxnHistory (committed txns in commit order,
    failed ids) and the stats. Deterministic per ``seed``."""
    config = replace(config or SimConfig(), **overrides)
    sim = make_sim(config)
    # Nothing built here is cyclic; the cyclic GC would only rescan the
    # growing history (1M txns: 16 s with it, well under half without).
    enabled = gc.isenabled()
    gc.disable()
    try:
        txns = list(iter_simulation(config, sim))
    finally:
        if enabled:
            gc.enable()
    return SimResult(TxnHistory(txns, failed=sim.failed), sim.stats, sim.initial_keys)


def run_columns(config: SimConfig | None = None, **overrides) -> tuple[TxnColumns, SimStats]:
    """As :func:`run`, the history as columns (checkers.txn_columns), built
    as the transactions commit: no Txn object is kept, so very long
    histories fit in memory."""
    config = replace(config or SimConfig(), **overrides)
    sim = make_sim(config)
    sim.sink = ColumnsBuilder(key_range=config.n_keys, seq_ids=config.id_prefix)
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in iter_simulation(config, sim):
            pass
        return sim.sink.finish(sim.failed), sim.stats
    finally:
        if enabled:
            gc.enable()


def simulate(config: SimConfig | None = None, **overrides) -> TxnHistory:
    """The TxnHistory of one random correct execution (see :func:`run`)."""
    return run(config, **overrides).history
