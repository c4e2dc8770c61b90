"""The ports the episode loop (core/episode.py) is written against, and how a run stops.

Each port is one side of the loop's conversation with the world: the cell (and its source),
perception, the gauge, the executor, the referee and the sink. The nodes implement them over ROS
services and actions (nodes/director_ports.py, nodes/director_motion.py, nodes/director_sink.py,
nodes/sensing_ports.py), the in-process wiring over the simulated cell directly (wiring/). A
port that cannot go on raises EpisodeAborted, and the episode closes as aborted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from palletizer.core.contracts import (
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
)
from palletizer.core.errors import PalletizerError
from palletizer.core.vocab import CyclePhase

__all__ = [
    'CellPort',
    'EpisodeAborted',
    'ExecutorPort',
    'GaugePort',
    'MotionOutcome',
    'PerceptionPort',
    'Presented',
    'RefereePort',
    'STOP_REASON_ENV',
    'SinkPort',
    'stop_cause',
]


# Names the file where a launcher that stops the graph writes why (a node died, a signal), so
# the episode it interrupts is closed with that cause rather than a bare "stopped".
STOP_REASON_ENV = 'PALLETIZER_STOP_REASON_FILE'


def stop_cause(launcher_pid: int | None = None) -> str:
    """Why the graph is stopping, for an episode closed by the stop: the launcher's reason
    (read from $PALLETIZER_STOP_REASON_FILE), else that the launcher (`launcher_pid`, the
    parent the node started under) died, else a signal from outside the launcher."""
    path = os.environ.get(STOP_REASON_ENV, '')
    if path:
        try:
            reason = Path(path).read_text(encoding='utf-8').strip()
        except OSError:
            reason = ''  # no reason written: the launcher did not stop the graph
        if reason:
            return f'the run was stopped: {reason}'
        # Launched, with no reason written: the launcher died, or a signal came from elsewhere.
        # When the launcher is killed, its children are first handed to its other threads
        # (and get their SIGTERM as the spawning thread dies), so the parent changes only once
        # the whole launcher is gone: wait a moment for that.
        deadline = time.monotonic() + 1.0
        while launcher_pid is not None and time.monotonic() < deadline:
            if os.getppid() != launcher_pid:
                return 'the run was stopped: its launcher died'
            time.sleep(0.05)
    return 'the run was stopped by a signal from outside its launcher (SIGINT or SIGTERM)'


class EpisodeAborted(PalletizerError):
    """Raised by a port when the run is being stopped (Ctrl-C, SIGTERM, a crashed node), or
    when a node cannot serve a request at all (an invalid request, a failed fusion): the
    episode closes as aborted, with no failure cause invented."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Presented:
    """What the source offered: the carton id (None when nothing came) and its state."""

    package_id: str | None
    pending: int
    exhausted: bool
    jammed: bool
    extras: Mapping[str, Any] = field(default_factory=dict)
    forecast: tuple[str, ...] = ()


@dataclass(frozen=True)
class MotionOutcome:
    """Result of a pick or a place: ok, or a closed-vocabulary cause with a reason."""

    ok: bool
    cause: FailureCause | None = None
    reason: str = ''
    holding: bool = False  # still holding the carton after a failed place
    details: Mapping[str, Any] = field(default_factory=dict)
    # Where the call's time went, when the executor knows: (phase, sim time since the reset
    # [s] at which it began), in order (core/cycle.py); empty when it does not.
    phases: tuple[tuple[CyclePhase, float], ...] = ()


class CellPort(Protocol):
    """The cell as the episode sees it. reset: the number of cartons in the load, or -1 when
    the cell does not say (a real line): the episode then counts the cartons that come."""

    def reset(self, level: int, seed: int) -> int: ...
    def present(self) -> Presented: ...
    def release(self, package_id: str) -> None: ...
    def settle(self, seconds: float) -> None: ...
    def sim_time(self) -> float: ...  # [s] since the reset


class PerceptionPort(Protocol):
    """Detection and the height map. Optional: `measure_held(observation) -> Observation |
    None`, called after every successful pick with the carton lifted clear: the observation
    with what only an in-hand view measures (its height); None when it cannot, with the why
    in the optional attribute `held_reason`. Optional: `measure_lid(observation) ->
    Observation | None`, called before a carton is taken back from the buffer: the carton as
    it stands (lid height, and the height from its support); None when the lid is not seen
    (why in `lid_reason`), and the believed pose stands."""

    oracle: bool

    def detect(self, package_id: str) -> Observation | None: ...
    def heightmap(self) -> HeightMap: ...


class GaugePort(Protocol):
    """In-hand weighing. Optional: `zero()`, a tare of the empty tool, called once the empty arm
    waits above the source after each place (its hold counts towards the settle), so a
    drifting wrist sensor is zeroed again before the next weigh; gauges without it skip it."""

    oracle: bool

    def weigh(self, observation: Observation) -> PackageSpec | None: ...  # None: no payload


class ExecutorPort(Protocol):
    """Pick and place. Optional: `park() -> MotionOutcome`, the Cartesian move to the photo
    park pose, called before every photo; executors without it take photos where they stand.
    Optional: `ready(above: Observation | None = None) -> MotionOutcome`, the empty arm's move
    to wait above the source (over the carton `above`, seen there, when given), called after
    every successful place while the stack settles; a refusal leaves the arm where it is."""

    def pick(self, observation: Observation) -> MotionOutcome: ...
    def place(
        self, plan: PlacementPlan, spec: PackageSpec, heightmap: HeightMap
    ) -> MotionOutcome: ...
    def return_to_source(self, observation: Observation) -> MotionOutcome: ...


class RefereePort(Protocol):
    """Simulator truth for scoring only: world poses (x, y, z, yaw) of the given cartons.
    Where there is no simulator (a real cell), the palletizer's own placement check takes its
    place: then the optional `expect(package_id, plan, spec)` is told each planned carton
    before `poses` is asked for it, and the optional `lost(package_id)` each carton that left
    the gripper on its way to its slot; `poses` may leave out a lost carton it cannot find,
    which then counts as not placed.
    Optional: `cog_offsets(package_ids) -> Mapping[str, (3,)]`, their true CoG offsets [m] in
    the body frame whose yaw `poses` gives: the reported stability margin then uses them (the
    weighed offsets are in the frame the carton was observed in, which may be a half turn from
    the body's); referees without it report with the weighed offsets. Optional:
    `masses(package_ids) -> Mapping[str, float]`, their true masses [kg], which the measure
    against a pallet spec uses (weighed masses where the referee has none)."""

    def poses(
        self, package_ids: Sequence[str]
    ) -> Mapping[str, tuple[float, float, float, float]]: ...


class SinkPort(Protocol):
    """Where the episode is reported. Optional: `layer_photo(after_seq: int) -> None`, take
    the photos now (the arm is parked); sinks without it take none."""

    def event(
        self, seq: int, ts: float, kind: str, package_id: str, payload: Mapping[str, Any]
    ) -> None: ...
    def placement(self, placement: Placement) -> None: ...
    def pallet_state(self, state: PalletState) -> None: ...
