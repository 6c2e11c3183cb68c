"""create-race (spec E6): the checker on synthetic rounds, the workload's
round schedule, and short real runs on delta-rs (local) and Sail (embedded
S3)."""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from checkers import CHECKERS
from checkers.base import Verdict
from checkers.create_race import NAME, check
from checkers.facts import commit_op_id
from harness.deltalog import Commit, TransactionLog, read_log
from tests.conftest import load_results, only_run_dir, run_cli
from tests.known import Known, RunView, assert_only_known, versions_of
from tests.synth import SynthRun, add_action, create_actions, rows_table
from workloads import make_workload
from workloads.create_race import CreateRaceWorkload

TABLE = "races/r0"
E6 = {"class": "ProtocolChangedException", "raw": "Protocol changed since last commit: create race"}
EXISTS = {
    "class": "not-a-conflict",
    "raw": "DeltaError: Generic error: A Delta Lake table already exists at that location.",
}


# ---------------------------------------------------------------------------
# synthetic rounds


def creation(op: str, table_id: str = "00000000-0000-0000-0000-000000000000", meta: bool = True) -> list[dict]:
    actions = create_actions()
    actions[0]["commitInfo"]["dj.op"] = op
    actions[2]["metaData"]["id"] = table_id
    return actions if meta else actions[:1]


def append_commit(op: str, ids: list[int], v: int, files: dict) -> list[dict]:
    path = f"f{v}.parquet"
    files[path] = rows_table([(i, op) for i in ids])
    return [{"commitInfo": {"timestamp": v, "operation": "WRITE", "dj.op": op}}, add_action(path, len(ids))]


class Race:
    """One round: history ops (creates at nearly the same instant) and the
    round table's commits."""

    def __init__(self) -> None:
        self.run = SynthRun(create=False)
        self.commits: list[Any] = []
        self.files: dict = {}
        self.t = 1_000

    def op(
        self,
        op_id: str,
        f: str,
        type: str,
        value: dict | None = None,
        *,
        error: dict | None = None,
        version: int | None = None,
        process: int = 0,
        done: dict | None = None,
    ) -> None:
        val = {"round": 0, "table": TABLE, **(value or {})}
        self.run.invoke(op_id, f, val, time=self.t, process=process)
        self.t += 1_000
        self.run.complete(
            op_id, type, time=self.t + 5_000_000, error=error, version=version, value={**val, **done} if done else None
        )

    def creates(self, outcomes: list[tuple[str, str, dict | None]]) -> None:
        for n, (op_id, type, err) in enumerate(outcomes):
            self.op(op_id, "create", type, error=err, process=n)

    def commit(self, actions: list[dict]) -> int:
        self.commits.append(actions)
        return len(self.commits) - 1

    def append(self, op_id: str, ids: list[int], type: str = "ok", committed: bool = True) -> None:
        self.op(op_id, "append", type, {"ids": ids, "via": "dataframe"})
        if committed:
            self.commit(append_commit(op_id, ids, len(self.commits), self.files))

    def build(self) -> tuple[Any, TransactionLog]:
        main = TransactionLog.from_commits([create_actions()])
        if self.commits:
            main.related = {
                TABLE: TransactionLog.from_commits(
                    [Commit(v, a) for v, a in enumerate(self.commits) if a is not None], self.files
                )
            }
        return self.run.history(), main


def one_winner() -> Race:
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "fail", E6), ("2.1", "fail", EXISTS)])
    r.commit(creation("0.1"))
    r.append("0.2", [10])
    r.append("1.2", [11])
    r.op("2.3", "read", "ok", {"via": "dataframe"}, done={"ids": [10, 11]})
    return r


def kinds(result) -> list[str]:
    return sorted(a.kind for a in result.anomalies)


def test_registered():
    assert CHECKERS[NAME] is check
    assert make_workload("create-race", 1).checkers == ("log-sanity", "create-race")


