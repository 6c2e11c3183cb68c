"""The conformance matrix (harness/conformance): the expectation table and the
verdict logic on synthetic observations (engine-free), then real delta-rs
cells: determinism over 5 repeats, the known deviations reported, and
`delta-jepsen conformance` end to end."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pytest

from harness.cli.reference import DATA_DIR, stored_conformance, stored_verdicts
from harness.core.errors import HarnessError
from harness.core.history import ErrorClass
from harness.matrices.conformance import cells as C
from harness.matrices.conformance.matrix import (
    CellResult,
    check_data,
    observe_read_versions,
    render_markdown,
    run_cells,
    select,
)
from harness.matrices.conformance.rows import apply, initial_rows, plans, serial_outcomes
from harness.matrices.conformance.verdict import (
    AVAILABILITY,
    COMMITTED,
    CONFORMS,
    ERROR,
    EXCEPTION_CLASS,
    FAILED,
    NOOP,
    RETRIED,
    SAFETY,
    UNCONTROLLED,
    UNJUDGED,
    UNSUPPORTED,
    V_ERROR,
    V_UNSUPPORTED,
    Observation,
    TxnResult,
    allowed_classes,
    judge,
)
from tests.conftest import run_cli

S, WS = C.SERIALIZABLE, C.WRITE_SERIALIZABLE
MC, MX, CC = C.Outcome.MUST_COMMIT, C.Outcome.MUST_CONFLICT, C.Outcome.CAN_CONFLICT


def _exp(
    w: str, loser: str, level: str, layout: str = C.UNPARTITIONED, dv: bool = False
) -> tuple[str, C.Outcome, object]:
    e = C.expectation(C.Cell(w, loser, level, layout, dv))
    return e.claim, e.outcome, e.classes


# -- the expectation table (spec claims, not engine behaviour) --------------------

EXPECTED = [
    # (winner, loser, level, layout, dv) -> (claim, outcome, fixed classes)
    ((C.INSERT, C.INSERT, S, C.UNPARTITIONED, False), ("M1", MC, None)),
    ((C.INSERT, C.INSERT, WS, C.SAME_PARTITION, False), ("M1", MC, None)),
    ((C.INSERT, C.UPDATE, WS, C.UNPARTITIONED, False), ("M2", MC, None)),
    ((C.INSERT, C.UPDATE, S, C.UNPARTITIONED, False), ("M2", CC, None)),
    ((C.UPDATE, C.INSERT, WS, C.UNPARTITIONED, False), ("M2", MC, None)),  # symmetric in the pair
    ((C.INSERT, C.DELETE, S, C.UNPARTITIONED, False), ("C16", MX, frozenset({"E1"}))),
    ((C.INSERT, C.DELETE, WS, C.UNPARTITIONED, False), ("C16", MC, frozenset({"E1"}))),
    ((C.INSERT, C.DELETE_ALL, S, C.DISJOINT, False), ("C16", MX, frozenset({"E1"}))),  # no partition condition
    ((C.INSERT, C.DELETE, S, C.DISJOINT, False), ("P1", MC, None)),
    ((C.UPDATE, C.UPDATE, WS, C.UNPARTITIONED, False), ("M3", CC, None)),
    ((C.INSERT_SELECT, C.MERGE, S, C.SAME_PARTITION, False), ("M3", CC, None)),
    ((C.UPDATE, C.DELETE, S, C.DISJOINT, False), ("P1", MC, None)),
    ((C.MERGE, C.MERGE, WS, C.DISJOINT, False), ("P1", MC, None)),
    ((C.MERGE_NOLIT, C.MERGE, WS, C.DISJOINT, False), ("P2", CC, None)),
    ((C.MERGE, C.MERGE_NOLIT, S, C.DISJOINT, False), ("P2", CC, None)),
    ((C.OPTIMIZE, C.INSERT, S, C.UNPARTITIONED, False), ("M4", MC, None)),
    ((C.INSERT, C.ZORDER, WS, C.UNPARTITIONED, False), ("M4", MC, None)),
    ((C.OPTIMIZE, C.UPDATE, WS, C.UNPARTITIONED, False), ("M5", CC, None)),
    ((C.UPDATE, C.OPTIMIZE, WS, C.UNPARTITIONED, True), ("M5", MC, None)),
    ((C.ZORDER, C.UPDATE, WS, C.UNPARTITIONED, True), ("M5", CC, None)),
    ((C.OPTIMIZE, C.OPTIMIZE, S, C.UNPARTITIONED, False), ("M6", CC, None)),
    ((C.OPTIMIZE, C.OPTIMIZE, S, C.UNPARTITIONED, True), ("M6", MC, None)),
    ((C.OPTIMIZE, C.ZORDER, S, C.SAME_PARTITION, True), ("M6", CC, None)),
    ((C.OPTIMIZE, C.OPTIMIZE, S, C.DISJOINT, False), ("P1", MC, None)),
    ((C.SET_PROPERTIES, C.INSERT, WS, C.UNPARTITIONED, False), ("C17", MX, frozenset({"E4"}))),
    ((C.ADD_COLUMNS, C.OPTIMIZE, S, C.DISJOINT, False), ("C17", MX, frozenset({"E4"}))),
    ((C.ADD_COLUMNS, C.SET_PROPERTIES, S, C.UNPARTITIONED, False), ("C17", MX, frozenset({"E4"}))),
    ((C.INSERT, C.SET_PROPERTIES, S, C.UNPARTITIONED, False), ("C17", CC, None)),
    ((C.APP_TXN, C.APP_TXN, WS, C.UNPARTITIONED, False), ("E5", MX, frozenset({"E5"}))),
    ((C.APP_TXN, C.INSERT, S, C.UNPARTITIONED, False), ("M1", MC, None)),
    ((C.CREATE, C.CREATE, S, C.UNPARTITIONED, False), ("E6", MX, frozenset({"E6"}))),
]


@pytest.mark.parametrize("cell,expected", EXPECTED, ids=[C.Cell(*c).id for c, _ in EXPECTED])
def test_expectation_table(cell, expected):
    assert _exp(*cell) == expected


# The whole matrix, written by hand from the spec (not from cells.py's rules):
# winner per row, loser per column; each entry Serializable then
# WriteSerializable: c cannot conflict, x must conflict, ? can conflict,
# a the spec settles neither (judged as can conflict).
_OPS = {
    "I": C.INSERT,
    "IS": C.INSERT_SELECT,
    "U": C.UPDATE,
    "D": C.DELETE,
    "DA": C.DELETE_ALL,
    "M": C.MERGE,
    "MN": C.MERGE_NOLIT,
    "O": C.OPTIMIZE,
    "Z": C.ZORDER,
    "SP": C.SET_PROPERTIES,
    "AC": C.ADD_COLUMNS,
}
_UNPARTITIONED = """
    I  IS U  D  DA M  O  Z  SP AC
