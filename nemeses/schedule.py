"""The nemesis schedule: one thread that alternates quiet and faulty periods.

Every `interval` seconds: a quiet half, then a fault chosen at random from
the run's nemeses, on for the other half, then stopped. Each start and stop
is an op of process "nemesis" in the history (invoke, then ok with what was
done, or info with why it could not be done). `stop_and_heal` ends the
thread, stops the fault in effect and heals every nemesis (all proxy rules
removed, every paused process continued, dead server nodes restarted); the
runner calls it before the final phase and again in teardown.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from harness.core.history import INFO, INVOKE, OK
from nemeses.base import Nemesis, NemesisContext

PROCESS = "nemesis"
JOIN_TIMEOUT = 120.0  # a server restart inside a start/stop may take a while

Record = Callable[..., Any]


class NemesisSchedule:
    def __init__(self, nemeses: list[Nemesis], ctx: NemesisContext, record: Record, interval: float):
        self.nemeses = nemeses
        self.ctx = ctx
        self.record = record
        self.interval = interval
        self.ctx.fault_seconds = interval / 2
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one start/stop/heal at a time
        self._seq = 0
        self._active: Nemesis | None = None
        self._healed = False
        self._thread: threading.Thread | None = None

    def start(self) -> NemesisSchedule:
        if self.nemeses:
            self._thread = threading.Thread(target=self._main, name="nemesis", daemon=True)
            self._thread.start()
        return self

    def _main(self) -> None:
        half = self.interval / 2
        while not self._stop.wait(half):
            with self._lock:
                if self._stop.is_set():
                    break
                nem = self.ctx.rng.choice(self.nemeses)
                if self._op(f"start-{nem.name}", functools.partial(nem.start, self.ctx)):
                    self._active = nem
            if self._stop.wait(half):
                break
            with self._lock:
                self._stop_active()

    def _stop_active(self) -> None:
        nem, self._active = self._active, None
        if nem is not None:
            self._op(f"stop-{nem.name}", lambda: nem.stop(self.ctx))

    def _op(self, f: str, fn: Callable[[], dict[str, Any] | None]) -> bool:
        self._seq += 1
        op_id = f"{PROCESS}.{self._seq}"
        self.record(process=PROCESS, type=INVOKE, f=f, id=op_id)
        try:
            value = fn()
        except Exception as e:  # a fault that could not be applied is recorded, not fatal
            self.record(process=PROCESS, type=INFO, f=f, id=op_id, value={"error": f"{type(e).__name__}: {e}"})
            return False
        self.record(process=PROCESS, type=OK, f=f, id=op_id, value=value, node=_node_of(value))
        return True

    def stop_and_heal(self) -> None:
        """Idempotent. After it returns no fault is in effect and none starts."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(JOIN_TIMEOUT)
        with self._lock:
            if self._healed:
                return
            self._stop_active()
            done: dict[str, Any] = {}
            for nem in self.nemeses:
                try:
                    res = nem.heal(self.ctx)
                except Exception as e:  # healing goes on for the others
                    res = {"error": f"{type(e).__name__}: {e}"}
                if res:
                    done[nem.name] = res
            self._op("heal", lambda: done)
            # Only now: a heal cut short (a second Ctrl-C) is redone by teardown.
            self._healed = True


def _node_of(value: Any) -> str | None:
    return value.get("node") if isinstance(value, dict) and isinstance(value.get("node"), str) else None
