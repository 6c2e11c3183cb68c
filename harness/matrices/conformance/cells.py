"""Cells of the conformance matrix and what the spec expects of each.

A cell is one deterministic schedule: T1 and T2 read the same table version
v0; the *winner* commits v0+1; then the *loser* tries to commit. Both orders
of every pair are cells of their own. The expectation comes from the spec
alone (``EXPECTATIONS`` below), never from an engine: a departure is a
finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from harness.core.isolation import LEVELS as ISOLATION_LEVELS

SERIALIZABLE, WRITE_SERIALIZABLE = ISOLATION_LEVELS

# -- operation kinds ---------------------------------------------------------

INSERT = "insert"  # blind INSERT (spec C9)
INSERT_SELECT = "insert-select"  # INSERT ... SELECT from the same table (M-table: behaves like MERGE)
UPDATE = "update"
DELETE = "delete"  # DELETE WHERE <partition condition>
DELETE_ALL = "delete-all"  # DELETE with no predicate (C16's canonical long DELETE)
MERGE = "merge"  # MERGE with a literal partition predicate on the target (P2)
MERGE_NOLIT = "merge-nolit"  # MERGE joining on the partition column only (P2); partitioned layouts
OPTIMIZE = "optimize"
ZORDER = "optimize-zorder"
SET_PROPERTIES = "set-properties"  # ALTER TABLE SET TBLPROPERTIES
ADD_COLUMNS = "add-columns"
APP_TXN = "app-txn"  # blind INSERT carrying an application transaction id (txnAppId)
CREATE = "create"  # CREATE at an empty path

BLIND = frozenset({INSERT, APP_TXN})
DML = frozenset({INSERT_SELECT, UPDATE, DELETE, DELETE_ALL, MERGE, MERGE_NOLIT})
COMPACTION = frozenset({OPTIMIZE, ZORDER})
METADATA = frozenset({SET_PROPERTIES, ADD_COLUMNS})
# Ops that remove (rewrite) files they read: the loser side of E3.
REMOVES_FILES = DML - {INSERT_SELECT} | COMPACTION

DATA_OPS = (INSERT, INSERT_SELECT, UPDATE, DELETE, DELETE_ALL, MERGE, OPTIMIZE, ZORDER, SET_PROPERTIES, ADD_COLUMNS)
# The engine primitive (harness/engines/base.py) each op kind needs: an
# engine whose capabilities lack it reports the cell unsupported.
PRIMITIVES = {
    INSERT: "append",
    INSERT_SELECT: "insert_select",
    UPDATE: "update",
    DELETE: "delete",
    DELETE_ALL: "delete",
    MERGE: "merge",
    MERGE_NOLIT: "merge",
    OPTIMIZE: "optimize",
    ZORDER: "optimize",
    SET_PROPERTIES: "set-properties",
    ADD_COLUMNS: "add-columns",
    APP_TXN: "append-idempotent",
    CREATE: "create-table-at",
}
# Ops whose condition does not confine them to one partition (P1 cannot apply).
UNCONFINED = frozenset({MERGE_NOLIT, DELETE_ALL})

# -- layouts -----------------------------------------------------------------

UNPARTITIONED = "unpartitioned"
SAME_PARTITION = "partitioned-same"  # both ops' conditions name the same partition
DISJOINT = "partitioned-disjoint"  # each op's condition names its own partition (P1)
LAYOUTS = (UNPARTITIONED, SAME_PARTITION, DISJOINT)


class Outcome(str, Enum):
    MUST_COMMIT = "cannot conflict"
    MUST_CONFLICT = "must conflict"
    CAN_CONFLICT = "can conflict"


@dataclass(frozen=True)
class Cell:
    winner: str  # commits first (v0+1)
    loser: str  # read v0, commits second
    level: str  # delta.isolationLevel
    layout: str
    dv: bool = False  # delta.enableDeletionVectors

    @property
    def id(self) -> str:
        return f"{self.layout}{'+dv' if self.dv else ''}/{self.level}/{self.winner}>{self.loser}"

    @property
    def partitioned(self) -> bool:
        return self.layout != UNPARTITIONED

    def partitions(self) -> tuple[str, str]:
        """The partition each op's condition names: (winner's, loser's)."""
        return ("a", "b") if self.layout == DISJOINT else ("a", "a")

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "winner": self.winner,
            "loser": self.loser,
            "level": self.level,
            "layout": self.layout,
            "dv": self.dv,
        }

    @classmethod
    def from_json(cls, d: dict[str, object]) -> Cell:
        return cls(str(d["winner"]), str(d["loser"]), str(d["level"]), str(d["layout"]), bool(d.get("dv")))