I   cc ?c ?c xc xc ?c cc cc aa aa
IS  ?c ?? ?? ?? ?? ?? ?? ?? aa aa
U   ?c ?? ?? ?? ?? ?? ?? ?? aa aa
D   ?c ?? ?? ?? ?? ?? ?? ?? aa aa
DA  ?c ?? ?? ?? ?? ?? ?? ?? aa aa
M   ?c ?? ?? ?? ?? ?? ?? ?? aa aa
O   cc ?? ?? ?? ?? ?? ?? ?? aa aa
Z   cc ?? ?? ?? ?? ?? ?? ?? aa aa
SP  xx xx xx xx xx xx xx xx xx xx
AC  xx xx xx xx xx xx xx xx xx xx
"""
# Both conditions name one partition: as unpartitioned (C16 included), and
# MERGE joining on the partition column is one more MERGE.
_SAME_PARTITION = """
    I  IS U  D  DA M  MN O  Z  SP AC
I   cc ?c ?c xc xc ?c ?c cc cc aa aa
IS  ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
U   ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
D   ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
DA  ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
M   ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
MN  ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
O   cc ?? ?? ?? ?? ?? ?? ?? ?? aa aa
Z   cc ?? ?? ?? ?? ?? ?? ?? ?? aa aa
SP  xx xx xx xx xx xx xx xx xx xx xx
AC  xx xx xx xx xx xx xx xx xx xx xx
"""
# P1: literal conditions on disjoint partitions cannot conflict; DELETE
# without a predicate (C16 still holds for it) and MERGE joining on the
# partition column only (P2) are not confined; M2's WriteSerializable
# "cannot" holds against P2's "can".
_DISJOINT = """
    I  IS U  D  DA M  MN O  Z  SP AC
I   cc cc cc cc xc cc ?c cc cc aa aa
IS  cc cc cc cc ?? cc ?? cc cc aa aa
U   cc cc cc cc ?? cc ?? cc cc aa aa
D   cc cc cc cc ?? cc ?? cc cc aa aa
DA  ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
M   cc cc cc cc ?? cc ?? cc cc aa aa
MN  ?c ?? ?? ?? ?? ?? ?? ?? ?? aa aa
O   cc cc cc cc ?? cc ?? cc cc aa aa
Z   cc cc cc cc ?? cc ?? cc cc aa aa
SP  xx xx xx xx xx xx xx xx xx xx xx
AC  xx xx xx xx xx xx xx xx xx xx xx
"""
# With deletion vectors (M5, M6): OPTIMIZE cannot conflict unless ZORDER BY is
# used. Only the pairs deletion vectors change are cells of their own.
_DV = """
    IS U  D  DA M  MN O  Z
