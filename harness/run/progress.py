"""Live progress of a run: elapsed, ops ok/fail/info, ops/s."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(self, total: float, enabled: bool = True):
        self.total = total
        self.enabled = enabled
        self.live: Any = None
        self._last_plain = 0.0
        self.tty = sys.stderr.isatty()

    def __enter__(self) -> Progress:
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.live import Live

            self.live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
            self.live = None

    @staticmethod
    def line(phase: str, elapsed: float, total: float, counts: dict[str, int]) -> str:
        done = counts["ok"] + counts["fail"] + counts["info"]
        rate = done / elapsed if elapsed > 0 else 0.0
        return (
            f"{phase:<9} {elapsed:6.1f}s/{total:g}s  ok {counts['ok']:>6}  fail {counts['fail']:>5}"
            f"  info {counts['info']:>4}  {rate:7.1f} ops/s"
        )

    def update(self, phase: str, elapsed: float, counts: dict[str, int]) -> None:
        if not self.enabled:
            return
        text = self.line(phase, elapsed, self.total, counts)
        if self.live is not None:
            self.live.update(text)
        elif time.monotonic() - self._last_plain >= 5.0:
            self._last_plain = time.monotonic()
            print(text, file=sys.stderr, flush=True)

    def message(self, text: str) -> None:
        if not self.enabled:
            return
        if self.live is not None:
            self.live.console.print(text)
        else:
            print(text, file=sys.stderr, flush=True)