@dataclass(frozen=True)
class Expectation:
    claim: str
    outcome: Outcome
    # Conflict classes the spec names for this cell; None: the class the
    # E-list gives for what the winner actually did (see verdict.allowed_classes).
    classes: frozenset[str] | None
    rule: str
    # Why the spec settles neither outcome for this cell (judged as "can
    # conflict" and listed as such in the report); "" where it settles one.
    ambiguous: str = ""


# -- the expectation table -----------------------------------------------------
# One row per claim, each with the exact domain the spec gives it: `pair`
# tests (winner, loser), `when` the rest of the cell. Every row that matches
# a cell speaks (no row shadows another): a "cannot conflict" or "must
# conflict" row settles the outcome over a "can conflict" one, which only
# says the spec allows either; rows that settle it both ways make the cell
# spec-ambiguous. Outcomes per level: (Serializable, WriteSerializable).


def _either(group: frozenset[str], other: frozenset[str]):
    return lambda w, loser: (w in group and loser in other) or (loser in group and w in other)


@dataclass(frozen=True)
class Rule:
    claim: str
    pair: object  # (winner, loser) -> bool
    outcome: tuple[Outcome, Outcome]  # (Serializable, WriteSerializable)
    classes: frozenset[str] | None
    text: str
    when: object = None  # Cell -> bool
    ambiguous: str = ""  # the rule itself says the spec settles neither outcome

    def matches(self, c: Cell) -> bool:
        return bool(self.pair(c.winner, c.loser)) and (self.when is None or self.when(c))

    def at(self, level: str) -> Outcome:
        return self.outcome[0] if level == SERIALIZABLE else self.outcome[1]


MC, MX, CC = Outcome.MUST_COMMIT, Outcome.MUST_CONFLICT, Outcome.CAN_CONFLICT
# The ops the M-table speaks of.
M_TABLE = BLIND | DML | COMPACTION


def _overlapping(c: Cell) -> bool:
    return c.layout != DISJOINT or DELETE_ALL in (c.winner, c.loser)


def _disjoint_with_literals(c: Cell) -> bool:
    return c.layout == DISJOINT and not UNCONFINED & {c.winner, c.loser}


def _dv_without_zorder(c: Cell) -> bool:
    return c.dv and ZORDER not in (c.winner, c.loser)


def _blind_pair(w: str, loser: str) -> bool:
    # Two writes under one txnAppId are not blind to each other: each reads
    # the id's last version from the log (E5 speaks of them, not M1).
    return w in BLIND and loser in BLIND and not w == loser == APP_TXN


