"""When each simulated transaction ran: the simulator recording its
scheduler steps, and the placement of ops on processes and in time that
makes the history of a synthetic run."""

from __future__ import annotations

import json
from typing import Any

from checkers.txn_model import Txn, TxnHistory
from harness.bench.inject import Injection
from harness.bench.simulate import DeltaSim, SimConfig


class _RecordingSim(DeltaSim):
    """The simulator, also recording each transaction's kind, when it began
    and ended (scheduler steps) and why it failed: the history's timing."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.tick = 0
        self.began: dict[str, tuple[str, int, tuple]] = {}  # id -> (op, tick, predicates)
        self.ended: dict[str, int] = {}
        self.reasons: dict[str, str] = {}
        self._reason: str | None = None

    def _start(self, p: Any) -> Any:
        self.tick += 1
        self.began[p.id] = (p.op, self.tick, p.predicates)
        return super()._start(p)

    def conflict(self, p: Any, level: str) -> str | None:
        self._reason = super().conflict(p, level)
        return self._reason

    def commit(self, p: Any, isolation: str | None = None) -> Txn | None:
        self.tick += 1
        self._reason = None
        t = super().commit(p, isolation)
        self.ended[p.id] = self.tick
        if t is None and self._reason is not None:
            self.reasons[p.id] = self._reason
        return t


def _sim_config(n_txns: int, concurrency: int, n_keys: int | None, isolation: str, seed: int) -> SimConfig:
    return SimConfig(
        n_txns=n_txns, concurrency=concurrency, n_keys=n_keys or max(64, n_txns // 10), isolation=isolation, seed=seed
    )


def _place(txns_desc: list[Txn], before: float, start: dict[str, float], end: dict[str, float]) -> None:
    """Injected transactions (given newest first) run one after another in
    the scheduler step just before `before`."""
    txns = list(reversed(txns_desc))
    m = len(txns)
    for j, t in enumerate(txns):
        start[t.id] = before - 0.5 + j * 0.4 / m
        end[t.id] = before - 0.5 + (j + 0.5) * 0.4 / m


def _op_params(t: Txn) -> dict[str, str]:
    if t.predicates:
        p = t.predicates[0]
        return {"predicate": json.dumps([f"k >= {p.lo} AND k <= {p.hi}"])}
    if t.operation == "WRITE":
        return {"mode": "Append"}
    if t.writes:
        return {"predicate": json.dumps([f"k IN ({', '.join(str(w.key) for w in t.writes)})"])}
    return {}


def _assign_processes(
    h: TxnHistory,
    sim: _RecordingSim,
    start: dict[str, float],
    end: dict[str, float],
    aborted: list[str],
    injection: Injection | None,
) -> dict[str, int]:
    """Jepsen processes: each transaction runs on the lowest-numbered
    process that is idle when it begins."""
    if aborted:
        first = min(start[t] for t in injection.ids) if injection and injection.ids else 0.0
        for j, tid in enumerate(aborted):
            start[tid] = first - 0.09 + j * 0.01
            end[tid] = first - 0.085 + j * 0.01
    spans = [(start[t.id], end[t.id], t.id) for t in h.txns]
    spans += [(float(sim.began[tid][1]), float(sim.ended[tid]), tid) for tid in sim.failed]
    spans += [(start[tid], end[tid], tid) for tid in aborted]
    evs = sorted([(s, 1, tid) for s, _, tid in spans] + [(e, 0, tid) for _, e, tid in spans])
    import heapq

    free: list[int] = []
    top = 0
    out: dict[str, int] = {}
    for _, kind, tid in evs:
        if kind == 1:
            if free:
                out[tid] = heapq.heappop(free)
            else:
                out[tid] = top
                top += 1
        else:
            heapq.heappush(free, out[tid])
    return out
