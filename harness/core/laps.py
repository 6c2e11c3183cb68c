"""Seconds per stage of a long computation, for the benchmarks' profiles."""

from __future__ import annotations

import time

__all__ = ["Laps"]


class Laps:
    """Each stage's seconds, from the end of the stage before (or the last
    `restart`), rounded to the millisecond, in the order they ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.seconds[stage] = round(now - self._t, 3)
        self._t = now

    def restart(self) -> None:
        """Time from now: what ran since was timed elsewhere."""
        self._t = time.perf_counter()
