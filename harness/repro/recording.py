"""What a replay writes into its history: each op's completion as the
run's workers record it, so the checkers judge a replay as they judge a run."""

from __future__ import annotations

from typing import Any

from harness.core.history import INVOKE, HistoryWriter, OpError


def record_reply(h: HistoryWriter, process: int | str, op: dict[str, Any], reply: dict[str, Any], node: str) -> None:
    """The completion of `op` (and, for the table's creation, its invocation)."""
    err = OpError.from_json(reply["error"]) if reply.get("error") else None
    if op["f"] == "create-table":
        h.record(process=process, type=INVOKE, f=op["f"], id=op["id"], value=op["value"], node=node)
    h.record(
        process=process,
        type=reply["type"],
        f=op["f"],
        id=op["id"],
        value=reply.get("value"),
        version=reply.get("version"),
        error=err,
        node=node,
    )
