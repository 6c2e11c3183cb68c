"""Bank invariant: the total of all balances is the same at every committed
version and in every read (a transfer moves money, never makes or loses it).
The expected total comes from the setup load recorded in the history."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from harness.deltalog import TransactionLog
from harness.history import OK, History

NAME = "bank"


def _expected_total(history: History) -> int | None:
    for op in history.ops():
        if op.f == "load" and op.type == OK and isinstance(op.invoke.value, dict):
            return op.invoke.value.get("total")
    return None


def _version_totals(log: TransactionLog) -> tuple[dict[int, int], dict[int, dict[Any, list[Any]]]]:
    """Total balance at each version, and each version's accounts (for
    explanations), replayed from the data files."""
    alive: dict[str, list[tuple[Any, int]]] = {}
    totals: dict[int, int] = {}
    total = 0
    accounts: dict[int, dict[Any, list[Any]]] = {}
    for version, _commit, adds, removes in log.replay():
        for rm in removes:
            total -= sum(b for _, b in alive.pop(rm["path"], []))
        for add in adds:
            rows = log.add_rows(add)
            if "balance" not in rows.column_names:
                continue
            pairs = list(zip(rows.column("k").to_pylist(), rows.column("balance").to_pylist()))
            alive[add["path"]] = pairs
            total += sum(b or 0 for _, b in pairs)
        totals[version] = total
        if len(accounts) < 1 or totals.get(version - 1) != total:
            snapshot: dict[Any, list[Any]] = defaultdict(list)
            for pairs in alive.values():
                for k, b in pairs:
                    snapshot[k].append(b)
            accounts[version] = dict(snapshot)
    return totals, accounts


def check(history: History, log: TransactionLog) -> CheckResult:
    expected = _expected_total(history)
    if expected is None:
        return CheckResult(NAME, Verdict.UNKNOWN, "No successful initial load in the history: the expected total "
                                                  "balance is unknown.")
    totals, accounts = _version_totals(log)
    anomalies: list[Anomaly] = []
    loaded = min((v for v, t in totals.items() if t == expected), default=None)
    for v, t in sorted(totals.items()):
        if loaded is not None and v >= loaded and t != expected:
            anomalies.append(Anomaly(
                "wrong-total", "C6",
                f"At version {v} the balances sum to {t}, not {expected}: money was "
                f"{'created' if t > expected else 'lost'} ({t - expected:+d}). Accounts then: {accounts.get(v)}.",
                versions=[v]))
    reads = [op for op in history.client_ops() if op.f == "read" and op.type == OK and isinstance(op.value, dict)]
    for r in reads:
        bal = r.value.get("balances")
        if bal is None:
            continue
        t = sum(b for _, b in bal)
        if t != expected:
            anomalies.append(Anomaly(
                "read-wrong-total", "C12",
                f"Read {r.id} (process {r.process}) saw balances summing to {t}, not {expected}: "
                f"{dict((k, b) for k, b in bal)}.", ops=[r.id]))
    stats = {"expected_total": expected, "versions_checked": len(totals), "reads_checked": len(reads)}
    if anomalies:
        return CheckResult(
            NAME, Verdict.INVALID,
            f"The total balance was not conserved in {len(anomalies)} place(s). Every transfer is one transaction "
            f"that moves money between two accounts, so with atomic commits (C6) and snapshot reads (C12) every "
            f"version and every read must sum to {expected}. First: {anomalies[0].explanation}",
            anomalies, stats)
    return CheckResult(
        NAME, Verdict.VALID,
        f"The total balance is {expected} at all {len(totals) - (loaded or 0)} version(s) since the load and in all "
        f"{len(reads)} read(s).", [], stats)
