"""Progress of a matrix (conformance or workload) on stderr: cells done out
of total, elapsed, an ETA, and the cells in flight.

One line per finished cell, so a log or CI keeps the whole account; on a
terminal a status line under them names the cells running now and is
rewritten in place. Cells may finish on several threads (--jobs).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["CellProgress", "duration"]


def duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class CellProgress:
    total: int
    enabled: bool = True
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    t0: float = field(default_factory=time.monotonic)
    done: int = 0
    running: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _status_shown: bool = False

    @property
    def tty(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def eta(self) -> float | None:
        """Wall-clock seconds left at the pace so far (cells run in parallel
        count once each, so --jobs shortens it as it should)."""
        if not self.done:
            return None
        return (time.monotonic() - self.t0) / self.done * (self.total - self.done)

    def _times(self) -> str:
        eta = self.eta()
        return f"elapsed {duration(time.monotonic() - self.t0)}, ETA {duration(eta) if eta is not None else '?'}"

    def _clear(self) -> None:
        if self._status_shown:
            self.stream.write("\r\x1b[K")
            self._status_shown = False

    def _status(self) -> None:
        if not self.tty or not self.running:
            return
        now = ", ".join(self.running[:3]) + (f" (+{len(self.running) - 3})" if len(self.running) > 3 else "")
        self.stream.write(f"[{self.done}/{self.total}] running {now}  {self._times()}"[:200])
        self._status_shown = True
        self.stream.flush()

    def started(self, name: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.running.append(name)
            self._clear()
            self._status()

    def finished(self, name: str, outcome: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self.done += 1
            if name in self.running:
                self.running.remove(name)
            self._clear()
            line = f"[{self.done}/{self.total}] {name}: {outcome}  {self._times()}"
            if self.running and not self.tty:
                line += "; running: " + ", ".join(self.running[:3]) + ("..." if len(self.running) > 3 else "")
            print(line, file=self.stream, flush=True)
            self._status()

    def close(self) -> None:
        if self.enabled:
            with self._lock:
                self._clear()
                self.stream.flush()
