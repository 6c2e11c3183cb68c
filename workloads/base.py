"""The workload seam: what clients do, and how each op runs on an engine.

A workload has two halves that meet only through plain JSON ops:
- controller side: a deterministic per-slot op generator (`next_op`) and the
  final ops issued after quiescence;
- worker side: `invoke`, which runs one op with an engine client's
  primitives and returns its value (exceptions are classified by the worker).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from harness.core.table import TableSpec
from harness.engines.base import EngineClient, OpResult


@dataclass
class OpSpec:
    """An op about to be invoked: what the generator hands a worker."""

    f: str
    id: str
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        """The op as the worker receives it."""
        return {"f": self.f, "id": self.id, "value": self.value}


# How a read or write reaches the engine: SQL text or the DataFrame API.
VIAS = ("sql", "dataframe")


class SlotGenerator:
    """Per-slot RNG and sequence: a slot's op stream depends only on the seed."""

    def __init__(self, seed: int, slot: int | str):
        self.rng = random.Random(f"{seed}/{slot}")
        self.slot = slot
        self.seq = 0

    def pick(self, mix: tuple[tuple[str, float], ...]) -> str:
        """An op name from a cumulative mix, ((name, upper bound), ...), the
        last bound 1.0: one draw of this slot's stream."""
        r = self.rng.random()
        return next(name for name, upto in mix if r < upto)

    def next_id(self) -> str:
        """The next op id of this slot, `<slot>.<seq>`."""
        self.seq += 1
        return f"{self.slot}.{self.seq}"


class Workload(ABC):
    """What the clients of a run do: the table, each slot's ops, and how
    each op runs on an engine (see the module docstring)."""

    name: str
    # Names of the checkers (see checkers/__init__.py) that apply.
    checkers: tuple[str, ...]
    # Globs, relative to the table folder, of the other tables the workload
    # writes there (create-race's rounds); recorded in spec.json for `check`.
    related_tables: tuple[str, ...] = ()
    # The engine primitive each op needs (see EngineClient): an engine whose
    # capabilities lack it reports the op unsupported.
    primitives: dict[str, str] = {}
    # The column that identifies a row across its versions, and the column
    # predicates (e.g. a DELETE's range) are evaluated on.
    row_key: str = "k"
    predicate_column: str = "k"
    # Ops that delete data files the checkers still read (VACUUM): the run
    # then keeps a copy of each data file as it appears (the run folder's
    # kept/), and looks for new ones right before each such op.
    deletes_data_files: tuple[str, ...] = ()
    # Ops the kill-mid-op nemesis waits for and kills the engine in the
    # middle of (VACUUM, RESTORE, checkpoints, a streaming query): those a
    # crash must never corrupt; and how many seconds into one it strikes
    # (a range).
    kill_during: tuple[str, ...] = ()
    kill_after: tuple[float, float] = (0.0, 0.02)

    def __init__(self, seed: int, isolation: str | None = None):
        self.seed = seed
        self.isolation = isolation

    @abstractmethod
    def table(self) -> TableSpec:
        """The table the run creates: columns, partitioning, properties."""

    @abstractmethod
    def next_op(self, gen: SlotGenerator) -> OpSpec:
        """The next op of one client slot, drawn from `gen`'s own random stream."""

    def final_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        """After quiescence: one whole-table read per node (Jepsen's final read)."""
        return [OpSpec("read", gen.next_id(), {"via": "dataframe", "final": True})]

    def setup_ops(self, gen: SlotGenerator) -> list[OpSpec]:
        """Ops the harness runs (as process "setup") after creating the table,
        e.g. loading initial rows."""
        return []

    @staticmethod
    def read_op(gen: SlotGenerator, op_id: str) -> OpSpec:
        """A whole-table read, through SQL or the DataFrame API at random."""
        return OpSpec("read", op_id, {"via": gen.rng.choice(VIAS)})

    @staticmethod
    def read_ids(client: EngineClient, value: dict[str, Any]) -> OpResult:
        """A whole-table read of the row ids, as a read op's value records them."""
        res = client.read(["id"], value.get("via", "dataframe"))
        res.value = {**value, "ids": sorted(r[0] for r in res.value)}
        return res

    def primitive(self, f: str) -> str:
        """The engine primitive op `f` needs (an engine without it reports the op unsupported)."""
        return self.primitives.get(f, f)

    @abstractmethod
    def invoke(self, client: EngineClient, table: TableSpec, op: dict[str, Any]) -> OpResult:
        """Run one op (its JSON form) with the engine client's primitives; an
        exception is classified by the worker (fail or info)."""

    def properties(self) -> tuple[tuple[str, str], ...]:
        """Table properties: the isolation level the run was asked for, if any."""
        return (("delta.isolationLevel", self.isolation),) if self.isolation else ()