def test_one_winner_is_valid():
    res = check(*one_winner().build())
    assert res.verdict is Verdict.VALID, res.explanation
    assert res.stats["loser_classes"] == {"ProtocolChangedException (E6)": 1, "table already exists (definite)": 1}
    assert res.stats["raced_rounds"] == 1 and res.stats["findings"] == []


def test_two_winners_and_recreation_are_e6_violations():
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "ok", None), ("2.1", "fail", EXISTS)])
    r.commit(creation("0.1"))
    r.commit(creation("1.1", table_id="11111111-1111-1111-1111-111111111111"))
    res = check(*r.build())
    assert res.verdict is Verdict.INVALID
    assert kinds(res) == ["multiple-creators", "table-recreated"]
    multi = next(a for a in res.anomalies if a.kind == "multiple-creators")
    assert multi.claim == "E6" and sorted(multi.ops) == ["0.1", "1.1"]
    assert multi.details["committed"] == {"0.1": [0], "1.1": [1]}
    assert "11111111" in multi.explanation  # says the table id was overwritten


def test_sail_style_loser_commit_without_metadata_is_a_recreation():
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "ok", None)])
    r.commit(creation("0.1"))
    r.commit(creation("1.1", meta=False))  # "CREATE TABLE" commitInfo only
    res = check(*r.build())
    assert kinds(res) == ["multiple-creators", "table-recreated"]
    assert "no metaData action" in next(a for a in res.anomalies if a.kind == "table-recreated").explanation


def test_two_acknowledged_creates_one_commit_is_reported():
    """Both acknowledged, only one commit names either: the other committed
    nothing or had its version 0 overwritten (seen with Sail)."""
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "ok", None)])
    r.commit(creation("0.1"))
    res = check(*r.build())
    assert kinds(res) == ["multiple-creators"]
    assert "1.1 is named by no commit" in res.anomalies[0].explanation


def test_single_phantom_winner_and_failed_committer():
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "fail", EXISTS)])
    r.commit(creation("1.1"))  # the failed op's commit, the acknowledged one's is absent
    res = check(*r.build())
    assert kinds(res) == ["failed-but-committed", "phantom-create"]


@pytest.mark.parametrize("damage", ["unparseable", "no-metadata", "gap"])
def test_corrupt_race_log(damage):
    r = one_winner()
    if damage == "unparseable":
        r.commits[0] = "not json"  # a torn version-0 file
    elif damage == "no-metadata":
        r.commits[0] = [a for a in r.commits[0] if "metaData" not in a]
    else:
        r.commits[1] = None  # version 1 missing: a hole
    res = check(*r.build())
    assert res.verdict is Verdict.INVALID
    assert "race-log-corrupt" in kinds(res)
    assert all(a.claim in ("C4", "C7", "C12") for a in res.anomalies if a.kind == "race-log-corrupt")


def test_lost_append():
    r = one_winner()
    r.append("3.2", [12], committed=False)  # acknowledged, never in the log
    res = check(*r.build())
    assert kinds(res) == ["lost-append"]
    assert res.anomalies[0].rows == [12] and res.anomalies[0].claim == "C7"


def test_lost_create_when_no_table_exists():
    r = Race()
    r.creates([("0.1", "ok", None), ("1.1", "fail", E6)])
    res = check(*r.build())
    assert kinds(res) == ["lost-create"]


def test_read_of_a_state_that_never_existed():
    r = one_winner()
    r.op("3.3", "read", "ok", {"via": "dataframe"}, done={"ids": [11]})  # 11 without 10: no version
    res = check(*r.build())
    assert kinds(res) == ["read-state-never-existed"]


def test_other_loser_class_is_a_finding_not_a_violation():
    r = Race()
    r.creates(
        [
            ("0.1", "ok", None),
            ("1.1", "fail", {"class": "commit-conflict-unclassified", "raw": "Failed to commit transaction: 15"}),
        ]
    )
    r.commit(creation("0.1"))
    res = check(*r.build())
    assert res.verdict is Verdict.VALID
    assert res.stats["loser_classes"] == {"commit-conflict-unclassified": 1}
    assert any("ProtocolChangedException" in f and "commit-conflict-unclassified" in f for f in res.stats["findings"])