IS  .. .. .. .. .. .. cc ??
U   .. .. .. .. .. .. cc ??
D   .. .. .. .. .. .. cc ??
DA  .. .. .. .. .. .. cc ??
M   .. .. .. .. .. .. cc ??
MN  .. .. .. .. .. .. cc ??
O   cc cc cc cc cc cc cc ??
Z   ?? ?? ?? ?? ?? ?? ?? ??
"""
_CODE = {"c": MC, "x": MX, "?": CC, "a": CC}


def _hand_table() -> dict[str, tuple[C.Outcome, bool]]:
    out: dict[str, tuple[C.Outcome, bool]] = {}

    def add(matrix: str, layout: str, dv: bool) -> None:
        head, *rows = matrix.split("\n")[1:-1]
        losers = head.split()
        for row in rows:
            w, *codes = row.split()
            for loser, code in zip(losers, codes, strict=True):
                if code == "..":
                    continue
                if layout == C.UNPARTITIONED and "MN" in (w, loser):
                    continue
                for level, ch in zip((S, WS), code, strict=True):
                    out[C.Cell(_OPS[w], _OPS[loser], level, layout, dv).id] = (_CODE[ch], ch == "a")

    for level in (S, WS):
        for w, loser, code in (
            (C.APP_TXN, C.APP_TXN, "x"),
            (C.APP_TXN, C.INSERT, "c"),
            (C.INSERT, C.APP_TXN, "c"),
            (C.CREATE, C.CREATE, "x"),
        ):
            out[C.Cell(w, loser, level, C.UNPARTITIONED).id] = (_CODE[code], False)
    add(_UNPARTITIONED, C.UNPARTITIONED, False)
    add(_SAME_PARTITION, C.SAME_PARTITION, False)
    add(_DISJOINT, C.DISJOINT, False)
    add(_DV, C.UNPARTITIONED, True)
    add(_DV, C.SAME_PARTITION, True)
    return out


def test_every_cell_is_expected_as_the_hand_written_matrix_says():
    hand = _hand_table()
    cells = {c.id: c for c in C.all_cells()}
    assert set(cells) == set(hand), (sorted(set(cells) - set(hand))[:5], sorted(set(hand) - set(cells))[:5])
    wrong = []
    for cid, (outcome, ambiguous) in sorted(hand.items()):
        e = C.expectation(cells[cid])
        if (e.outcome, bool(e.ambiguous)) != (outcome, ambiguous):
            wrong.append(
                f"{cid}: {e.claim} says {e.outcome.value}{' (ambiguous)' if e.ambiguous else ''}, "
                f"the spec {outcome.value}{' (ambiguous)' if ambiguous else ''}"
            )
    assert wrong == [], "\n".join(wrong)


def test_no_rule_is_shadowed_the_cannot_rules_settle_p2():
    # P2 ahead of M2 made a refusal of a blind INSERT
    # against MERGE (partition join) under WriteSerializable "conform".
    for w, loser in ((C.INSERT, C.MERGE_NOLIT), (C.MERGE_NOLIT, C.INSERT)):
        e = C.expectation(C.Cell(w, loser, WS, C.DISJOINT))
        assert (e.claim, e.outcome) == ("M2", MC) and "P2" in e.rule
        obs = _obs(_failed(ErrorClass.CONCURRENT_APPEND.value))
        assert judge(C.Cell(w, loser, WS, C.DISJOINT), e, obs)[0] == AVAILABILITY
    # Rules that settle a cell both ways make it ambiguous, not first-wins.
    a = C.Rule("X1", lambda w, loser: True, (MX, MX), None, "x")
    b = C.Rule("X2", lambda w, loser: True, (MC, MC), None, "y")
    saved = C.EXPECTATIONS
    try:
        C.EXPECTATIONS = (a, b)
        e = C.expectation(C.Cell(C.INSERT, C.INSERT, S, C.UNPARTITIONED))
    finally:
        C.EXPECTATIONS = saved
    assert e.outcome is CC and "X1 says must conflict" in e.ambiguous and "X2 says cannot conflict" in e.ambiguous


def test_every_cell_has_an_expectation_and_both_orders():
    cells = C.all_cells()
    ids = [c.id for c in cells]
    assert len(ids) == len(set(ids))
    for c in cells:
        C.expectation(c)  # raises if no claim covers it
        assert C.Cell(c.loser, c.winner, c.level, c.layout, c.dv).id in set(ids), c.id
    claims = {C.expectation(c).claim for c in cells}
    assert {"M1", "M2", "M3", "M4", "M5", "M6", "C16", "C17", "E5", "E6", "P1", "P2"} <= claims
    assert {c.level for c in cells} == {S, WS}
    assert {c.layout for c in cells} == set(C.LAYOUTS) and any(c.dv for c in cells)
    with pytest.raises(NotImplementedError):
        C.all_cells(row_level_concurrency=True)  # R-table: no engine declares it


def test_select_cells():
    cells = C.all_cells()
    assert [c.id for c in select(cells, r"^unpartitioned/Serializable/insert>insert$")] == [
        "unpartitioned/Serializable/insert>insert"
    ]
    with pytest.raises(HarnessError):
        select(cells, "nothing-matches-this")
    with pytest.raises(HarnessError):
        select(cells, "(")


# -- verdicts on synthetic observations ----------------------------------------------


def _obs(
    loser: TxnResult,
    controlled: bool = True,
    added: int = 1,
    removed: int = 0,
    meta: bool = False,
    winner: TxnResult | None = None,
    **kw,
) -> Observation:
    return Observation(
        winner or TxnResult(COMMITTED, version=3),
        loser,
        controlled,
        "pin lost" if not controlled else "",
        added,
        removed,
        meta,
        **kw,
    )


def _failed(cls: str) -> TxnResult:
    return TxnResult(FAILED, cls, "synthetic conflict")


def _judge(cell: C.Cell, obs: Observation) -> str:
    return judge(cell, C.expectation(cell), obs)[0]


C16_S = C.Cell(C.INSERT, C.DELETE, S, C.UNPARTITIONED)
M1 = C.Cell(C.INSERT, C.INSERT, WS, C.UNPARTITIONED)
M3 = C.Cell(C.UPDATE, C.UPDATE, WS, C.UNPARTITIONED)
C17 = C.Cell(C.SET_PROPERTIES, C.UPDATE, WS, C.UNPARTITIONED)


def test_committed_must_conflict_is_safety():
    assert _judge(C16_S, _obs(TxnResult(COMMITTED, version=4))) == SAFETY
    assert _judge(C17, _obs(TxnResult(COMMITTED, version=4), added=0, meta=True)) == SAFETY


def test_conflict_where_cannot_is_availability():
    assert _judge(M1, _obs(_failed("ConcurrentAppendException"))) == AVAILABILITY
    assert _judge(M1, _obs(_failed("commit-conflict-unclassified"))) == AVAILABILITY


def test_exception_class():
    # C16 names E1; E2 is the wrong class, an unclassified conflict names none.
    assert _judge(C16_S, _obs(_failed("ConcurrentAppendException"))) == CONFORMS
    assert _judge(C16_S, _obs(_failed("ConcurrentDeleteReadException"))) == EXCEPTION_CLASS
    assert _judge(C16_S, _obs(_failed("commit-conflict-unclassified"))) == EXCEPTION_CLASS
    assert _judge(C17, _obs(_failed("MetadataChangedException"), added=0, meta=True)) == CONFORMS
    assert _judge(C17, _obs(_failed("ConcurrentDeleteReadException"), added=0, meta=True)) == EXCEPTION_CLASS
    # By the winner's actions: it only added files -> E1 only.
    assert _judge(M3, _obs(_failed("ConcurrentAppendException"), added=1, removed=0)) == CONFORMS
    assert _judge(M3, _obs(_failed("ConcurrentDeleteReadException"), added=1, removed=0)) == EXCEPTION_CLASS
    assert _judge(M3, _obs(_failed("ConcurrentDeleteDeleteException"), added=1, removed=1)) == CONFORMS


def test_allowed_classes_follow_the_winner():
    e = C.expectation(M3)
    assert allowed_classes(M3, e, _obs(_failed("x"), added=1, removed=1)) == {"E1", "E2", "E3"}
    assert allowed_classes(M3, e, _obs(_failed("x"), added=0, removed=1)) == {"E2", "E3"}
    ins_loser = C.Cell(C.UPDATE, C.INSERT, S, C.UNPARTITIONED)  # a blind insert removes nothing: no E3
    assert allowed_classes(ins_loser, C.expectation(ins_loser), _obs(_failed("x"), removed=1)) == {"E1", "E2"}


def test_uncontrolled_never_passes():
    for cell in (M1, M3, C16_S, C17):
        for loser in (
            TxnResult(COMMITTED, version=4),
            _failed("ConcurrentAppendException"),
            _failed("MetadataChangedException"),
        ):
            assert _judge(cell, _obs(loser, controlled=False)) == UNCONTROLLED


def test_unsupported_error_and_can_conflict():
    assert _judge(M3, _obs(TxnResult(UNSUPPORTED, "unsupported", "not implemented"))) == V_UNSUPPORTED
    assert _judge(M3, _obs(TxnResult(COMMITTED), winner=TxnResult(UNSUPPORTED, "unsupported"))) == V_UNSUPPORTED
    assert _judge(M3, _obs(TxnResult(ERROR, "not-a-conflict", "boom"))) == V_ERROR
    assert _judge(M3, _obs(TxnResult(COMMITTED), winner=TxnResult(ERROR, "not-a-conflict"))) == V_ERROR
    # can conflict: either outcome conforms, unless the committed table is wrong.
    assert _judge(M3, _obs(TxnResult(COMMITTED, version=4))) == CONFORMS
    assert _judge(M3, _obs(TxnResult(COMMITTED, version=4), data_violation="C15: lost update")) == SAFETY
    assert _judge(M3, _obs(TxnResult(COMMITTED, version=4), checker_anomalies=["G-single (C15): ..."])) == SAFETY


def test_observation_round_trips():
    o = _obs(_failed("ConcurrentAppendException"), removed=2, table="/x", checker_anomalies=["a"])
    assert Observation.from_json(json.loads(json.dumps(o.to_json()))) == o
    assert o.observed() == "failed E1"
    assert _obs(TxnResult(COMMITTED), controlled=False).observed() == "uncontrolled"


# -- the model and the data check ------------------------------------------------------


class _FakeLog:
    """rows_at() of a log whose latest table is `rows`."""

    latest_version = 4

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def rows_at(self, version: int, columns: list[str]) -> pa.Table:
        return pa.table({c: [r[i] for r in self.rows] for i, c in enumerate(columns)})


def test_data_check_catches_lost_update_and_passes_serial():
    cell = M3
    w, loser = plans(cell)
    serial = apply(loser, apply(w, initial_rows()))
    obs = _obs(TxnResult(COMMITTED, version=4))
    assert check_data(cell, obs, _FakeLog(serial)) is None
    lost = apply(loser, initial_rows())  # the loser overwrote the winner's update
    why = check_data(cell, obs, _FakeLog(lost))
    assert why and why.startswith("C15:") and "missing" in why


def test_data_check_write_serializable_allows_reordering_serializable_does_not():
    cell_ws = C.Cell(C.INSERT, C.DELETE_ALL, WS, C.UNPARTITIONED)
    cell_s = C.Cell(C.INSERT, C.DELETE_ALL, S, C.UNPARTITIONED)
    w, loser = plans(cell_ws)
    survived = apply(w, apply(loser, initial_rows()))  # the insert "after" the delete (spec C16)
    both = _obs(TxnResult(COMMITTED, version=4))
    assert check_data(cell_ws, both, _FakeLog(survived)) is None
    assert check_data(cell_s, both, _FakeLog(survived)).startswith("C14:")
    # Loser failed: the table must be the winner's alone (C8).
    failed = _obs(_failed("ConcurrentAppendException"))
    assert check_data(cell_s, failed, _FakeLog(apply(w, initial_rows()))) is None
    assert check_data(cell_s, failed, _FakeLog(survived + [initial_rows()[0]])).startswith("C8:")


def test_model_doubled_rows_after_two_optimizes_is_no_serial_order():
    cell = C.Cell(C.OPTIMIZE, C.OPTIMIZE, WS, C.UNPARTITIONED)
    w, loser = plans(cell)
    outs = serial_outcomes(w, loser, True, WS)
    assert Counter(initial_rows() * 2) not in outs.values()
    assert Counter(initial_rows()) in outs.values()


def test_markdown_lists_every_cell_and_deviation():
    cells = [M1, C16_S]
    results = [
        CellResult(M1, C.expectation(M1), _obs(TxnResult(COMMITTED, version=4)), CONFORMS, ""),
        CellResult(C16_S, C.expectation(C16_S), _obs(TxnResult(COMMITTED, version=4)), SAFETY, "committed"),
    ]
    md = render_markdown("delta-rs", results, 1.0, {"deltalake": "x"})
    assert (
        "| M1 | insert + insert | insert first | WriteSerializable | unpartitioned | cannot conflict | committed | "
        "- | conforms |" in md
    )
    assert "- **C16** (1):" in md and f"`{C16_S.id}`: deviates-safety" in md
    all_cells = md.split("## All cells")[1]
    assert len([line for line in all_cells.splitlines() if line.startswith("| ") and "claim" not in line]) == len(cells)
    assert "| C16 | 1 |  |  | 1 |" in md  # per claim: cells, conforms, conforms-retried, deviates-safety, ...


# -- delta-rs, real cells ----------------------------------------------------------------

SAMPLE = [
    C.Cell(C.INSERT, C.INSERT, S, C.UNPARTITIONED),
    C.Cell(C.UPDATE, C.UPDATE, WS, C.SAME_PARTITION),
    C.Cell(C.INSERT, C.DELETE_ALL, S, C.UNPARTITIONED),
    C.Cell(C.INSERT, C.DELETE_ALL, WS, C.UNPARTITIONED),
    C.Cell(C.UPDATE, C.INSERT, WS, C.DISJOINT),
    C.Cell(C.OPTIMIZE, C.OPTIMIZE, WS, C.UNPARTITIONED),
    C.Cell(C.OPTIMIZE, C.DELETE_ALL, WS, C.UNPARTITIONED),
    C.Cell(C.SET_PROPERTIES, C.UPDATE, S, C.UNPARTITIONED),
    C.Cell(C.APP_TXN, C.APP_TXN, WS, C.UNPARTITIONED),
    C.Cell(C.CREATE, C.CREATE, S, C.UNPARTITIONED),
    C.Cell(C.INSERT_SELECT, C.DELETE_ALL, WS, C.DISJOINT),
]


@pytest.fixture(scope="module")
def deltars_sample(tmp_path_factory) -> list[list[CellResult]]:
    pytest.importorskip("deltalake")
    root = tmp_path_factory.mktemp("conformance")
    return [run_cells("delta-rs", SAMPLE, root / f"r{i}", timeout=60) for i in range(5)]


@pytest.mark.integration
def test_deltars_cells_are_deterministic(deltars_sample):
    outcomes = [[(r.cell.id, r.obs.observed(), r.verdict, r.obs.controlled) for r in rep] for rep in deltars_sample]
    assert all(o == outcomes[0] for o in outcomes), outcomes
    assert all(r.obs.controlled for r in deltars_sample[0]), [r.obs.control_note for r in deltars_sample[0]]


@pytest.mark.integration
def test_jobs_split_the_cells_and_keep_their_order(deltars_sample, tmp_path):
    """--jobs 2: two workers, each with its own storage and logs, the same
    observations in the cells' order."""
    two = run_cells("delta-rs", SAMPLE, tmp_path, timeout=60, jobs=2)
    assert [(r.cell.id, r.obs.observed(), r.verdict) for r in two] == [
        (r.cell.id, r.obs.observed(), r.verdict) for r in deltars_sample[0]
    ]
    assert all(r.obs.controlled for r in two)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job1", "job2"]
    assert all(list((tmp_path / j / "logs").glob("worker-*.log")) for j in ("job1", "job2"))


