"""Nemeses by name: the faults `--nemesis a,b,...` schedules (nemeses/schedule.py)."""

from __future__ import annotations

from harness.core.errors import HarnessError
from nemeses.base import Nemesis

# name -> "module:Class"
_REGISTRY: dict[str, str] = {
    "kill": "nemeses.process:KillNemesis",
    "kill-node": "nemeses.process:KillNodeNemesis",
    "kill-mid-op": "nemeses.process:KillMidOpNemesis",
    "pause": "nemeses.pause:PauseNemesis",
    "clock": "nemeses.clock:ClockNemesis",
    "partition": "nemeses.s3:PartitionNemesis",
    "s3-errors": "nemeses.s3:S3ErrorsNemesis",
    "latency": "nemeses.s3:LatencyNemesis",
    "ambiguous": "nemeses.s3:AmbiguousNemesis",
    "ambiguous-5xx": "nemeses.s3:Ambiguous5xxNemesis",
    "ambiguous-late": "nemeses.s3:AmbiguousLateNemesis",
    "stale-list": "nemeses.s3:StaleListNemesis",
    "unsafe-put": "nemeses.s3:UnsafePutNemesis",
    "coordinator-down": "nemeses.coordinator:CoordinatorDownNemesis",
    "kill-after-ratify": "nemeses.coordinator:KillAfterRatifyNemesis",
}
NEMESIS_NAMES = ("none", *_REGISTRY)
# Faults that act through the S3 fault proxy: selecting one turns it on.
PROXY_NEMESES = frozenset(
    {
        "partition",
        "s3-errors",
        "latency",
        "ambiguous",
        "ambiguous-5xx",
        "ambiguous-late",
        "stale-list",
        "unsafe-put",
        "coordinator-down",
        "kill-after-ratify",
    }
)


def parse_nemeses(spec: str | None) -> list[str]:
    names = [n.strip() for n in (spec or "none").split(",") if n.strip()]
    bad = [n for n in names if n not in NEMESIS_NAMES]
    if bad:
        raise HarnessError(f"unknown nemesis {bad[0]!r}; valid: {', '.join(NEMESIS_NAMES)}")
    out: list[str] = []
    for n in names:
        if n != "none" and n not in out:
            out.append(n)
    return out


def make_nemeses(names: list[str], storage_kind: str) -> list[Nemesis]:
    """One instance per name, each checked against the run's storage."""
    import importlib

    out = []
    for name in names:
        module, cls = _REGISTRY[name].split(":")
        nem: Nemesis = getattr(importlib.import_module(module), cls)()
        nem.validate(storage_kind)
        out.append(nem)
    return out