def test_no_rounds_is_unknown():
    res = check(SynthRun(create=False).history(), TransactionLog.from_commits([create_actions()]))
    assert res.verdict is Verdict.UNKNOWN


# ---------------------------------------------------------------------------
# the round schedule


def test_schedule_groups_slots_and_slows_down_when_they_fall_behind():
    w = CreateRaceWorkload(1)
    n0, s0 = w.schedule(0, 100.0)
    assert (n0, s0) == (0, 100.5)
    assert w.schedule(0, 100.2) == (0, 100.5)  # a second slot joins round 0
    n1, s1 = w.schedule(1, 100.9)
    assert n1 == 1 and s1 > 100.9
    # A slot finishing round 0 after round 1 began skips to round 2, which
    # starts no sooner than a (longer) period later.
    n2, s2 = w.schedule(1, s1 + 0.3)
    assert n2 == 2 and s2 - (s1 + 0.3) >= 0.5 * 1.5 - 1e-9


# ---------------------------------------------------------------------------
# real runs

RACE_WINDOW_S = 0.1


def _history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines() if line.strip()]


def _rounds(events: list[dict]) -> dict[str, dict[str, Any]]:
    """Per round table, from the history alone: create invoke walls, ok creates."""
    rounds: dict[str, dict[str, Any]] = defaultdict(lambda: {"walls": [], "ok": []})
    for e in events:
        if e["f"] == "create" and isinstance(e["process"], int):
            r = rounds[e["value"]["table"]]
            if e["type"] == "invoke":
                r["walls"].append(e["wall"])
            elif e["type"] == "ok":
                r["ok"].append(e["id"])
    return rounds


# Sail on SeaweedFS: with the other workload tests, every workload runs on
# SeaweedFS in CI; moto stays covered by the runs, nemeses and
# conformance tests.
ENGINES = [("delta-rs", "local", "5"), ("sail", "seaweedfs", "8")]


@functools.lru_cache(maxsize=64)
def _round_log(table_dir: str) -> TransactionLog:
    return read_log(table_dir)


ROUND_IN_TEXT = re.compile(r"Round table (\S+):")
# What a round won twice drags along: a create told it failed although it
# committed; an append or a read on a log a second creation rewrote.
RIDERS = frozenset({"failed-but-committed", "lost-append", "read-state-never-existed"})


def _won_twice(view: RunView, a: dict[str, Any]) -> str | None:
    """None when the history and the round's own log show the anomaly is
    a create race won twice: every op it names belongs to one round, two
    of whose creates were acknowledged or whose log holds a second
    creation; and the anomaly is what the log shows of that round."""
    tables = {(view.invokes.get(o) or {}).get("value", {}).get("table") for o in a.get("ops") or []}
    if not tables:
        m = ROUND_IN_TEXT.search(a["explanation"])
        tables = {m.group(1)} if m else set()
    if len(tables) != 1 or None in tables:
        return f"its ops are not of one round ({tables})"
    (t,) = tables
    creates = {i: e for i, e in view.invokes.items() if e["f"] == "create" and (e.get("value") or {}).get("table") == t}
    acked = sorted(i for i in creates if (view.completions.get(i) or {}).get("type") == "ok")
    log = _round_log(str(view.run_dir / "table" / t))
    named = {v: commit_op_id(c.commit_info) for v, c in log.commits.items()}
    recreations = [
        v for v, c in log.commits.items() if v > 0 and ("CREATE" in (c.operation or "").upper() or c.metadata)
    ]
    if len(acked) < 2 and not recreations:
        return f"round {t}: {len(acked)} create(s) acknowledged and no second creation in its log"
    ops = a.get("ops") or []
    kind = a["kind"]
    if kind == "multiple-creators":
        return None if len(ops) >= 2 and sorted(ops) == acked else f"it names {sorted(ops)}, the history {acked}"
    if kind == "table-recreated":
        v = min(versions_of(a), default=-1)
        if v not in recreations or ops[0] not in creates:
            return f"round {t}: version {v} is no second creation by a create of the round"
        return None
    if kind == "phantom-create":
        if ops[0] not in acked or ops[0] in named.values():
            return f"round {t}: {ops[0]} is not an acknowledged create named by no commit"
        if not any(named.values()):
            return f"round {t}: its commits name no op"
        return None
    if kind == "failed-but-committed":
        if (view.completions.get(ops[0]) or {}).get("type") != "fail" or ops[0] not in named.values():
            return f"round {t}: {ops[0]} did not fail, or no commit names it"
        return None
    return None if recreations else f"round {t}: no second creation in its log to lose or hide rows"