@pytest.mark.integration
def test_deltars_control_took_effect(deltars_sample):
    for r in deltars_sample[0]:
        if r.cell.winner == C.CREATE:
            assert r.obs.winner.version == 0
            continue
        # The level is read back from the table, and it is the one asked for.
        assert r.obs.level == r.cell.level and r.obs.level_source == "delta.isolationLevel at version 2", r.cell.id
        assert r.to_json()["judged_level"] == r.cell.level
        assert r.obs.winner.version == 3 and r.obs.winner.read_version == 2, r.cell.id
        assert r.obs.loser.read_version == r.obs.loser.scheduled_read_version == 2, r.cell.id
        if r.obs.loser.status == COMMITTED:
            assert r.obs.loser.version == 4, r.cell.id
            # The read version is the commit's; delta-rs records none for a
            # blind append, and there the pinned object's version stands.
            source = r.obs.loser.read_version_source
            if r.cell.loser == C.INSERT:
                assert source.endswith("its commit records no readVersion"), (r.cell.id, source)
            else:
                assert source == "commitInfo.readVersion of version 4", (r.cell.id, source)


# What delta-rs 1.6.6 does, cell by cell: conforming cells, and the deviations
# the harness must report (README Findings), each with its claim.
DELTARS_VERDICTS = {
    "unpartitioned/Serializable/insert>insert": (CONFORMS, "committed"),
    "partitioned-same/WriteSerializable/update>update": (CONFORMS, "failed E1"),
    # C16: predicate-less DELETE commits after the INSERT under Serializable.
    "unpartitioned/Serializable/insert>delete-all": (SAFETY, "committed"),
    "unpartitioned/WriteSerializable/insert>delete-all": (CONFORMS, "committed"),
    # C9 / M2 / P1: a blind append fails after a DELETE/UPDATE of another partition.
    "partitioned-disjoint/WriteSerializable/update>insert": (AVAILABILITY, "failed E2"),
    # M6 / C8: two OPTIMIZEs both commit, every row twice.
    "unpartitioned/WriteSerializable/optimize>optimize": (SAFETY, "committed"),
    # M5 / C8: DELETE of every row after an OPTIMIZE commits; the rows survive.
    "unpartitioned/WriteSerializable/optimize>delete-all": (SAFETY, "committed"),
    "unpartitioned/Serializable/set-properties>update": (CONFORMS, "failed E4"),
    "unpartitioned/WriteSerializable/app-txn>app-txn": (CONFORMS, "failed E5"),
    # E6: both creators succeed.
    "unpartitioned/Serializable/create>create": (SAFETY, "committed"),
    # C15: INSERT ... SELECT and a predicate-less DELETE both commit; no serial order gives the table.
    "partitioned-disjoint/WriteSerializable/insert-select>delete-all": (SAFETY, "committed"),
}


