"""Publishes the cell's state every N physics steps while the world advances, whoever steps it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from palletizer.core.errors import InvalidValue

__all__ = ['KINEMATICS_EVERY', 'StepStream', 'steps_per_sample']

# Physics steps per sample of the cell bridge's clock, joint states and TF in the lockstep
# profile: 50 Hz of sim time at the 2 ms step (the hardware profile streams joint states at
# every step, as a UR driver's joint_state_broadcaster does).
KINEMATICS_EVERY = 10


class StepStream:
    """A before-step hook on a Cell that calls `emit()` every `every` physics steps.

    Hooks run before a step, so the k-th call sees the state after k - 1 steps: emitting on
    counts 10, 20, ... publishes the state after 10, 20, ... steps (50 Hz at 2 ms). Attach
    again after every Cell.reset (a reset drops the hooks).
    """

    def __init__(self, emit: Callable[[], None], every: int = 10) -> None:
        if every < 1:
            raise InvalidValue(f'every = {every}; expected >= 1 physics steps')
        self._emit = emit
        self.every = int(every)
        self._count = 0
        self.emitted = 0

    def attach(self, cell: Any) -> None:
        """Start counting on `cell` (from zero)."""
        self._count = 0
        cell.add_before_step(self)

    def __call__(self, model: Any, data: Any) -> None:
        if self._count and self._count % self.every == 0:
            self._emit()
            self.emitted += 1
        self._count += 1


def steps_per_sample(rate_hz: float, timestep: float) -> int:
    """Physics steps between samples of a stream at `rate_hz` (at least one)."""
    if rate_hz <= 0 or timestep <= 0:
        raise InvalidValue(f'rate_hz = {rate_hz!r}, timestep = {timestep!r}; expected both > 0')
    return max(1, round(1.0 / (rate_hz * timestep)))