EXPECTATIONS: tuple[Rule, ...] = (
    # C17: a metadata change makes every concurrent write fail; E4 names the class.
    Rule(
        "C17",
        lambda w, loser: w in METADATA,
        (MX, MX),
        frozenset({"E4"}),
        "a write (or metadata change) after a concurrent metadata change fails with E4",
    ),
    # C17 the other way round: the write committed first, the metadata change
    # second. C17 fails the concurrent *write*, and E4 is the class only for
    # a winner that changed metadata: the spec requires neither outcome here
    # (the class, if any, follows what the winner did).
    Rule(
        "C17",
        lambda w, loser: loser in METADATA and w not in METADATA,
        (CC, CC),
        None,
        "a metadata change after a concurrent write",
        ambiguous="C17 fails the write concurrent with a metadata change, and here the write committed first: "
        "the spec requires neither the metadata change's commit nor its conflict",
    ),
    # E6: several writers creating the same table at once: all but one fail.
    Rule(
        "E6",
        lambda w, loser: w == loser == CREATE,
        (MX, MX),
        frozenset({"E6"}),
        "two CREATEs at one empty path: the second fails with E6",
    ),
    # E5: two writers with the same application transaction id.
    Rule(
        "E5",
        lambda w, loser: w == loser == APP_TXN,
        (MX, MX),
        frozenset({"E5"}),
        "two writes with the same txnAppId: the second fails with E5",
    ),
    # M1: blind INSERT vs blind INSERT cannot conflict (C9: they read nothing).
    Rule("M1", _blind_pair, (MC, MC), None, "blind inserts cannot conflict"),
    # M4: OPTIMIZE vs INSERT cannot conflict (the matrix is symmetric in the pair).
    Rule("M4", _either(COMPACTION, BLIND), (MC, MC), None, "OPTIMIZE and a blind INSERT cannot conflict"),
    # P1: "can conflict" pairs touching disjoint partitions (conditions on the
    # partition column) cannot conflict. It speaks of M-table pairs only:
    # C17's metadata changes conflict with every concurrent write.
    Rule(
        "P1",
        lambda w, loser: w in M_TABLE and loser in M_TABLE,
        (MC, MC),
        None,
        "conditions on disjoint partitions: cannot conflict",
        when=_disjoint_with_literals,
    ),
    # C16: DELETE read v0, an INSERT into what it deletes committed first:
    # Serializable must fail it (E1); WriteSerializable commits it.
    Rule(
        "C16",
        lambda w, loser: w in BLIND and loser in (DELETE, DELETE_ALL),
        (MX, MC),
        frozenset({"E1"}),
        "DELETE after a concurrent INSERT into its range: Serializable fails it (E1), WriteSerializable commits",
        when=_overlapping,
    ),
    # M2: UPDATE/DELETE/MERGE vs INSERT: cannot conflict in WriteSerializable,
    # can conflict in Serializable (symmetric in the pair).
    Rule(
        "M2",
        _either(DML, BLIND),
        (CC, MC),
        None,
        "UPDATE/DELETE/MERGE and a blind INSERT: WriteSerializable cannot conflict, Serializable can",
    ),
    # P2: a MERGE joining on the partition columns only may scan every
    # partition: it can conflict with writes to other partitions. A "can":
    # where M2 says a blind INSERT cannot conflict (WriteSerializable), M2 settles it.
    Rule(
        "P2",
        lambda w, loser: MERGE_NOLIT in (w, loser) and w in M_TABLE and loser in M_TABLE,
        (CC, CC),
        None,
        "MERGE without literal partition predicates, other partition: can conflict",
        when=lambda c: c.layout == DISJOINT,
    ),
    # M3: UPDATE/DELETE/MERGE vs each other can conflict in both levels.
    Rule("M3", lambda w, loser: w in DML and loser in DML, (CC, CC), None, "UPDATE/DELETE/MERGE pairs can conflict"),
    # M5: OPTIMIZE vs UPDATE/DELETE/MERGE: with deletion vectors cannot
    # conflict unless ZORDER BY is used; otherwise can conflict.
    Rule(
        "M5",
        _either(COMPACTION, DML),
        (MC, MC),
        None,
        "OPTIMIZE and UPDATE/DELETE/MERGE with deletion vectors, no ZORDER: cannot conflict",
        when=_dv_without_zorder,
    ),
    Rule(
        "M5",
        _either(COMPACTION, DML),
        (CC, CC),
        None,
        "OPTIMIZE and UPDATE/DELETE/MERGE: can conflict",
        when=lambda c: not _dv_without_zorder(c),
    ),
    # M6: OPTIMIZE vs OPTIMIZE, as M5. With deletion vectors the loser cannot
    # conflict, yet both cannot rewrite the same files: it conforms by
    # completing as a no-op (verdict.NOOP), never by rewriting them again.
    Rule(
        "M6",
        lambda w, loser: w in COMPACTION and loser in COMPACTION,
        (MC, MC),
        None,
        "two OPTIMIZEs with deletion vectors, no ZORDER: cannot conflict (the loser may complete as a no-op)",
        when=_dv_without_zorder,
    ),
    Rule(
        "M6",
        lambda w, loser: w in COMPACTION and loser in COMPACTION,
        (CC, CC),
        None,
        "two OPTIMIZEs: can conflict",
        when=lambda c: not _dv_without_zorder(c),
    ),
)