@pytest.mark.integration
def test_deltars_deviations_are_reported(deltars_sample):
    got = {r.cell.id: (r.verdict, r.obs.observed()) for r in deltars_sample[0]}
    assert got == DELTARS_VERDICTS
    by_id = {r.cell.id: r for r in deltars_sample[0]}
    # The safety verdicts carry their evidence: the data check and the checker.
    opt = by_id["unpartitioned/WriteSerializable/optimize>optimize"]
    assert opt.obs.data_violation and "extra (id 1" in opt.obs.data_violation
    c16 = by_id["unpartitioned/Serializable/insert>delete-all"]
    assert any(a.startswith("history-order (C14)") for a in c16.obs.checker_anomalies), c16.obs.checker_anomalies
    skew = by_id["partitioned-disjoint/WriteSerializable/insert-select>delete-all"]
    assert skew.obs.data_violation and skew.obs.data_violation.startswith("C15:")
    # A committed correct cell passes both checks.
    ok = by_id["unpartitioned/WriteSerializable/insert>delete-all"]
    assert ok.obs.data_violation is None and ok.obs.checker_verdict == "valid"


@pytest.mark.integration
def test_conformance_cli_delta_rs_full_matrix(results_dir):
    r = run_cli("conformance", "--engine", "delta-rs", "--results-dir", str(results_dir), timeout=900)
    assert r.returncode == 1, r.stderr[-3000:]  # delta-rs has safety deviations
    (root,) = list((results_dir / "conformance-delta-rs").iterdir())
    doc = json.loads((root / "conformance.json").read_text())
    assert len(doc["cells"]) == len(C.all_cells())
    assert doc["seconds"] <= 600, doc["seconds"]
    counts = Counter(c["verdict"] for c in doc["cells"])
    assert counts[SAFETY] > 0 and counts[CONFORMS] > 0
    assert counts[UNCONTROLLED] == 0 and counts[V_ERROR] == 0, [
        c["why"] for c in doc["cells"] if c["verdict"] in (UNCONTROLLED, V_ERROR)
    ]
    for c in doc["cells"]:
        assert {"claim", "winner", "loser", "level", "layout", "expected", "observed", "verdict"} <= set(c)
    md = (root / "conformance.md").read_text()
    assert md.split("## All cells")[1].count("\n| ") - 1 == len(doc["cells"])
    assert "`unpartitioned/Serializable/create>create`: deviates-safety" in md
    assert f"{len(doc['cells'])} cells" in r.stdout
    assert f"[{len(doc['cells'])}/{len(doc['cells'])}] " in r.stderr  # progress, one line per cell
    page = (root / "conformance.html").read_text()
    assert 'id="conformance-grid"' in page and page.count('class="cell ') == len(doc["cells"])
    # The docs' findings page is written from stored verdicts: the code's
    # must still be those.
    stored = stored_verdicts(json.loads((DATA_DIR / "conformance-delta-rs.json").read_text()))
    fresh = stored_verdicts(stored_conformance(doc))
    changed = {i: (stored.get(i), v) for i, v in fresh.items() if stored.get(i) != v}
    assert not changed and set(stored) == set(fresh), (
        f"{len(changed)} cell verdict(s) differ from docs/data/conformance-delta-rs.json (stored, now): "
        f"{dict(list(changed.items())[:10])}; if the change is right, store this run with "
        f"`delta-jepsen reference --store-conformance {root / 'conformance.json'}`"
    )


def test_conformance_cli_bad_input(results_dir):
    r = run_cli("conformance", "--engine", "nosuch", "--results-dir", str(results_dir), timeout=60)
    assert r.returncode == 2 and "unknown engine 'nosuch'" in r.stderr
    r = run_cli("conformance", "--engine", "delta-rs", "--cells", "(", "--results-dir", str(results_dir), timeout=60)
    assert r.returncode == 2 and "bad regular expression" in r.stderr
    r = run_cli("conformance", "--engine", "delta-rs", "--jobs", "0", "--results-dir", str(results_dir), timeout=60)
    assert r.returncode == 2 and "--jobs must be >= 1" in r.stderr and "Traceback" not in r.stderr


