"""Holds simulated time to a real-time factor, whoever steps the world (the hardware profile)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from palletizer.core.errors import InvalidValue

__all__ = ['Pacer']


class Pacer:
    """A before-step hook on a Cell that sleeps so that sim time runs at `rtf` x wall time.

    Every `every` steps it compares the sim time since the anchor with the wall time since the
    anchor and sleeps off any lead. A world that falls behind (a long render, a loaded machine)
    catches up by stepping without sleeps, but never by more than `max_lag_s` of wall time: past
    that the anchor moves, as a real controller's clock would not wait either. Attach again
    after every Cell.reset (a reset drops the hooks); attach() sets the anchor.
    """

    def __init__(
        self,
        rtf: float,
        every: int = 10,
        max_lag_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not (math.isfinite(rtf) and rtf > 0):
            raise InvalidValue(f'real_time_factor = {rtf!r}; expected a finite number > 0')
        if every < 1:
            raise InvalidValue(f'every = {every}; expected >= 1 physics steps')
        self.rtf, self.every, self.max_lag_s = float(rtf), int(every), float(max_lag_s)
        self._clock, self._sleep = clock, sleep
        self._count = 0
        self._wall0 = 0.0
        self._sim0 = 0.0
        self.slept_s = 0.0  # total sleep, for the benchmark's record
        self.lag_resets = 0  # how often the world fell more than max_lag_s behind

    def attach(self, cell: Any) -> None:
        """Start pacing `cell` from its current sim time."""
        self.anchor(float(cell.time))
        cell.add_before_step(self)

    def anchor(self, sim_time: float) -> None:
        """Take `sim_time` as now: the lead or lag so far is forgotten."""
        self._count = 0
        self._wall0, self._sim0 = self._clock(), float(sim_time)

    def __call__(self, model: Any, data: Any) -> None:
        self._count += 1
        if self._count % self.every:
            return
        ahead = (float(data.time) - self._sim0) / self.rtf - (self._clock() - self._wall0)
        if ahead > 0:
            self._sleep(ahead)
            self.slept_s += ahead
        elif -ahead > self.max_lag_s:
            self.lag_resets += 1
            self.anchor(float(data.time))