def expectation(cell: Cell) -> Expectation:
    rules = [r for r in EXPECTATIONS if r.matches(cell)]
    if not rules:
        raise ValueError(f"no spec claim covers cell {cell.id}")
    settling = {o: [r for r in rules if r.at(cell.level) is o] for o in (MX, MC)}
    ambiguous = "; ".join(r.ambiguous for r in rules if r.ambiguous)
    if settling[MX] and settling[MC]:
        outcome, speaking = CC, settling[MX] + settling[MC]
        ambiguous = "; ".join(
            filter(None, [ambiguous, " vs ".join(f"{r.claim} says {r.at(cell.level).value}" for r in speaking)])
        )
    elif settling[MX] or settling[MC]:
        outcome = MX if settling[MX] else MC
        speaking = settling[outcome]
    else:
        outcome, speaking = CC, rules
    claims = list(dict.fromkeys(r.claim for r in speaking))
    yielded = [r for r in rules if r not in speaking]
    text = "; ".join(dict.fromkeys(r.text for r in speaking))
    if yielded and not ambiguous:
        text += "".join(f" ({r.claim}: {r.at(cell.level).value}, settled by {claims[0]})" for r in yielded)
    fixed = [r.classes for r in speaking if r.classes is not None]
    classes = frozenset().union(*fixed) if fixed else None
    return Expectation(claims[0], outcome, classes, text, ambiguous)


# -- enumeration ---------------------------------------------------------------


def _dv_relevant(w: str, loser: str) -> bool:
    """Deletion vectors change the expectation only for M5 / M6 pairs."""
    return (w in COMPACTION and (loser in DML or loser in COMPACTION)) or (loser in COMPACTION and w in DML)


def all_cells(levels: Iterable[str] = ISOLATION_LEVELS, row_level_concurrency: bool = False) -> list[Cell]:
    """Every cell of the matrix. R-table cells exist only for engines that
    declare row-level concurrency; no engine here does, so none are built."""
    if row_level_concurrency:
        raise NotImplementedError("R-table cells: no engine here declares row-level concurrency")
    cells: list[Cell] = []
    for level in levels:
        for layout in LAYOUTS:
            ops = DATA_OPS + ((MERGE_NOLIT,) if layout != UNPARTITIONED else ())
            for w in ops:
                for loser in ops:
                    cells.append(Cell(w, loser, level, layout))
            if layout == DISJOINT:
                continue  # P1 already makes M5/M6 cannot-conflict there
            cells += [Cell(w, loser, level, layout, dv=True) for w in ops for loser in ops if _dv_relevant(w, loser)]
        cells += [
            Cell(APP_TXN, APP_TXN, level, UNPARTITIONED),
            Cell(APP_TXN, INSERT, level, UNPARTITIONED),
            Cell(INSERT, APP_TXN, level, UNPARTITIONED),
            Cell(CREATE, CREATE, level, UNPARTITIONED),
        ]
    return cells