def test_a_worker_that_dies_is_an_uncontrolled_cell(tmp_path):
    from harness.matrices.conformance.matrix import CellWorker, _error_obs

    w = CellWorker("nosuch-engine", tmp_path)
    try:
        reply = w.run(M1, tmp_path, timeout=60)
    finally:
        w.stop()
    assert "died" in reply["error"]
    obs = _error_obs(reply["error"])
    assert judge(M1, C.expectation(M1), obs)[0] == UNCONTROLLED


def test_a_matrix_with_unjudged_cells_is_no_clean_pass():
    """Exit codes as `check`'s: uncontrolled or error cells make 3, never 0;
    a safety deviation makes 1 whatever else."""
    from harness.matrices.conformance.matrix import exit_code

    assert exit_code(Counter({CONFORMS: 5})) == 0
    assert exit_code(Counter({CONFORMS: 5, V_UNSUPPORTED: 2})) == 0
    assert exit_code(Counter({UNCONTROLLED: 3})) == 3
    assert exit_code(Counter({V_ERROR: 1, CONFORMS: 9})) == 3
    assert exit_code(Counter({SAFETY: 1, UNCONTROLLED: 3})) == 1


def _level_log(table_level: str | None, commit_levels: dict[int, str], extra: int = 2):
    from harness.deltalog import Commit, TransactionLog
    from harness.matrices.conformance.rows import SETUP

    conf = {"delta.isolationLevel": table_level} if table_level else {}
    commits = [
        Commit(
            0,
            [
                {"commitInfo": {"operation": "CREATE TABLE"}},
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                {
                    "metaData": {
                        "id": "t",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": '{"type":"struct","fields":[]}',
                        "partitionColumns": [],
                        "configuration": conf,
                    }
                },
            ],
        )
    ]
    for v in range(1, len(SETUP) + 1 + extra):
        info = {"operation": "WRITE"}
        if v in commit_levels:
            info["isolationLevel"] = commit_levels[v]
        commits.append(Commit(v, [{"commitInfo": info}]))
    return TransactionLog.from_commits(commits, {})


def test_cells_are_judged_at_the_level_the_table_carried():
    """The expectation follows the level in the log (spec C13), not the one
    the cell asked for."""
    from harness.matrices.conformance.matrix import carried_level, judged_cell
    from harness.matrices.conformance.rows import SETUP

    v0 = len(SETUP)
    assert carried_level(_level_log(WS, {v0 + 2: S}), S) == (WS, f"delta.isolationLevel at version {v0}")
    level, source = carried_level(_level_log(None, {v0 + 1: WS, v0 + 2: WS}), S)
    assert (level, source) == (WS, f"commitInfo.isolationLevel of version {v0 + 2}")
    assert carried_level(_level_log(None, {}), "Serializable")[0] == S
    # C16: DELETE after a concurrent INSERT must fail under Serializable and
    # commits under WriteSerializable. Asked for Serializable, the table
    # carried WriteSerializable: a committed loser conforms, judged at WS.
    cell = C.Cell(C.INSERT, C.DELETE, S, C.UNPARTITIONED)
    obs = _obs(TxnResult(COMMITTED, version=v0 + 2))
    assert _judge(cell, obs) == SAFETY
    obs.level, obs.level_source = WS, "delta.isolationLevel at version 3"
    judged = judged_cell(cell, obs)
    assert judged.level == WS and judged.winner == cell.winner and judged.loser == cell.loser
    assert _judge(judged, obs) == CONFORMS
    obs.level = "Snapshot"  # not a level the spec knows: judged as asked
    assert judged_cell(cell, obs) == cell


def test_a_conforming_outcome_on_a_table_the_checker_could_not_judge_is_unjudged():
    """An unknown serializability result never becomes `conforms`; safety
    still wins, and the report shows the checker's verdict."""
    committed = TxnResult(COMMITTED, version=4)
    obs = _obs(committed, checker_verdict="unknown", checker_note="no op attribution for version 4")
    verdict, why = judge(M3, C.expectation(M3), obs)
    assert verdict == UNJUDGED and "no op attribution" in why
    assert _judge(M3, _obs(committed, checker_verdict="valid")) == CONFORMS
    assert _judge(M3, _obs(committed, checker_verdict="unknown", data_violation="C15: x")) == SAFETY
    # A conflict where none may happen is a deviation whatever the data.
    assert _judge(M1, _obs(_failed("ConcurrentAppendException"), checker_verdict="unknown")) == AVAILABILITY
    from harness.matrices.conformance.matrix import exit_code

    assert exit_code(Counter({CONFORMS: 3, UNJUDGED: 1})) == 3
    md = render_markdown("x", [CellResult(M3, C.expectation(M3), obs, UNJUDGED, why)], 1.0, {})
    assert "| committed | unknown | unjudged |" in md


def test_an_indeterminate_loser_is_resolved_from_the_log():
    """A loser that timed out but whose commit landed is judged as committed:
    under C16/Serializable that is a safety deviation,
    not an `error`; absent from the log, it stays an error."""
    from harness.matrices.conformance.matrix import resolve_loser
    from harness.matrices.conformance.rows import SETUP

    timed_out = TxnResult(ERROR, "timeout", "deadline exceeded", read_version=len(SETUP))
    obs = _obs(timed_out)
    assert _judge(C16_S, obs) == V_ERROR
    resolve_loser(obs, _level_log(S, {}))  # the log has v0+2
    assert obs.loser.status == COMMITTED and obs.loser.version == len(SETUP) + 2
    assert "reported timeout" in obs.loser.raw
    assert _judge(C16_S, obs) == SAFETY
    obs = _obs(TxnResult(ERROR, "timeout", "deadline exceeded"))
    resolve_loser(obs, _level_log(S, {}, extra=1))  # only the winner's v0+1
    assert obs.loser.status == ERROR


