"""The gripper's vacuum level as the executor reads it: whether the cups hold, and a seal lost
during a goal.

The level streams in on the UR driver's tool data (the tool analog input 2 [V]). `VacuumLevel`
keeps the newest reading and how many have arrived, marks when a motion was sent (a reading
after the mark is of the motion or later), and feeds the `VacuumWatch` of the goal in progress.
"""

from __future__ import annotations

import threading

__all__ = ['VacuumLevel', 'VacuumWatch']


class VacuumWatch:
    """Watches the vacuum level during one goal: once a reading says a carton is held
    (>= held_min), a later one below it means the cups let go; `lost` is then set."""

    def __init__(self, held_min: float) -> None:
        self.held_min = held_min
        self.held_v = 0.0  # [V] the last level that held
        self.level = 0.0  # [V] the level that did not
        self.lost = threading.Event()

    def see(self, v: float) -> None:
        if v >= self.held_min:
            self.held_v = v
        elif self.held_v > 0.0 and not self.lost.is_set():
            self.level = v
            self.lost.set()


class VacuumLevel:
    """The newest vacuum level and how many readings have arrived, and how many had when the
    last motion was sent; thread-safe (readings arrive on another thread than the goals')."""

    def __init__(self, held_min: float) -> None:
        self.held_min = held_min  # [V] least level that counts as holding
        self._cond = threading.Condition()
        self._n = 0
        self._v = 0.0
        self._mark = 0
        self._watch: VacuumWatch | None = None  # of the goal in progress

    def see(self, v: float) -> None:
        """One reading [V]."""
        with self._cond:
            self._n += 1
            self._v = v
            if self._watch is not None:
                self._watch.see(self._v)
            self._cond.notify_all()

    def mark(self) -> None:
        """A motion is being sent: readings from now on are of it or later."""
        with self._cond:
            self._mark = self._n

    def watch(self, watch: VacuumWatch | None) -> None:
        """Feed the readings to `watch` from now on (None: to no watch)."""
        with self._cond:
            self._watch = watch

    def holding(self, timeout_s: float) -> bool | None:
        """Whether a reading since the mark holds a carton; None when none came within
        timeout_s [s] (wall)."""
        with self._cond:
            fresh = self._cond.wait_for(lambda: self._n > self._mark, timeout=timeout_s)
            return self._v >= self.held_min if fresh else None
