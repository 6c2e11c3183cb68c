"""Property tests: random *correct* executions of a concurrent append workload
are VALID for every checker; one injected anomaly makes the matching checker
INVALID with the right kind.

The model. Each of a few slots runs ops one after another; an op is an append
(1-4 fresh ids) or a read. An op occupies [start, end] in time; ops of
different slots interleave. A committed append commits at one instant strictly
inside its [start, end] (or any time after its start if it never completed),
and versions are given in commit-instant order. Appends complete ok
(committed), fail (not committed) or info (committed or not); after an info
op the slot continues as a new process, as the runner does. A read returns
the rows of some version committed before its end and no older than any
commit acknowledged (ok) before its start. A final read may follow
quiescence. All times are integers; ties between events are allowed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from checkers import CHECKERS, atomicity, duplicates, durability, read_validity
from checkers.base import Verdict
from checkers.horizon import run_checkers
from harness.core.history import FAIL, INFO, OK
from tests.synth import SynthRun
from workloads.append import AppendWorkload


def row_id(slot: int, seq: int, j: int) -> int:
    # As workloads.append.row_id (not imported: that pulls in the engines).
    return slot * 10**12 + seq * 1000 + j


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@dataclass
class MOp:
    id: str
    process: int
    f: str  # "append" | "read"
    start: int
    end: int | None  # None: never completed
    type: str  # ok | fail | info
    ids: list[int] = field(default_factory=list)  # append: rows written
    commit_at: int | None = None  # append: commit instant, None if not committed
    version: int | None = None  # append: commit version; read: version read
    report_version: bool = False  # the engine tells the version (delta-rs)
    read_ids: list[int] | None = None
    final: bool = False
    hint: int | None = None  # read: which allowed version (None: the newest)


@dataclass
class Execution:
    ops: list[MOp]
    tag_commits: bool  # commitInfo carries dj.op (delta-rs)
    # Filled by settle(): versions in order, op id -> version.
    order: list[MOp] = field(default_factory=list)

    @property
    def end_time(self) -> int:
        return max([o.end or o.start for o in self.ops], default=0)

    def settle(self) -> None:
        """Give commits their versions (commit-instant order; ties by op
        order) and reads their rows."""
        committed = [o for o in self.ops if o.f == "append" and o.commit_at is not None]
        pos = {o.id: i for i, o in enumerate(self.ops)}
        self.order = sorted(committed, key=lambda o: (o.commit_at, pos[o.id]))
        for v, o in enumerate(self.order, start=1):
            o.version = v
        # By end time: a read's floor depends on the reads that ended before it.
        for r in sorted(self.ops, key=lambda o: o.end if o.end is not None else 1 << 60):
            if r.f == "read" and r.type == OK:
                allowed = self.allowed_versions(r)
                assert allowed, r
                r.version = allowed[-1] if r.hint is None else allowed[r.hint % len(allowed)]
                r.read_ids = sorted(self.state(r.version))

    def state(self, version: int) -> set[int]:
        return {i for o in self.order[:version] for i in o.ids}

    def floor(self, read: MOp) -> int:
        """The newest version acknowledged ok, or seen by a read that ended,
        before the read began (reads follow real time, spec C2/C12)."""
        acked = max(
            (o.version for o in self.order if o.type == OK and o.end is not None and o.end < read.start), default=0
        )
        seen = max(
            (
                o.version
                for o in self.ops
                if o.f == "read" and o.type == OK and o.version is not None and o.end is not None and o.end < read.start
            ),
            default=0,
        )
        return max(acked, seen)

    def allowed_versions(self, read: MOp) -> list[int]:
        lo = self.floor(read)
        committed_before_end = [o.version for o in self.order if o.commit_at < read.end]
        return [v for v in range(lo, max(committed_before_end, default=0) + 1)]

    def build(self) -> SynthRun:
        run = SynthRun()
        for o in self.ops:
            if o.f == "append":
                run.append(
                    o.id,
                    o.ids,
                    start=o.start,
                    end=o.end,
                    type=o.type,
                    process=o.process,
                    version=o.version if o.report_version and o.type == OK else None,
                )
            else:
                run.read(
                    o.id,
                    o.read_ids,
                    start=o.start,
                    end=o.end,
                    type=o.type,
                    process=o.process,
                    final=o.final,
                    version=o.version if o.report_version and o.type == OK else None,
                )
        for o in self.order:
            run.commit_op(o.id, o.ids, tag=self.tag_commits)
        return run


@st.composite
def executions(draw, max_ops: int = 10) -> Execution:
    n_slots = draw(st.integers(1, 3))
    n_ops = draw(st.integers(0, max_ops))
    clock = [0] * n_slots  # when each slot is free again
    proc = list(range(n_slots))  # current process of each slot
    seq = [0] * n_slots
    next_process = n_slots
    ops: list[MOp] = []
    for _ in range(n_ops):
        s = draw(st.integers(0, n_slots - 1))
        if clock[s] is None:  # slot's process hung forever
            continue
        start = clock[s] + draw(st.integers(0, 3))
        dur = draw(st.integers(1, 4)) * 2
        end = start + dur
        seq[s] += 1
        op_id = f"{proc[s]}.{seq[s]}"
        report = draw(st.booleans())
        if draw(st.integers(0, 3)) == 0:  # a read
            rtype = draw(st.sampled_from([OK, OK, OK, FAIL]))
            hint = draw(st.integers(0, max_ops))  # settle() picks an allowed version
            ops.append(MOp(op_id, proc[s], "read", start, end, rtype, hint=hint, report_version=report))
            clock[s] = end
            continue
        n = draw(st.integers(1, 4))
        ids = [row_id(s + 1, seq[s] + 100 * proc[s], j) for j in range(n)]
        otype = draw(st.sampled_from([OK, OK, OK, FAIL, INFO]))
        op = MOp(op_id, proc[s], "append", start, end, otype, ids=ids, report_version=report)
        committed = otype == OK or (otype == INFO and draw(st.booleans()))
        if otype == INFO and draw(st.integers(0, 3)) == 0:
            op.end = None  # never completed; may commit any time after start
            clock[s] = None
        if committed:
            hi = (op.end - 1) if op.end is not None else start + 20
            op.commit_at = draw(st.integers(start + 1, hi))
        ops.append(op)
        if clock[s] is not None:
            clock[s] = end
        if otype == INFO and clock[s] is not None:
            proc[s] = next_process  # the runner retires the process
            next_process += 1
            seq[s] = 0
    ex = Execution(ops, tag_commits=draw(st.booleans()))
    if draw(st.booleans()):
        t = max([c for c in clock if c is not None] + [o.commit_at or 0 for o in ops], default=0) + 1
        ex.ops.append(
            MOp(f"{next_process}.1", next_process, "read", t, t + 2, OK, report_version=draw(st.booleans()), final=True)
        )
    ex.settle()
    return ex


def quiesced_append(ex: Execution, n_ids: int = 1) -> MOp:
    """Append an ok op after everything else (keeps the execution correct)."""
    p = 1000 + len(ex.ops)
    t = max([o.end or 0 for o in ex.ops] + [o.commit_at or 0 for o in ex.ops], default=0) + 1
    op = MOp(f"{p}.1", p, "append", t, t + 4, OK, ids=[row_id(999, p, j) for j in range(n_ids)], commit_at=t + 2)
    ex.ops.append(op)
    return op


def quiesced_read(ex: Execution) -> MOp:
    p = 1000 + len(ex.ops)
    t = max([o.end or 0 for o in ex.ops] + [o.commit_at or 0 for o in ex.ops], default=0) + 1
    op = MOp(f"{p}.1", p, "read", t, t + 2, OK)
    ex.ops.append(op)
    return op


def check_all(ex: Execution) -> dict:
    run = ex.build()
    history, log = run.build()
    note("history:\n" + "".join(run.history_lines()))
    note(f"commits: {[(o.version, o.id, o.ids) for o in ex.order]}")
    # The append workload's checkers: this model is an append workload.
    return {name: CHECKERS[name](history, log) for name in AppendWorkload.checkers}


def kinds(res) -> list[str]:
    return [a.kind for a in res.anomalies]


# --------------------------------------------------------------------------


@SETTINGS
@given(executions())
def test_correct_executions_are_valid(ex):
    results = check_all(ex)
    for name, res in results.items():
        assert res.verdict is Verdict.VALID, (name, res.explanation)


@SETTINGS
@given(executions(), st.data())
def test_lost_write_is_found(ex, data):
    if not any(o.type == OK and o.commit_at is not None for o in ex.ops):
        quiesced_append(ex)
        ex.settle()
    victim = data.draw(st.sampled_from([o for o in ex.order if o.type == OK]))
    run = ex.build()
    # The commit stays (no gap) but its data file is not in it.
    run.commit(version=victim.version, op=victim.id if ex.tag_commits else None)
    history, log = run.build()
    note("".join(run.history_lines()))
    res = durability.check(history, log)
    assert res.verdict is Verdict.INVALID
    assert [a.ops for a in res.anomalies if a.kind == "lost-write"] == [[victim.id]]
    assert CHECKERS["log-sanity"](history, log).verdict is Verdict.VALID


@SETTINGS
@given(executions(), st.data())
def test_partial_op_is_found(ex, data):
    if not any(o.commit_at is not None and len(o.ids) >= 2 for o in ex.ops):
        quiesced_append(ex, n_ids=2)
        ex.settle()
    victim = data.draw(st.sampled_from([o for o in ex.order if len(o.ids) >= 2]))
    dropped = data.draw(st.sampled_from(victim.ids))
    run = ex.build()
    run.commit(
        [(i, victim.id) for i in victim.ids if i != dropped],
        version=victim.version,
        op=victim.id if ex.tag_commits else None,
    )
    history, log = run.build()
    res = atomicity.check(history, log)
    assert res.verdict is Verdict.INVALID
    partial = [a for a in res.anomalies if a.kind == "partial-op"]
    assert [(a.ops, a.rows, a.versions) for a in partial] == [([victim.id], [dropped], [victim.version])]


@SETTINGS
@given(executions(), st.data())
def test_duplicate_application_is_found(ex, data):
    if not ex.order:
        quiesced_append(ex)
        ex.settle()
    victim = data.draw(st.sampled_from(ex.order))
    run = ex.build()
    again = run.commit_op(victim.id, victim.ids, tag=ex.tag_commits)  # a retried commit
    history, log = run.build()
    res = duplicates.check(history, log)
    assert res.verdict is Verdict.INVALID
    dup = [a for a in res.anomalies if a.kind == "duplicate-application"]
    assert [(a.ops, a.versions) for a in dup] == [([victim.id], [victim.version, again])]
    assert "duplicate-commit" not in kinds(res)  # the same finding, reported once
    # Other checkers: the op is still whole and at one version per application.
    assert atomicity.check(history, log).verdict is Verdict.VALID


def _reads_with(ex: Execution, pred) -> list[MOp]:
    return [o for o in ex.ops if o.f == "read" and o.type == OK and pred(o)]


@SETTINGS
@given(executions(), st.data())
def test_state_never_existed_is_found(ex, data):
    # A read of version v >= 2 that lacks a row added at an older version
    # 1..v-1 equals no version: states grow by whole, disjoint commits.
    if not _reads_with(ex, lambda r: r.version >= 2):
        quiesced_append(ex)
        quiesced_append(ex)
        quiesced_read(ex)
        ex.settle()
    read = data.draw(st.sampled_from(_reads_with(ex, lambda r: r.version >= 2)))
    older = ex.order[: read.version - 1]
    dropped = data.draw(st.sampled_from([i for o in older for i in o.ids]))
    read.read_ids = [i for i in read.read_ids if i != dropped]
    keep_version = data.draw(st.booleans())
    read.report_version = keep_version
    history, log = ex.build().build()
    res = read_validity.check(history, log)
    assert res.verdict is Verdict.INVALID
    # Rows no version ever held: the state never existed, whatever version
    # the engine named (a mismatch is rows of another version).
    want = "state-never-existed"
    found = [a for a in res.anomalies if a.kind == want]
    assert [a.ops for a in found] == [[read.id]], res.explanation
    if keep_version:
        assert found[0].rows == [dropped] and found[0].versions == [read.version]
    else:
        # rows are the difference from whichever end of the read's window
        # (lo or hi) is nearer, not from the version the read was corrupted
        # from, so `dropped` need not be among them.
        assert found[0].rows, res.explanation
    assert read.id in found[0].explanation and "version" in found[0].explanation


@SETTINGS
@given(executions(), st.data())
def test_stale_read_is_found(ex, data):
    # A read that began after version lo >= 1 was acknowledged, returning the
    # state of an older version.
    if not _reads_with(ex, lambda r: ex.floor(r) >= 1):
        quiesced_append(ex)
        quiesced_read(ex)
        ex.settle()
    read = data.draw(st.sampled_from(_reads_with(ex, lambda r: ex.floor(r) >= 1)))
    lo = ex.floor(read)
    old = lo - 1 - data.draw(st.integers(0, lo - 1))  # shrinks to the boundary, lo - 1
    read.version = old
    read.read_ids = sorted(ex.state(old))
    history, log = ex.build().build()
    res = read_validity.check(history, log)
    assert res.verdict is Verdict.INVALID
    stale = [a for a in res.anomalies if a.kind == "stale-read"]
    # The floor may come from an ack or from a read that ended earlier; the
    # latter anomaly also names that read.
    assert [(a.ops[0], a.versions) for a in stale] == [(read.id, [old, lo])], res.explanation


@SETTINGS
@given(executions(), st.data())
def test_future_read_is_found(ex, data):
    # A read returning a version at or after the first commit of a writer
    # that was invoked only after the read ended.
    def first_future(r: MOp) -> int | None:
        return min((o.version for o in ex.order if o.start > r.end), default=None)

    if not _reads_with(ex, lambda r: first_future(r) is not None):
        quiesced_read(ex)
        quiesced_append(ex)
        ex.settle()
    read = data.draw(st.sampled_from(_reads_with(ex, lambda r: first_future(r) is not None)))
    hi = first_future(read) - 1
    v = hi + 1 + data.draw(st.integers(0, len(ex.order) - hi - 1))  # shrinks to hi + 1
    read.version = v
    read.read_ids = sorted(ex.state(v))
    history, log = ex.build().build()
    res = read_validity.check(history, log)
    assert res.verdict is Verdict.INVALID
    future = [a for a in res.anomalies if a.kind == "future-read"]
    assert [(a.ops, a.versions) for a in future] == [([read.id], [v, hi])], res.explanation


# -- a hole in the log -------------------------------------------------------------


def _with_garbage(run, version: int):
    """The run's log with the commit at `version` unparseable (a new last
    commit past the end)."""
    run.raw_commit(version, "garbage")
    return run.build()


@SETTINGS
@given(executions(), st.data())
def test_an_unreadable_commit_is_log_sanitys_one_anomaly(ex, data):
    # Whatever the correct execution, the other checkers find nothing in the
    # versions before the hole, and the ones that judge every version of the
    # table cannot be valid.
    if not ex.order:
        quiesced_append(ex)
        ex.settle()
    hole = data.draw(st.integers(1, len(ex.order)))
    history, log = _with_garbage(ex.build(), hole)
    results = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}
    found = [(name, a.kind, a.versions) for name, r in results.items() for a in r.anomalies]
    assert found == [("log-sanity", "log-unparseable", [hole])], [r.explanation for r in results.values()]
    for name in ("durability", "atomicity", "duplicates", "serializability"):
        assert results[name].verdict is Verdict.UNKNOWN, (name, results[name].explanation)
        assert f"version {hole} is unparseable" in results[name].explanation
    assert results["read-validity"].verdict is not Verdict.INVALID


@SETTINGS
@given(executions(), st.data())
def test_an_anomaly_before_an_unreadable_commit_is_still_found(ex, data):
    if not any(o.commit_at is not None and len(o.ids) >= 2 for o in ex.ops):
        quiesced_append(ex, n_ids=2)
        ex.settle()
    victim = data.draw(st.sampled_from([o for o in ex.order if len(o.ids) >= 2]))
    dropped = data.draw(st.sampled_from(victim.ids))
    run = ex.build()
    run.commit(
        [(i, victim.id) for i in victim.ids if i != dropped],
        version=victim.version,
        op=victim.id if ex.tag_commits else None,
    )
    hole = data.draw(st.integers(victim.version + 1, len(ex.order) + 1))
    history, log = _with_garbage(run, hole)
    res = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}["atomicity"]
    assert res.verdict is Verdict.INVALID
    partial = [a for a in res.anomalies if a.kind == "partial-op"]
    assert [(a.ops, a.rows, a.versions) for a in partial] == [([victim.id], [dropped], [victim.version])]


@SETTINGS
@given(executions(), st.data())
def test_a_write_lost_before_an_unreadable_commit_is_still_found(ex, data):
    # An acknowledged write whose commit holds none of its rows, and a hole
    # after the commit of an op invoked once the write was acknowledged:
    # the write's commit was written before that one, so it is no part of
    # the hole, and its loss is in the judged versions.
    if not any(o.type == OK and o.commit_at is not None for o in ex.ops):
        quiesced_append(ex)
    quiesced_append(ex)  # invoked after every other op ended
    ex.settle()
    victim = data.draw(st.sampled_from([o for o in ex.order if o.type == OK and o.end < ex.order[-1].start]))
    later = [o for o in ex.order if o.version > victim.version and o.start > victim.end]
    hole = data.draw(st.sampled_from(later)).version + 1
    run = ex.build()
    run.commit(version=victim.version, op=victim.id if ex.tag_commits else None)
    history, log = _with_garbage(run, hole)
    res = {r.checker: r for r in run_checkers(history, log, AppendWorkload.checkers)}["durability"]
    assert res.verdict is Verdict.INVALID
    assert [a.ops for a in res.anomalies if a.kind == "lost-write"] == [[victim.id]], res.explanation