def test_sail_versions_are_observed_from_the_log_not_assumed():
    """Sail reports no versions: the backend takes them from the log, and a
    log without the evidence makes the cell uncontrolled."""
    from harness.matrices.conformance.rows import SETUP
    from harness.matrices.conformance.sail_backend import SailBackend
    from tests.synth import SynthRun

    v0 = len(SETUP)

    def log_with(commits: list[list[tuple[int, str]]]):
        run = SynthRun()
        for _ in range(v0):
            run.commit([(0, "setup")])
        for rows in commits:
            run.commit(rows)
        return run.build()[1]

    def observe(log, hold_ok=True, loser_status=COMMITTED):
        w, lo, notes = TxnResult(COMMITTED), TxnResult(loser_status), []
        SailBackend._observe_versions(log, v0, "w.1", "l.1", w, lo, notes, hold_ok)
        return w, lo, notes

    log = log_with([[(1, "w.1")], [(2, "l.1")]])
    w, lo, notes = observe(log)
    assert notes == [] and (w.version, lo.version) == (v0 + 1, v0 + 2)
    # The schedule's versions; what each op read is the shared path's to say,
    # and Sail's commits record no readVersion: the schedule's stand, so named.
    assert (w.scheduled_read_version, lo.scheduled_read_version, lo.read_version) == (v0, v0, None)
    obs = Observation(w, lo, True)
    observe_read_versions(obs, log)
    assert (w.read_version, lo.read_version) == (v0, v0) and not obs.loser_retried
    assert lo.read_version_source == (
        f"its commit PUT of version {v0 + 1} was held until the winner had committed it; "
        "its commit records no readVersion"
    )
    # The winner says it committed, but the log stops at v0: no evidence.
    w, lo, notes = observe(log_with([]), loser_status=FAILED)
    assert w.version is None and notes == [f"the winner reported success, but the log has no version {v0 + 1}"]
    # The winner's rows are at v0+2: the order was not the one asked for.
    w, lo, notes = observe(log_with([[(2, "l.1")], [(1, "w.1")]]))
    assert f"the winner's rows first appear at version {v0 + 2}, not {v0 + 1}" in notes
    assert f"the loser's commit is version {v0 + 1}, not {v0 + 2}" in notes
    # A hold that did not take: the loser's read version is not known.
    w, lo, notes = observe(log_with([[(1, "w.1")], [(2, "l.1")]]), hold_ok=False)
    assert lo.scheduled_read_version is None and lo.read_version is None


# delta-spark 4.0.1's OPTIMIZE after a concurrent SET TBLPROPERTIES, as its
# loser's JVM logged it: the attempt on version 2 (txnId 40e1869d) checks for
# conflicts with the winner's version 3 and never commits; a new transaction
# (97a96c0b) on version 3 commits version 4.
_JVM = "26/11/25 10:42:0{} INFO OptimisticTransaction: {}"
RETRY_JVM_LOG = [
    _JVM.format("2.120", "[tableId=33d6cd6f,txnId=40e1869d] Attempting to commit version 3 with 6 actions"),
    _JVM.format("2.969", "[tableId=33d6cd6f,txnId=40e1869d] [attempt 1] Checking for conflicts with versions [3, 4)"),
    _JVM.format("4.405", "[tableId=33d6cd6f,txnId=97a96c0b] Attempting to commit version 4 with 6 actions"),
    _JVM.format("4.496", "Incremental commit: starting with snapshot version 3"),
    _JVM.format("4.504", "[tableId=33d6cd6f,txnId=97a96c0b] Committed delta #4 to s3a://b/t/_delta_log"),
]
C17_OPT = C.Cell(C.SET_PROPERTIES, C.OPTIMIZE, S, C.UNPARTITIONED)


def _commit_log(read_versions: dict[int, int | None], txn_ids: dict[int, str] | None = None, last: int = 4):
    """A log of versions 0..last whose commitInfo records the given readVersions."""
    from harness.deltalog import Commit, TransactionLog

    commits = []
    for v in range(last + 1):
        info: dict = {"operation": "WRITE"}
        if read_versions.get(v) is not None:
            info["readVersion"] = read_versions[v]
        if txn_ids and v in txn_ids:
            info["txnId"] = txn_ids[v]
        commits.append(Commit(v, [{"commitInfo": info}]))
    return TransactionLog.from_commits(commits, {})


def _c17_observation(loser_read_version: int | None, engine_log: list[str] | None = None) -> Observation:
    """The C17 cell after the shared path read its log: the winner's SET
    TBLPROPERTIES at 3, the loser's OPTIMIZE at 4, both put on 2 by the
    schedule (the loser's existence check of 3 held)."""
    winner = TxnResult(COMMITTED, version=3, scheduled_read_version=2, read_version_source="ran while held")
    loser = TxnResult(
        COMMITTED, version=4, scheduled_read_version=2, read_version_source="its existence check of version 3 was held"
    )
    obs = _obs(loser, added=0, meta=True, winner=winner, loser_engine_log=engine_log or [])
    log = _commit_log({3: 2, 4: loser_read_version}, {4: "97a96c0b-25e0-491a-bb44-558c8099a66a"})
    observe_read_versions(obs, log)
    return obs


def test_a_loser_retried_after_the_conflict_conforms_retried():
    """The loser's attempt on v0 left no commit and its commit read the
    winner's: the engine retried it as a new transaction. C17's conflict
    happened, and the retry is judged as serial after the winner."""
    obs = _c17_observation(3, RETRY_JVM_LOG)
    lo = obs.loser
    assert (lo.read_version, lo.scheduled_read_version, lo.read_version_source) == (
        3,
        2,
        "commitInfo.readVersion of version 4",
    )
    assert obs.controlled and obs.loser_retried and obs.observed() == "committed (retried)"
    verdict, why = judge(C17_OPT, C.expectation(C17_OPT), obs)
    assert verdict == RETRIED and "attempt on version 2 left no commit" in why and "read version 3" in why
    # The evidence, in the cell's result: the schedule, the commit's
    # readVersion and txnId, and the JVM's lines, the committing txn's marked.
    assert "its existence check of version 3 was held" in obs.retry[0]
    assert "readVersion 3 and txnId 97a96c0b-25e0-491a-bb44-558c8099a66a" in obs.retry[1]
    assert any(e.startswith("engine log: ") and "txnId=40e1869d] [attempt 1] Checking" in e for e in obs.retry)
    assert any(
        e.startswith("engine log (the committing transaction): ") and "Committed delta #4" in e for e in obs.retry
    )
    assert Observation.from_json(json.loads(json.dumps(obs.to_json()))) == obs
    # A pass: a colour and a count of its own, never a deviation or exit 1.
    from harness.check import junit
    from harness.matrices.conformance.html import render_html
    from harness.matrices.conformance.matrix import exit_code, junit_suite

    r = CellResult(C17_OPT, C.expectation(C17_OPT), obs, verdict, why)
    md = render_markdown("delta-spark", [r], 1.0, {})
    assert "| C17 | 1 |  | 1 |" in md and "## Cells that conform through the engine's retry" in md
    assert (
        "## Deviations, by claim\n\nnone" in md
        and "| must conflict | committed (retried) | - | conforms-retried |" in md
    )
    doc = {"engine": "delta-spark", "cells": [r.to_json()], "counts": {RETRIED: 1}}
    page = render_html(doc)
    assert "conforms-retried 1" in page and "Checking for conflicts with versions [3, 4)" in page
    (case,) = junit_suite(doc).cases
    assert case.outcome == junit.PASS and "retry: " in (case.system_out or "")
    assert exit_code(Counter({RETRIED: 12, CONFORMS: 3})) == 0
    # The table and the checker still judge the retry: a wrong table is safety.
    obs.data_violation = "C14: missing (id 1, ...)"
    assert _judge(C17_OPT, obs) == SAFETY
    obs.data_violation, obs.checker_verdict = None, "unknown"
    assert _judge(C17_OPT, obs) == UNJUDGED


