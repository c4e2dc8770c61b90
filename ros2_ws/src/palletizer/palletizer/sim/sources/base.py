"""The contract every carton source honours: present the next carton, stop, and report state."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import mujoco

from palletizer.core.errors import PalletizerError

__all__ = [
    'JitterFn',
    'Presented',
    'RestMeter',
    'RestWatch',
    'Source',
    'SourceError',
    'SourceState',
    'StepWorld',
]

# (index, attempt) -> (dx [m], dy [m], dyaw [rad]); palletizer.core.loads.staging_jitter bound to
# one (level, seed).
JitterFn = Callable[[int, int], tuple[float, float, float]]


class SourceError(PalletizerError):
    """A source was used against its contract (unknown package, bad geometry, load that never fits)."""


@dataclass(frozen=True)
class Presented:
    """A carton measured at rest where the arm can take it."""

    package_id: str
    index: int


@dataclass(frozen=True)
class SourceState:
    """What a source reports each cycle (goes into the `perceive` payload, docs/levels.md §2.3).

    pending: cartons not yet released (the presented one included).
    exhausted: nothing left to present; how a good episode ends, not a failure.
    jammed: a carton never arrived at rest within the timeout; the episode ends in `timeout`.
    extras: source-specific figures (truck: `columns`, `load_drift_mm`).
    """

    kind: str
    pending: int
    exhausted: bool
    jammed: bool
    extras: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class StepWorld(Protocol):
    """The physics a source may advance; the Cell implements it so the arm servos keep running."""

    @property
    def model(self) -> mujoco.MjModel: ...

    @property
    def data(self) -> mujoco.MjData: ...

    @property
    def time(self) -> float:
        """Simulated time [s]."""
        ...

    def step(self, n: int) -> None:
        """Advance `n` physics steps, calling every source's before_step before each one."""
        ...


@runtime_checkable
class Source(Protocol):
    """A carton source: table, conveyor or truck."""

    kind: str

    def scenery_xml(self) -> str:
        """Worldbody MJCF of the source's furniture."""
        ...

    def cartons_xml(self) -> str:
        """Worldbody MJCF of every carton at its staged pose (store, trailer)."""
        ...

    def bind(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Resolve ids after compile; must be called before the first step."""
        ...

    def before_step(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Drive belts and lifts; called before every physics step."""
        ...

    def present(self, world: StepWorld) -> Presented | None:
        """Step until the next carton is measured at rest at the station; None if none comes."""
        ...

    def release(self, package_id: str) -> None:
        """The arm took the presented carton (or gave up on it and retracted)."""
        ...

    def state(self) -> SourceState:
        """Pending count, exhausted, jammed and extras."""
        ...

    def forecast(self) -> list[str]:
        """Package ids the source can see coming, next first; [] where it sees nothing ahead."""
        ...


class RestMeter:
    """Tells when a speed has stayed below a threshold for a sustained time (docs/levels.md §2.3).

    A single low sample is not rest: a bouncing carton passes through zero speed.
    """

    def __init__(self, threshold: float, hold: float) -> None:
        """`threshold` [m/s], `hold` [s]."""
        self._threshold = threshold
        self._hold = hold
        self._since: float | None = None

    def reset(self) -> None:
        """Forget the current run of low samples."""
        self._since = None

    def update(self, time: float, speed: float) -> bool:
        """Feed one sample at `time` [s]; True once below threshold for at least `hold`."""
        if speed >= self._threshold:
            self._since = None
            return False
        if self._since is None:
            self._since = time
        # A hair of slack so a hold of 0.10 s sampled every 20 ms is met on the sixth sample.
        return time - self._since >= self._hold - 1e-9


class RestWatch:
    """A RestMeter a source feeds from its before_step every `period` [s] of simulated time.

    The line's sensors watch the station all along, as its PLC does, not only while the
    palletizer waits: a carton that came to rest while the arm was away (crossing to the
    pallet, placing) is reported at once by present() instead of being watched anew for
    rest_time from the moment it is asked for. The samples fall at the same 50 Hz as the wait
    in present() took them; physics is not touched.
    """

    def __init__(self, threshold: float, hold: float, period: float = 0.02) -> None:
        """`threshold` [m/s] and `hold` [s] as RestMeter; `period` [s] between samples."""
        self._meter = RestMeter(threshold, hold)
        self._period = period
        self._next = -math.inf
        self.resting = False

    def due(self, time: float) -> bool:
        """True when a sample is due at `time` [s] (then the next is one period on)."""
        if time + 1e-9 < self._next:
            return False
        self._next = time + self._period
        return True

    def update(self, time: float, speed: float) -> bool:
        """Feed one sample; `resting` says whether the speed stayed below the threshold for
        the hold. An infinite speed (nothing to watch, or not where it should rest) restarts it."""
        self.resting = self._meter.update(time, speed)
        return self.resting

    def clear(self) -> None:
        """Nothing to watch: forget the run of low samples, keep the sampling cadence."""
        self._meter.reset()
        self.resting = False
