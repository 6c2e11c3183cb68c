"""The fault rules: what each matches (client, node, request kind, path
class), their parameters, and the holds of commit PUTs."""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.s3proxy.s3 import ERROR_CODES, FAULT_KINDS, PATH_CLASSES, REQUEST_KINDS

# --- fault rules -------------------------------------------------------------------


@dataclass
class Target:
    """Which requests a rule applies to; a field left None matches all. A
    field may also be a list of values."""

    client: Any = None
    node: Any = None
    method: Any = None
    path_class: Any = None

    def matches(self, info: ReqInfo) -> bool:
        def ok(want: Any, *have: Any) -> bool:
            if want is None:
                return True
            wants = want if isinstance(want, list) else [want]
            return any(str(w) == str(h) for w in wants for h in have if h is not None)

        return (
            ok(self.client, info.client, info.key)
            and ok(self.node, info.node)
            and ok(self.method, info.kind)
            and ok(self.path_class, info.path_class)
        )


@dataclass
class Rule:
    id: int
    kind: str
    target: Target
    params: dict[str, Any]
    applied: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "target": asdict(self.target),
            "params": self.params,
            "applied": self.applied,
        }


@dataclass
class ReqInfo:
    key: str
    node: str | None
    client: str
    kind: str
    path_class: str
    bucket: str
    object_key: str


@dataclass
class Hold:
    id: int
    rule_id: int
    info: ReqInfo
    since: float
    release: asyncio.Future = field(repr=False)  # result: "forward" or "drop"
    done: asyncio.Future = field(repr=False)  # result: upstream status, set once forwarded

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "rule": self.rule_id,
            "key": self.info.key,
            "client": self.info.client,
            "node": self.info.node,
            "method": self.info.kind,
            "path": self.info.object_key,
            "held_for": round(time.monotonic() - self.since, 3),
        }


# Faults that act on one request kind only take it as their default target:
# an applied-error is about a write that took effect, a stale list about LIST.
_DEFAULT_TARGETS = {
    "hold": {"method": "PUT", "path_class": "commit"},
    "strip-if-none-match": {"method": "PUT"},
    "applied-error": {"method": "PUT"},
    "applied-late": {"method": "PUT"},
    "stale-list": {"method": "LIST"},
}
LATE_THEN = ("send", "reset")


def _validate(kind: str, target: dict[str, Any], params: dict[str, Any]) -> None:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; valid: {', '.join(FAULT_KINDS)}")
    unknown = set(target) - {"client", "node", "method", "path_class"}
    if unknown:
        raise ValueError(f"unknown target field(s) {sorted(unknown)}")
    for name, valid in (("method", REQUEST_KINDS), ("path_class", PATH_CLASSES)):
        vals = target.get(name)
        for v in vals if isinstance(vals, list) else [vals] if vals is not None else []:
            if v not in valid:
                raise ValueError(f"unknown {name} {v!r}; valid: {', '.join(valid)}")
    rate = params.get("rate", 1.0)
    if not isinstance(rate, (int, float)) or not 0 <= rate <= 1:
        raise ValueError(f"rate must be in [0, 1], got {rate!r}")
    if kind == "error" and params.get("status", 500) not in ERROR_CODES:
        raise ValueError(f"error status must be one of {sorted(ERROR_CODES)}")
    count = params.get("count")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 0):
        raise ValueError(f"count must be a non-negative integer, got {count!r}")
    if kind == "applied-error" and params.get("status", 500) not in ERROR_CODES:
        raise ValueError(f"applied-error status must be one of {sorted(ERROR_CODES)}")
    if kind == "latency" and not isinstance(params.get("ms", 0), (int, float)):
        raise ValueError("latency needs a numeric ms")
    if kind in ("applied-late", "stale-list"):
        ms = params.get("ms")
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not 0 < ms <= 3_600_000:
            raise ValueError(f"{kind} needs ms in (0, 3600000], got {ms!r}")
    if kind == "applied-late" and params.get("then", "send") not in LATE_THEN:
        raise ValueError(f"applied-late then must be one of {', '.join(LATE_THEN)}")
    if kind == "stale-list" and target.get("method") not in ("LIST", ["LIST"]):
        raise ValueError("stale-list acts on LIST requests only (method LIST)")
    if kind == "hold" and params.get("version") is not None and not isinstance(params["version"], int):
        raise ValueError("a hold's version must be an integer")
    if kind == "hold" and not isinstance(params.get("after", False), bool):
        raise ValueError("a hold's after must be true or false")
    if not isinstance(params.get("body_contains", ""), str):
        raise ValueError("body_contains must be a string")
    if kind == "pin" and not isinstance(params.get("version"), int):
        raise ValueError("pin needs an integer version")