def test_a_loser_committed_on_the_stale_snapshot_is_still_a_safety_deviation():
    """A loser whose commit read a snapshot without the winner's commit went
    in past the conflict C17 requires: deviates-safety, the read version in
    the why. No readVersion in the commit (Sail) proves no retry either, nor
    does a read version the log did not give."""
    stale = _c17_observation(2, RETRY_JVM_LOG)
    assert stale.loser.read_version == 2 and not stale.loser_retried and stale.retry == []
    verdict, why = judge(C17_OPT, C.expectation(C17_OPT), stale)
    assert verdict == SAFETY and stale.observed() == "committed"
    assert "from version 2 (commitInfo.readVersion of version 4), a snapshot without the winner's commit" in why
    silent = _c17_observation(None)
    assert silent.loser.read_version == 2 and silent.loser.read_version_source.endswith("records no readVersion")
    assert _judge(C17_OPT, silent) == SAFETY
    assumed = _obs(
        TxnResult(COMMITTED, version=4, read_version=3, scheduled_read_version=2, read_version_source="assumed"),
        winner=TxnResult(COMMITTED, version=3),
    )
    assert not assumed.loser_retried and _judge(C17_OPT, assumed) == SAFETY


def test_read_versions_come_from_each_commit_and_a_stale_one_is_uncontrolled():
    from harness.matrices.conformance.matrix import two_txn_history

    # A commit that read an older snapshot than the schedule gave it: the
    # control did not take effect (the winner must have read v0 exactly).
    obs = _c17_observation(1)
    assert not obs.controlled and "records readVersion 1, not the version 2" in obs.control_note
    obs = _obs(
        TxnResult(FAILED, "MetadataChangedException", scheduled_read_version=2),
        winner=TxnResult(COMMITTED, version=3, scheduled_read_version=2),
    )
    observe_read_versions(obs, _commit_log({3: 1}))
    assert not obs.controlled and "the winner's commit, version 3, records readVersion 1" in obs.control_note
    assert obs.loser.read_version == 2  # no commit: the schedule's
    # A retry is the loser's one commit, right after the winner's: a commit
    # after it is no two-transaction schedule, and one later than the next
    # version is no retry the harness can vouch for.
    obs = _obs(
        TxnResult(COMMITTED, version=4, scheduled_read_version=2),
        winner=TxnResult(COMMITTED, version=3, scheduled_read_version=2),
    )
    observe_read_versions(obs, _commit_log({3: 2, 4: 3}, last=5))
    assert obs.loser_retried and not obs.controlled and "versions [5] follow the loser's commit" in obs.control_note
    obs = _obs(
        TxnResult(COMMITTED, version=5, scheduled_read_version=2),
        winner=TxnResult(COMMITTED, version=3, scheduled_read_version=2),
    )
    observe_read_versions(obs, _commit_log({3: 2, 5: 3}, last=5))
    assert obs.loser.read_version == 3 and not obs.loser_retried and obs.retry == []
    # A retried loser read the winner's commit: only the history order is
    # allowed, at WriteSerializable too, and its transaction began after it.
    ws = C.Cell(C.INSERT, C.DELETE_ALL, WS, C.UNPARTITIONED)
    w, loser = plans(ws)
    reversed_order = apply(w, apply(loser, initial_rows()))
    retried = _c17_observation(3)
    assert check_data(ws, _obs(TxnResult(COMMITTED, version=4)), _FakeLog(reversed_order)) is None
    assert check_data(ws, retried, _FakeLog(reversed_order)).startswith("C15:")
    assert check_data(ws, retried, _FakeLog(apply(loser, apply(w, initial_rows())))) is None
    events = [(e.process, e.type) for e in two_txn_history(C17_OPT, retried, S).events if e.process in (1, 2)]
    assert events == [(1, "invoke"), (1, "ok"), (2, "invoke"), (2, "ok")]
    events = [
        (e.process, e.type) for e in two_txn_history(C17_OPT, _c17_observation(2), S).events if e.process in (1, 2)
    ]
    assert events == [(1, "invoke"), (2, "invoke"), (1, "ok"), (2, "ok")]


def test_a_compaction_loser_that_completes_as_a_no_op_conforms_where_it_cannot_conflict():
    # M6 with deletion vectors: the loser cannot conflict, and rewriting the
    # winner's files again would duplicate rows: a no-op is how it conforms.
    m6 = C.Cell(C.OPTIMIZE, C.OPTIMIZE, WS, C.UNPARTITIONED, dv=True)
    assert C.expectation(m6).outcome is MC
    noop = TxnResult(NOOP, read_version=2)
    assert _judge(m6, _obs(noop, removed=2)) == CONFORMS
    assert _judge(m6, _obs(_failed(ErrorClass.CONCURRENT_DELETE_DELETE.value), removed=2)) == AVAILABILITY
    assert _judge(m6, _obs(TxnResult(COMMITTED, version=4), removed=2, data_violation="C15: rows 1..8 twice")) == SAFETY
    # A no-op is no answer where the spec requires a conflict (C17: E4) ...
    c17 = C.Cell(C.SET_PROPERTIES, C.OPTIMIZE, WS, C.UNPARTITIONED)
    assert _judge(c17, _obs(noop, meta=True)) == EXCEPTION_CLASS
    # ... and only a compaction may report success and commit nothing.
    m3 = C.Cell(C.UPDATE, C.DELETE, WS, C.UNPARTITIONED)
    assert _judge(m3, _obs(noop)) == V_ERROR
    assert "no-op" in _obs(noop).observed()


def test_the_report_lists_the_cells_the_spec_leaves_ambiguous():
    amb = [c for c in C.all_cells() if C.expectation(c).ambiguous]
    assert amb and all(c.loser in C.METADATA and c.winner not in C.METADATA for c in amb)
    results = [CellResult(c, C.expectation(c), _obs(TxnResult(COMMITTED, version=4)), CONFORMS, "") for c in amb[:3]]
    md = render_markdown("x", results, 1.0, {})
    assert "## Cells the spec leaves ambiguous" in md and amb[0].id in md
    assert results[0].to_json()["spec_ambiguous"].startswith("C17")
