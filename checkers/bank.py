"""Bank invariant: the total of all balances is the same at every committed
version and in every read (a transfer moves money, never makes or loses it).
The expected total comes from the setup load recorded in the history."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.base import Anomaly, CheckResult, Verdict
from checkers.facts import table_facts
from harness.core.history import OK, History
from harness.deltalog import TransactionLog

NAME = "bank"


def _load(history: History) -> tuple[str, int] | None:
    """The acknowledged setup load: its op id and the total it wrote."""
    for op in history.ops():
        if op.f == "load" and op.type == OK and isinstance(op.invoke.value, dict):
            total = op.invoke.value.get("total")
            if total is not None:
                return op.id, total
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
            pairs = list(zip(rows.column("k").to_pylist(), rows.column("balance").to_pylist(), strict=True))
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
    load = _load(history)
    if load is None:
        return CheckResult(
            NAME, Verdict.UNKNOWN, "No successful initial load in the history: the expected total balance is unknown."
        )
    load_id, expected = load
    totals, accounts = _version_totals(log)
    anomalies: list[Anomaly] = []
    # The load's commit: where its rows appear (they carry its op id), else
    # the first version holding the whole loaded total.
    loaded = table_facts(log).version_of(load_id)
    if loaded is None:
        loaded = min((v for v, t in totals.items() if t == expected), default=None)
    if loaded is None:
        # Acknowledged, yet no version ever held what it wrote: the load was
        # lost (C7) or applied in part (C6). Nothing after it can be checked
        # against a total the table never had, and that is itself the anomaly.
        seen = sorted(set(totals.values()))
        claim = "C7" if not any(totals.values()) else "C6"
        anomalies.append(
            Anomaly(
                "load-never-visible",
                claim,
                f"The load {load_id} was acknowledged with a total balance of {expected}, but no version of the table "
                f"sums to it (totals seen: {seen[:10]}{' ...' if len(seen) > 10 else ''}): the load was "
                f"{'lost' if claim == 'C7' else 'applied in part'}.",
                ops=[load_id],
                versions=sorted(totals)[-1:],
            )
        )
    for v, t in sorted(totals.items()):
        if loaded is not None and v >= loaded and t != expected:
            anomalies.append(
                Anomaly(
                    "wrong-total",
                    "C6",
                    f"At version {v} the balances sum to {t}, not {expected}: money was "
                    f"{'created' if t > expected else 'lost'} ({t - expected:+d}). Accounts then: {accounts.get(v)}.",
                    versions=[v],
                )
            )
    reads = [op for op in history.client_ops() if op.f == "read" and op.type == OK and isinstance(op.value, dict)]
    for r in reads:
        bal = r.value.get("balances")
        if bal is None:
            continue
        t = sum(b for _, b in bal)
        if t != expected:
            anomalies.append(
                Anomaly(
                    "read-wrong-total",
                    "C12",
                    f"Read {r.id} (process {r.process}) saw balances summing to {t}, not {expected}: "
                    f"{dict((k, b) for k, b in bal)}.",
                    ops=[r.id],
                )
            )
    checked = len([v for v in totals if loaded is not None and v >= loaded])
    stats = {
        "expected_total": expected,
        "load_version": loaded,
        "versions_checked": checked,
        "reads_checked": len(reads),
    }
    if anomalies:
        return CheckResult(
            NAME,
            Verdict.INVALID,
            f"The total balance was not conserved in {len(anomalies)} place(s). Every transfer is one transaction "
            f"that moves money between two accounts, so with atomic commits (C6) and snapshot reads (C12) every "
            f"version and every read must sum to {expected}. First: {anomalies[0].explanation}",
            anomalies,
            stats,
        )
    return CheckResult(
        NAME,
        Verdict.VALID,
        f"The total balance is {expected} at all {checked} version(s) since the load (version {loaded}) and in all "
        f"{len(reads)} read(s).",
        [],
        stats,
    )