def _both_win_known(engine: str) -> Known:
    return Known(
        f"{engine}:E6:create-race-both-win",
        "E6",
        f"{engine}: creators racing at an empty path are both acknowledged, the later commit re-creating the "
        "table instead of failing",
        frozenset({"multiple-creators", "table-recreated", "phantom-create"} | RIDERS),
        _won_twice,
        always=False,
    )


@pytest.mark.integration
@pytest.mark.parametrize("engine,storage,limit", ENGINES)
def test_real_create_race(engine, storage, limit, results_dir):
    """Rounds really race, the checker reports exactly what the history
    shows, and spec E6 holds (one winner per round) or the run is invalid
    with the deviation named."""
    p = run_cli(
        "run",
        "--workload",
        "create-race",
        "--engine",
        engine,
        "--storage",
        storage,
        "--time-limit",
        limit,
        "--concurrency",
        "4",
        "--no-progress",
        "--results-dir",
        str(results_dir),
        timeout=240,
    )
    assert p.returncode in (0, 1), p.stderr[-2000:] + p.stdout[-2000:]
    run_dir = only_run_dir(results_dir)
    rounds = _rounds(_history(run_dir))
    raced = [
        t for t, r in rounds.items() if len(r["walls"]) >= 3 and max(r["walls"]) - min(r["walls"]) <= RACE_WINDOW_S
    ]
    assert len(raced) >= 2, {t: (len(r["walls"]), max(r["walls"]) - min(r["walls"])) for t, r in rounds.items()}
    # The race tables are in the run folder and were read as related logs.
    assert all((run_dir / "table" / t / "_delta_log").is_dir() for t, r in rounds.items() if r["ok"])
    res = next(c for c in load_results(run_dir)["checkers"] if c["checker"] == NAME)
    assert res["stats"]["rounds"] == len(rounds) and res["stats"]["raced_rounds"] >= len(raced)
    # Every round with 2+ acknowledged creates is reported as an E6 violation
    # naming exactly those ops, and no other round is.
    multi = {a["details"]["table"]: sorted(a["ops"]) for a in res["anomalies"] if a["kind"] == "multiple-creators"}
    assert multi == {t: sorted(r["ok"]) for t, r in rounds.items() if len(r["ok"]) >= 2}
    assert all(a["claim"] in ("E6", "C4", "C6", "C7", "C12") for a in res["anomalies"])
    assert (p.returncode == 1) == (res["verdict"] == "invalid")
    # Some creates lost: with 3+ writers in a round, somebody saw the table.
    assert res["stats"]["loser_classes"], "no create lost: the rounds did not race"
    assert_only_known(load_results(run_dir), run_dir, [_both_win_known(engine)])
    assert res["verdict"] == "valid" and p.returncode == 0, res["explanation"]


def test_recorded_loser_texts_are_definite_failures():
    """What losers said in real runs (delta-rs 1.6.6, Sail 0.7.2): the table
    was already there when they looked. Definite (fail), not a conflict: the
    checker counts them as correct losers, apart from E6."""
    from harness.core.history import ErrorClass
    from harness.engines.errors import classify_deltars_text, classify_spark_text

    rs = classify_deltars_text(
        "DeltaError", "Generic error: A Delta Lake table already exists at that location.", bases=["Exception"]
    )
    sail = classify_spark_text("AnalysisException", "Delta table already exists at path: file:///t/races/r0/")
    for c in (rs, sail):
        assert c.cls is ErrorClass.NOT_A_CONFLICT and c.definite, c
