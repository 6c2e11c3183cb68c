"""Check a run folder: load its history and table snapshot, run the
workload's checkers, write results.json and summary.txt.

Needs no engine and no storage server: `delta-jepsen check <run-dir>`.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers import CHECKERS, checker_fn
from checkers.base import Anomaly, CheckResult, Verdict, combine
from checkers.horizon import horizon, run_checkers
from harness.check.evidence import name_replacing_commits
from harness.check.report import REPORT_NAME, store_replaced_text, write_report
from harness.core.arenas import keep_arenas
from harness.core.contract import LOST_COMMIT_KINDS, Breach, outside_contract_text
from harness.core.contract import breaches as contract_breaches
from harness.core.errors import HarnessError
from harness.core.history import ErrorClass, History, error_class_label, load_history
from harness.core.laps import Laps
from harness.core.storage import RECOVERED_REPLACED_COMMITS
from harness.deltalog import read_log
from harness.deltalog.coordinated import load_coordinator
from harness.deltalog.copy import KEPT_DIR

EXIT_CODES = {Verdict.VALID: 0, Verdict.INVALID: 1, Verdict.UNKNOWN: 3}


@dataclass
class Report:
    run_dir: Path
    verdict: Verdict
    results: list[CheckResult]
    doc: dict[str, Any]
    summary: str
    # Seconds per stage of the check (also in results.json): where the time went.
    stage_s: dict[str, float] = field(default_factory=dict)
    # What was checked, for a caller that goes on with it. Held here, a long
    # run's millions of objects are not freed one by one before check_run
    # returns (2 s at 100k commits), but when the caller lets go.
    history: History | None = field(default=None, repr=False)
    log: Any = field(default=None, repr=False)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def _history_stats(history: History, run: dict[str, Any]) -> dict[str, Any]:
    ops = history.client_ops()
    # One pass: a long run has millions of ops, and this runs after the
    # checkers, with nothing else left to overlap it.
    counts: Counter[str] = Counter()
    fs: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    by_f: dict[str, Counter] = {}
    # Conflict rate: of the ops that commit (everything but reads), the share
    # that failed because of a concurrent commit (E1-E6 or unclassified).
    writes = conflicts = 0
    faults = []  # ops the harness did not run as the workload says
    for op in ops:
        f, err = op.f, op.error
        write = f != "read"
        counts[op.type] += 1
        fs[f] += 1
        writes += write
        if err is not None:
            cls = err.cls
            classes[cls.value] += 1
            by_f.setdefault(f, Counter())[cls.value] += 1
            conflicts += write and cls.is_conflict
            if cls is ErrorClass.HARNESS_FAULT:
                faults.append({"op": op.id, "f": f, "process": op.process, "error": err.raw})
    elapsed = run.get("elapsed")
    if not elapsed and history.events:
        elapsed = (history.events[-1].time - history.events[0].time) / 1e9
    done = counts["ok"] + counts["fail"] + counts["info"]
    return {
        "nemesis": _nemesis_stats(history),
        "events": len(history.events),
        "ops": len(ops),
        "ok": counts["ok"],
        "fail": counts["fail"],
        "info": counts["info"],
        "by_f": dict(fs),
        "error_classes": dict(classes),
        "error_classes_by_f": {f: dict(c) for f, c in sorted(by_f.items())},
        "write_ops": writes,
        "conflicts": conflicts,
        "conflict_rate": round(conflicts / writes, 4) if writes else None,
        "elapsed_s": round(elapsed or 0.0, 3),
        "ops_per_s": round(done / elapsed, 2) if elapsed else None,
        "truncated": history.truncated,
        "problems": [f"line {n}: {why}" for n, why in history.problems],
        "harness_faults": faults,
    }


def _nemesis_stats(history: History) -> dict[str, Any]:
    """The nemesis's ops (process "nemesis"): faults started per kind, how
    many could not be applied, and whether every started fault was stopped."""
    ops = [op for op in history.ops() if op.process == "nemesis"]
    started = Counter(op.f[len("start-") :] for op in ops if op.f.startswith("start-") and op.type == "ok")
    stopped = Counter(op.f[len("stop-") :] for op in ops if op.f.startswith("stop-") and op.type == "ok")
    failed = Counter(op.f for op in ops if op.type != "ok")
    return {
        "events": 2 * len(ops),
        "started": dict(started),
        "stopped": dict(stopped),
        "not_applied": dict(failed),
        "healed": any(op.f == "heal" and op.type == "ok" for op in ops),
    }


def check_run(run_dir: str | Path, write: bool = True) -> Report:
    # Loading a long run builds millions of small objects (events, actions,
    # row versions) and no reference cycles to speak of: the cyclic GC would
    # only rescan them over and over (a quarter of the time at 100k commits).
    global _frozen
    # The same millions of objects, freed in part as the check goes: CPython
    # would hand their arenas back and fault fresh pages in for the next
    # (at 1M commits, 3.7 million faults; 2.1 million with the arenas kept
    # and the check 0.87 to 0.92 of the time).
    keep_arenas()
    if _frozen:
        # What the last check left behind is collected now, cycles included.
        gc.unfreeze()
        gc.collect()
        _frozen = False
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _check_run(run_dir, write)
    finally:
        if gc_was_enabled:
            # Everything made since is young to the GC: its next collection
            # would scan all of it (over a second at 100k commits, right
            # after the verdict; the CLI exits next). Frozen, the Report's
            # objects are freed by their reference counts when let go, and
            # whatever cycles they are in by the next check_run.
            gc.freeze()
            _frozen = True
            gc.enable()


_frozen = False  # check_run froze the GC's objects when it returned


# Run folders written before spec.json recorded "related_tables":
# create-race was the one workload that wrote tables beside its own.
_RELATED_TABLES_BEFORE_RECORDED = {"create-race": ("races/*",)}


def _related_logs(table_dir: Path, spec: dict[str, Any], coordinator: dict[str, Any] | None) -> dict[str, Any]:
    """The logs of the other tables the run's workload wrote inside its table
    folder (the `related_tables` globs spec.json records, e.g. create-race's
    "races/*")."""
    globs = spec.get("related_tables")
    if not isinstance(globs, list):
        workload = (spec.get("spec") or {}).get("workload") if isinstance(spec.get("spec"), dict) else None
        globs = _RELATED_TABLES_BEFORE_RECORDED.get(workload, ())
    return {
        p.relative_to(table_dir).as_posix(): read_log(str(p), coordinator=coordinator)
        for g in globs
        if isinstance(g, str)
        for p in sorted(table_dir.glob(g))
        if (p / "_delta_log").is_dir()
    }


def _check_run(run_dir: str | Path, write: bool) -> Report:
    run_dir = Path(run_dir)
    hist_path = run_dir / "history.jsonl"
    if not hist_path.is_file():
        raise HarnessError(f"{run_dir} is not a run folder (no history.jsonl)")
    try:
        spec = json.loads((run_dir / "spec.json").read_text())
    except (OSError, ValueError) as e:
        raise HarnessError(f"{run_dir}/spec.json unreadable: {e}") from None
    run = {}
    if (run_dir / "run.json").is_file():
        try:
            run = json.loads((run_dir / "run.json").read_text())
        except ValueError:
            run = {}
    names = spec.get("checkers") or list(CHECKERS)
    for name in names:
        checker_fn(name)  # registered, or one of your own that loads: else one line, exit 2

    t0 = time.monotonic()
    laps = Laps()
    lap, stage_s = laps.lap, laps.seconds
    # The checkers replay every data file in log order: decoding can start
    # while the log is still being parsed, and goes on while the history
    # is loaded.
    coordinator = load_coordinator(run_dir)
    log = read_log(str(run_dir / "table"), prefetch_data=True, coordinator=coordinator, kept=run_dir / KEPT_DIR)
    log.related = _related_logs(run_dir / "table", spec, coordinator)
    lap("read log")
    history = load_history(hist_path)
    lap("load history")
    no_evidence = _no_evidence(run, log)
    if no_evidence:
        # An empty history or log would pass some checkers vacuously
        # ("all 0 rows distinct"), and no evidence is never "valid".
        results = [CheckResult(name, Verdict.UNKNOWN, no_evidence) for name in names]
    else:
        results = run_checkers(history, log, names, timings=stage_s)
        laps.restart()
    log_horizon = horizon(log)
    _undecodable_rows_are_no_evidence(results, log)
    name_replacing_commits(run_dir, history, log, results)
    breaches = contract_breaches(spec.get("spec") if isinstance(spec.get("spec"), dict) else {})
    _mark_outside_contract(results, breaches)
    store = run.get("store_self_check") if isinstance(run.get("store_self_check"), dict) else None
    protocols = spec.get("commit_protocols") if isinstance(spec.get("commit_protocols"), dict) else {}
    not_relying = _not_relying_on_put_if_absent(protocols)
    not_coordinated = _not_relying_on_dynamodb_conditional_update(protocols)
    ignore = (_PUT_IF_ABSENT_PROPERTIES if not_relying else ()) + (_COORDINATOR_PROPERTIES if not_coordinated else ())
    excused = _store_failures_explain(results, store, ignore=ignore)
    replaced = _store_replaced_commits(run_dir, run)
    replaced_why_not = _replacements_not_the_stores(not_relying, breaches)
    replaced_excused = 0 if replaced_why_not else _store_replacements_explain(results, replaced)
    verdict = combine([r.verdict for r in results])
    corrupt = [p for p in history.problems if p[1] != "truncated last line"]
    if corrupt and verdict is Verdict.VALID:
        verdict = Verdict.UNKNOWN  # lines we could not read may hold anything
    hstats = _history_stats(history, run)
    if hstats["harness_faults"] and verdict is Verdict.VALID:
        verdict = Verdict.UNKNOWN  # the harness did not run those ops as the workload says
    doc = {
        "verdict": verdict.value,
        "run": run,
        "history": hstats,
        "log": {
            "versions": len(log.versions),
            "latest_version": log.latest_version,
            "isolation_levels": _isolation_levels(log),
            "problems": [p.__dict__ for p in log.problems],
            "horizon": (
                None
                if log_horizon is None
                else {
                    "last_judged": log_horizon.last,
                    "hole": log_horizon.hole,
                    "resumes": log_horizon.resumes,
                    "why": log_horizon.why,
                    "detail": log_horizon.detail,
                }
            ),
            "coordination": log.coordination.to_json() if log.coordination is not None else None,
        },
        "checkers": [r.to_json() for r in results],
        "repro": spec.get("repro"),
        "commit_protocols": spec.get("commit_protocols") or {},
        "contract": {
            "inside": not breaches,
            "outside": outside_contract_text(breaches),
            "breaches": [b.to_json() for b in breaches],
        },
        "store_self_check": (
            {
                **store,
                "anomalies_excused": excused,
                "engines_not_relying_on_put_if_absent": not_relying,
                "engines_not_relying_on_dynamodb_conditional_update": not_coordinated,
            }
            if store is not None
            else None
        ),
        "store_replaced_commits": (
            {**replaced, "anomalies_excused": replaced_excused, "not_excused_because": replaced_why_not}
            if replaced is not None
            else None
        ),
        "check_seconds": round(time.monotonic() - t0, 3),
        "stage_seconds": stage_s,
    }
    summary = render_summary(run_dir, verdict, results, hstats, doc, run)
    lap("verdict and summary")
    if write:
        graphs = write_anomaly_graphs(run_dir, results)
        if graphs:
            doc["anomaly_graphs"] = graphs
        _write_report(run_dir, doc, results, history, spec, run)
        (run_dir / "results.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
        (run_dir / "summary.txt").write_text(summary)
        lap("write results")  # after results.json is written: in the Report only
    return Report(run_dir, verdict, results, doc, summary, stage_s, history, log)


def _write_report(
    run_dir: Path,
    doc: dict[str, Any],
    results: list[CheckResult],
    history: History,
    spec: dict[str, Any],
    run: dict[str, Any],
) -> None:
    """report.html beside results.json. The page is a view of the verdict,
    never part of it: whatever goes wrong drawing it is one line of warning
    and a "report_error" in results.json, and the verdict and exit code stand."""
    t0 = time.monotonic()
    try:
        write_report(run_dir, doc=doc, results=results, history=history, spec=spec, run=run)
    except Exception as e:  # noqa: BLE001 - see the docstring
        doc["report_error"] = f"{type(e).__name__}: {e}"[:500]
        # A page left from an earlier check would show that check's verdict.
        (run_dir / REPORT_NAME).unlink(missing_ok=True)
        print(f"warning: {REPORT_NAME} not written: {doc['report_error']}", file=sys.stderr)
        return
    doc["report"] = REPORT_NAME
    doc["report_seconds"] = round(time.monotonic() - t0, 3)


# Checkers that judge no row of any data file.
_ROWLESS = frozenset({"log-sanity", "exception-classes"})


def _undecodable_rows_are_no_evidence(results: list[CheckResult], log: Any) -> None:
    """A data file (or deletion vector) the harness read but could not decode
    reads as no rows, so a checker may find rows "lost" that are in it: that
    is the harness's failure, not the engine's. Such findings are unknown,
    never invalid. (A file missing from the store is different: lost data,
    spec C7, and stays invalid.)"""
    bad = [p for p in log.problems if p.kind in ("data-file-unreadable", "deletion-vector-unreadable")]
    if not bad:
        return
    for r in results:
        if r.checker in _ROWLESS or r.verdict is not Verdict.INVALID:
            continue
        r.verdict = Verdict.UNKNOWN
        r.explanation = (
            f"Unknown: {len(bad)} data file(s) or deletion vector(s) could not be decoded "
            f"(e.g. {bad[0].detail[:200]}), and judged without their rows this checker found: "
            f"{r.explanation}"
        )


# What a store explains when a property of its self-check failed
# (harness/run/store_probe.py). A conditional PUT that is not atomic
# put-if-absent lets a racer's commit replace an acknowledged one: the
# replaced write is lost (C7), reads that saw it saw a state the log no longer
# has (C12), commits built on it replay against a different state (wrong
# totals, broken list links, lost updates), two creators both win version 0
# (E6), and log versions need not be one serial history (C4, C11). A commit
# coordinator's conditional DynamoDB update that lets two racers win, or
# stores what it was sent as another type, does the same to coordinated
# commits.
_PUT_IF_ABSENT_EXPLAINS = LOST_COMMIT_KINDS
# A GET or LIST that misses what was just written shows an older version.
_STALE_EXPLAINS = frozenset({"stale-read"})
STORE_EXPLAINS = {
    "put-if-absent": _PUT_IF_ABSENT_EXPLAINS,
    "if-none-match-on-overwrite": _PUT_IF_ABSENT_EXPLAINS,
    "read-after-write": _STALE_EXPLAINS,
    "list-after-put": _STALE_EXPLAINS,
    "dynamodb-conditional-update": _PUT_IF_ABSENT_EXPLAINS,
}


_PUT_IF_ABSENT_PROPERTIES = ("put-if-absent", "if-none-match-on-overwrite")
_COORDINATOR_PROPERTIES = ("dynamodb-conditional-update",)
# How spec.json's `commit_protocols` names delta-spark's coordinated commits.
_COORDINATED_COMMITS = "coordinated commits"


def _relies_on_coordinator(protocol: Any) -> bool:
    return _COORDINATED_COMMITS in str(protocol)


def _not_relying_on_put_if_absent(protocols: dict[str, Any]) -> list[str]:
    """The engines whose commit protocol (spec.json's `commit_protocols`)
    does not rest on the store's conditional PUT: delta-spark's
    S3SingleDriverLogStore (an existence check, then a plain PUT),
    S3DynamoDBLogStore, coordinated commits (a conditional DynamoDB update
    ratifies each version, whatever the text says of the store), a remote
    cluster's unknown LogStore. A store's broken put-if-absent explains none
    of their losses."""
    return sorted(
        engine
        for engine, p in protocols.items()
        if _relies_on_coordinator(p) or ("put-if-absent" not in str(p) and "If-None-Match" not in str(p))
    )


def _not_relying_on_dynamodb_conditional_update(protocols: dict[str, Any]) -> list[str]:
    """The engines whose commits no commit coordinator ratifies: a failed
    `dynamodb-conditional-update` explains none of their losses."""
    return sorted(engine for engine, p in protocols.items() if not _relies_on_coordinator(p))


def _as_named(a: Anomaly) -> str:
    """An anomaly's title as it reads mid-sentence ("this lost write")."""
    return f"{a.title[:1].lower()}{a.title[1:]}"


def _settle(r: CheckResult, explained: int, unknown: str, partial: str) -> None:
    """A checker `explained` of whose anomalies the store explains: unknown
    for the engine when that is all of them (`unknown` leads its
    explanation), else `partial` is added to it."""
    if explained == len(r.anomalies):
        r.verdict = Verdict.UNKNOWN
        r.explanation = f"{unknown} Found: {r.explanation}"
    else:
        r.explanation += f" ({partial})"


def _store_replaced_commits(run_dir: Path, run: dict[str, Any]) -> dict[str, Any] | None:
    """run.json's `store_replaced_commits`; for a run whose harness was
    killed, what `check` read of the store's log when it recovered the table."""
    got = run.get("store_replaced_commits")
    if isinstance(got, dict):
        return got
    try:
        got = json.loads((run_dir / RECOVERED_REPLACED_COMMITS).read_text())
    except (OSError, ValueError):
        return None
    return got if isinstance(got, dict) else None


def _replacements_not_the_stores(not_relying: list[str], breaches: list[Breach]) -> str:
    """Why a commit file the store's log shows written twice need not be the
    store's fault ("" when it must be): the filer logs the two writes, not
    whether the second one asked for put-if-absent."""
    if not_relying:
        return (
            f"the commit protocol of {', '.join(not_relying)} does not rest on put-if-absent, so a commit lost "
            "there stays the engine's"
        )
    if any(b.explains & LOST_COMMIT_KINDS for b in breaches):
        return "the run is outside the contract in a way that explains lost commits (see the contract line)"
    return ""


def _store_replacements_explain(results: list[CheckResult], replaced: dict[str, Any] | None) -> int:
    """The commit files the store's own log shows a second write replacing
    (run.json's `store_replaced_commits`), where every engine of the run
    commits by put-if-absent and nothing in the run strips it (the caller
    decides): each replacement lost one commit, the store's doing.

    A lost commit told one of those versions is the store's. A lost write
    told no version (Sail reports none) may be: while the replacements not
    so claimed outnumber them none is surely the engine's, so they are the
    store's as far as the evidence goes; past that count at least one is
    the engine's, and they all stay. A checker whose every anomaly is the
    store's becomes unknown for the engine. Returns how many were excused."""
    versions = set((replaced or {}).get("versions") or [])
    if not versions:
        return 0
    listed = ", ".join(map(str, sorted(versions)))
    told: list[tuple[Anomaly, list[int]]] = []
    untold: list[Anomaly] = []
    for r in results:
        if r.verdict is not Verdict.INVALID:
            continue
        for a in r.anomalies:
            if a.kind not in LOST_COMMIT_KINDS:
                continue
            if at := sorted(versions & set(a.versions or [])):
                told.append((a, at))
            elif a.kind == "lost-write" and not a.versions:
                untold.append(a)
    for a, at in told:
        a.explanation = (
            f"The store's own log shows the commit file of version {', '.join(map(str, at))} written twice, the "
            f"second write replacing the first, which no put-if-absent allows: this {_as_named(a)} is the "
            f"store's, not the engine's. {a.explanation}"
        )
        a.details["store_replaced_commit"] = at
    # Each replacing write lost one commit: a version written three times lost two.
    events = Counter(r.get("version") for r in (replaced or {}).get("replacements") or [])
    left = Counter({v: max(1, events[v]) for v in versions})
    replacing = sum(left.values())
    for _, at in told:
        left[at[0]] -= 1
    spare = sum(n for n in left.values() if n > 0)
    if len(untold) > spare:
        untold = []
    for a in untold:
        a.explanation = (
            f"The store's own log shows {replacing} write(s) replacing a commit file already there (version(s) "
            f"{listed}), which no put-if-absent allows, and the engine told this op no "
            f"version: its commit may be one the store replaced, so this {_as_named(a)} is not shown to be the "
            f"engine's. {a.explanation}"
        )
        a.details["store_replaced_commit"] = sorted(versions)
    excused_ids = {id(a) for a, _ in told} | {id(a) for a in untold}
    for r in results:
        mine = [a for a in r.anomalies if id(a) in excused_ids]
        if mine:
            _settle(
                r,
                len(mine),
                f"Unknown for the engine: the store's own log shows commit files replaced (version(s) {listed}), "
                f"and each of the {len(mine)} anomalies found is a commit lost there.",
                f"{len(mine)} of the {len(r.anomalies)} anomalies are commits the store's own log shows "
                "replaced; the others are the engine's.",
            )
    return len(excused_ids)


def _store_failures_explain(
    results: list[CheckResult], store: dict[str, Any] | None, ignore: tuple[str, ...] = ()
) -> int:
    """When the store failed its self-check, each anomaly such a store
    explains is said to be the store's, and a checker whose every anomaly is
    so becomes unknown for the engine, not invalid. Returns how many
    anomalies were so explained. A store that passed changes nothing, and
    neither do the failed properties named in `ignore` (those no engine of
    the run relied on)."""
    failures = (store or {}).get("failures") or {}
    if not isinstance(failures, dict) or not failures:
        return 0
    # Property names carry the racers for several levels: put-if-absent@8.
    why: dict[str, str] = {}
    for prop, failure in failures.items():
        base = str(prop).split("@")[0]
        if base in ignore:
            continue
        for kind in STORE_EXPLAINS.get(base, ()):
            why.setdefault(kind, f"{prop}: {failure}")
    excused = 0
    for r in results:
        if r.verdict is not Verdict.INVALID or not r.anomalies:
            continue
        mine = [a for a in r.anomalies if a.kind in why]
        for a in mine:
            reason = why[a.kind]
            a.explanation = (
                f"The store failed its self-check ({reason}): this {_as_named(a)} is the store's, not the "
                f"engine's. {a.explanation}"
            )
            a.details["store_self_check"] = reason
        excused += len(mine)
        if mine:
            _settle(
                r,
                len(mine),
                f"Unknown for the engine: the store failed its self-check ({why[mine[0].kind]}), and "
                f"each of the {len(mine)} anomalies found is one such a store explains.",
                f"{len(mine)} of the {len(r.anomalies)} anomalies the store's failed self-check explains; "
                "the others are the engine's.",
            )
    return excused


def _mark_outside_contract(results: list[CheckResult], breaches: list[Breach]) -> None:
    """Each anomaly a breach of the run's contract explains says so, first
    thing: the guarantee did not hold (the verdict stands), but not because
    of an engine defect."""
    if not breaches:
        return
    for r in results:
        for a in r.anomalies:
            why = [b.why for b in breaches if a.kind in b.explains]
            if not why:
                continue
            a.details["outside_contract"] = "; ".join(why)
            a.explanation = f"Outside contract ({'; '.join(why)}): {a.explanation}"


def _no_evidence(run: dict[str, Any], log: Any) -> str:
    """Why there is nothing to check the history against, or ""."""
    if run.get("refused"):
        return "The engine refused to create the table; there is nothing to check."
    if log.latest_version is None:
        # The harness copies the table into the run folder at the end; a
        # harness killed before that (or a table in an in-memory store)
        # leaves no log, which says nothing about what the engine committed.
        return (
            "No transaction log in the run folder (table/_delta_log has no commits): without the "
            "table's log nothing the history claims can be checked."
        )
    return ""


def coordination_line(co: dict[str, Any]) -> str:
    """One line on a coordinated-commits table: what the coordinator
    ratified beyond the backfilled commits, and the losers' staged files."""
    line = f"coordinated commits ({co.get('coordinator')}): "
    if not co.get("state_kept"):
        undecided = co.get("undecided") or []
        return line + (
            f"no coordinator state kept; {len(undecided)} staged commit(s) past the last backfilled version "
            "are undecided"
            if undecided
            else "no coordinator state kept; every staged commit is backfilled or older"
        )
    unb = co.get("unbackfilled") or []
    line += f"ratified up to version {co.get('ratified_version')}"
    line += f"; {len(unb)} read from staged files, not backfilled ({unb[:5]})" if unb else "; all backfilled"
    if co.get("orphans"):
        line += f"; {co['orphans']} losers' staged file(s) ignored"
    return line


def _isolation_levels(log: Any) -> list[str]:
    """The delta.isolationLevel values the table carried, in log order, as the
    log says (not as the run asked): "(none)" where it carried none."""
    levels: list[str] = []
    for v in log.versions:
        try:
            level = log.property_at(v, "delta.isolationLevel") or "(none)"
        except Exception:  # noqa: BLE001 - a broken metaData is log-sanity's to report
            continue
        if not levels or levels[-1] != level:
            levels.append(level)
    return levels


def write_anomaly_graphs(run_dir: Path, results: list[CheckResult]) -> list[str]:
    """One DOT file per anomaly that carries a graph (and SVG where Graphviz's
    `dot` is installed), under anomalies/."""
    import shutil
    import subprocess

    out_dir = run_dir / "anomalies"
    written = []
    dot_bin = shutil.which("dot")
    for r in results:
        for n, a in enumerate(r.anomalies, start=1):
            dot = a.details.get("dot") if a.details else None
            if not dot:
                continue
            out_dir.mkdir(exist_ok=True)
            path = out_dir / f"{r.checker}-{n:03d}-{a.kind}.dot"
            path.write_text(dot)
            written.append(str(path.relative_to(run_dir)))
            if dot_bin:
                try:
                    subprocess.run(
                        [dot_bin, "-Tsvg", str(path), "-o", str(path.with_suffix(".svg"))],
                        timeout=30,
                        check=False,
                        capture_output=True,
                    )
                except subprocess.TimeoutExpired:
                    pass
    return written


def render_summary(
    run_dir: Path,
    verdict: Verdict,
    results: list[CheckResult],
    h: dict[str, Any],
    doc: dict[str, Any],
    run: dict[str, Any],
) -> str:
    lines = [f"verdict: {verdict.value.upper()}   ({run_dir})"]
    outside = (doc.get("contract") or {}).get("outside")
    if outside:
        lines[0] = f"verdict: {verdict.value.upper()} ({outside})   ({run_dir})"
    store = doc.get("store_self_check")
    if isinstance(store, dict):
        line = f"store self-check: {store.get('summary', '?')}"
        if store.get("passed") is False:
            line += (
                f"; {store.get('anomalies_excused', 0)} anomalies such a store explains are reported "
                "as the store's (unknown for the engine)"
            )
            failed = {str(prop).split("@")[0] for prop in store.get("failures") or {}}
            for props, key, what in (
                (_PUT_IF_ABSENT_PROPERTIES, "engines_not_relying_on_put_if_absent", "the store's put-if-absent"),
                (
                    _COORDINATOR_PROPERTIES,
                    "engines_not_relying_on_dynamodb_conditional_update",
                    "a commit coordinator's conditional DynamoDB update",
                ),
            ):
                if store.get(key) and failed & set(props):
                    line += (
                        "; the commit protocol of "
                        + ", ".join(store[key])
                        + f" does not rest on {what}, so a lost commit stays the engine's"
                    )
        lines.append(line)
    if replaced := store_replaced_text(doc):
        lines.append(replaced)
    if run.get("interrupted"):
        lines.append("the run was interrupted (SIGINT/SIGTERM): this checks the partial history")
    if run.get("refused"):
        lines.append(
            "the engine refused to create the table, so nothing was tested: " + run["refused"].splitlines()[0][:300]
        )
    if h["truncated"]:
        lines.append("the history ends in a truncated line: checked as far as it goes")
    for p in h["problems"]:
        if "truncated" not in p:
            lines.append(f"history problem: {p}")
    for f in h.get("harness_faults", [])[:5]:
        lines.append(
            f"harness fault (a bug in delta-jepsen, not the engine's error) in op {f['op']} ({f['f']}, "
            f"process {f['process']}): {f['error'][:300]}"
        )
    if len(h.get("harness_faults", [])) > 5:
        lines.append(f"... {len(h['harness_faults']) - 5} more harness faults (results.json)")
    rate = f"{h['ops_per_s']:.1f} ops/s" if h["ops_per_s"] else "n/a ops/s"
    lines.append(
        f"ops: {h['ops']} ({h['ok']} ok, {h['fail']} fail, {h['info']} info) in {h['elapsed_s']:.1f}s, {rate}; "
        f"versions committed: {doc['log']['latest_version'] if doc['log']['latest_version'] is not None else 'none'}"
    )
    if doc["log"].get("horizon"):
        lines.append(f"log horizon: {doc['log']['horizon']['why']}")
    nem = h.get("nemesis") or {}
    if nem.get("events"):
        parts = [
            f"{k} x{v}" + (f" ({v - nem['stopped'].get(k, 0)} not stopped)" if nem["stopped"].get(k, 0) < v else "")
            for k, v in sorted(nem["started"].items())
        ]
        line = "nemesis: " + (", ".join(parts) or "no fault applied")
        if nem["not_applied"]:
            line += "; not applied: " + ", ".join(f"{k} x{v}" for k, v in sorted(nem["not_applied"].items()))
        lines.append(line + ("; healed before the final phase" if nem["healed"] else "; NOT healed"))
    for engine, protocol in (doc.get("commit_protocols") or {}).items():
        lines.append(f"commit protocol: {engine}: {protocol}")
    if doc["log"].get("coordination"):
        lines.append(coordination_line(doc["log"]["coordination"]))
    if doc["log"].get("isolation_levels"):
        lines.append("table isolation level (from the log): " + " -> ".join(doc["log"]["isolation_levels"]))
    findings = next((r.stats.get("deviations") for r in results if r.checker == "exception-classes"), None)
    if findings:
        lines.append(
            f"exception-class findings (spec E-list; not safety, --strict-exceptions fails on them): {len(findings)}"
        )
        for f in findings[:10]:
            lines.append(f"  {f['kind']} ({f['claim']}): {f['explanation'][:240]}")
        if len(findings) > 10:
            lines.append(f"  ... {len(findings) - 10} more in results.json (checker exception-classes)")
    if h["error_classes"]:
        counts = sorted(h["error_classes"].items())
        lines.append("errors: " + ", ".join(f"{error_class_label(k)} x{v}" for k, v in counts))
        for f, classes in h["error_classes_by_f"].items():
            lines.append(f"  {f}: " + ", ".join(f"{error_class_label(k)} x{v}" for k, v in sorted(classes.items())))
    unsupported = {f: c["unsupported"] for f, c in h["error_classes_by_f"].items() if c.get("unsupported")}
    if unsupported:
        lines.append(
            "not tested, the engine cannot run them (spec claims about them stay unchecked): "
            + ", ".join(f"{f} x{n}" for f, n in sorted(unsupported.items()))
        )
    if h["write_ops"]:
        lines.append(
            f"conflict rate: {h['conflicts']}/{h['write_ops']} write ops "
            f"({100 * h['conflict_rate']:.1f}%) failed on a concurrent commit"
        )
    width = max([16, *(len(r.checker) for r in results)])
    number = 0  # anomalies are numbered across checkers, as `reproduce --anomaly N` counts them
    for r in results:
        lines.append(f"  {r.checker:<{width}} {r.verdict.value:<8} {r.explanation}")
        for i, a in enumerate(r.anomalies[:5]):
            spec = f", spec {a.claim}" if a.claim else ""
            lines.append(f"      - #{number + i + 1} {a.title} [{a.kind}{spec}]: {a.explanation}")
        number += len(r.anomalies)
        if len(r.anomalies) > 5:
            lines.append(f"      ... {len(r.anomalies) - 5} more in results.json")
    if doc.get("repro"):
        lines.append(f"re-run: {doc['repro']}")
    lines.append(f"re-check: delta-jepsen check {run_dir}")
    if number:
        lines.append(
            f"reproduce: delta-jepsen reproduce {run_dir} --anomaly N   (N = 1..{number}, as numbered above; "
            "--list names them all)"
        )
    return "\n".join(lines) + "\n"
