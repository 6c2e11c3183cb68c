"""pause: SIGSTOP a client worker or a server node, SIGCONT it on stop.

Every process this nemesis ever stopped gets SIGCONT on heal, which the
runner calls before the final phase and in teardown (also after Ctrl-C): a
stopped process would otherwise outlive nothing, but hang whoever waits on
it. A paused worker's op that outlasts --op-timeout becomes `info`, as any
hung op does.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from nemeses.base import Nemesis, NemesisContext, NemesisError


def _signal_group(pid: int, sig: signal.Signals) -> bool:
    """Signal the process group the harness gave the child (its own session)."""
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class PauseNemesis(Nemesis):
    name = "pause"

    def __init__(self) -> None:
        self.paused: dict[int, dict[str, Any]] = {}  # pid -> what it was
        self.current: int | None = None

    def start(self, ctx: NemesisContext) -> dict[str, Any]:
        cl = ctx.cluster
        targets: list[dict[str, Any]] = [
            {"target": "client", "process": c.process, "node": c.node, "pid": c.pid} for c in cl.clients()
        ]
        for n in cl.server_nodes():
            pid = cl.server_pid(n)
            if pid is not None and cl.server_alive(n):
                targets.append({"target": "node", "node": n, "pid": pid})
        if not targets:
            raise NemesisError("nothing to pause: no live client worker or server node")
        t = ctx.rng.choice(targets)
        if not _signal_group(t["pid"], signal.SIGSTOP):
            raise NemesisError(f"pid {t['pid']} was already gone")
        self.paused[t["pid"]] = t
        self.current = t["pid"]
        return {**t, "signal": "SIGSTOP"}

    def stop(self, ctx: NemesisContext) -> dict[str, Any]:
        pid, self.current = self.current, None
        if pid is None:
            return {"resumed": None}
        t = self.paused.pop(pid, {"pid": pid})
        return {**t, "signal": "SIGCONT", "alive": _signal_group(pid, signal.SIGCONT)}

    def heal(self, ctx: NemesisContext) -> dict[str, Any] | None:
        pids = sorted(self.paused)
        for pid in pids:
            _signal_group(pid, signal.SIGCONT)
        self.paused.clear()
        self.current = None
        return {"resumed": pids} if pids else None
