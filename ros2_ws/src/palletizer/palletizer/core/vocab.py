"""The closed vocabularies: one Enum per closed set, and the one way in from text (`parse`).

A value read from a file, a message or a command line becomes a member through
`Kind.parse(value, what)`, which names the allowed values (and a close match) on a miss. The
telemetry vocabularies match the Platform schema's CHECK constraints (docs/telemetry.md §8.2).
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

from palletizer.core.errors import ConfigError, PalletizerError, TelemetryError, close_match

__all__ = [
    'Closed',
    'CyclePhase',
    'EventKind',
    'GaugeMode',
    'MotionMode',
    'PerceptionMode',
    'PlannerKind',
    'SnapshotView',
    'SourceKind',
    'TelemetryMode',
]

_C = TypeVar('_C', bound='Closed')


class Closed(str, Enum):
    """A closed set of names. Subclasses say what a value is called (`noun`) and which error a
    miss raises (`error`)."""

    @classmethod
    def noun(cls) -> str:
        """What a value of this set is called in an error message."""
        return cls.__name__

    @classmethod
    def error(cls) -> type[PalletizerError]:
        """The error a value outside the set raises."""
        return ConfigError

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every allowed value, in declaration order."""
        return tuple(m.value for m in cls)

    @classmethod
    def parse(
        cls: type[_C],
        value: object,
        what: str | None = None,
        *,
        error: type[PalletizerError] | None = None,
    ) -> _C:
        """The member named `value` (a member passes through).

        Otherwise raises `error` (the set's own by default): "<what> = <value>; expected one of
        <names> (did you mean <closest>?)", `what` defaulting to the set's noun.
        """
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            names = cls.names()
            raise (error or cls.error())(
                f'{what or cls.noun()} = {value!r}; expected one of {", ".join(names)}'
                f'{close_match(str(value), names)}'
            ) from None


class PlannerKind(Closed):
    """The placement planners this package provides (docs/planners.md)."""

    heuristic = 'heuristic'
    beam = 'beam'
    grid = 'grid'

    @classmethod
    def noun(cls) -> str:
        return 'planner'

    @property
    def uses_reach_table(self) -> bool:
        """Whether the planner keeps its plans within the arm's reach table (configs'
        reach_table; core/planning/factory.py loads it for these): all but the grid."""
        return self is not PlannerKind.grid


# The motion speed of each MotionMode: None for no physics, 0 for fast-forward.
_MOTION_SPEED: dict[str, float | None] = {
    'quasi_static': None,
    'fast_forward': 0.0,
    'interpolated': 1.0,
}


class MotionMode(Closed):
    """How an episode's arm moves. quasi_static: no physics, every carton goes exactly where
    planned (planning benchmarks only); fast_forward: physics, the arm set on each waypoint
    (speed 0); interpolated: physics, the trajectories tracked in time (speed 1)."""

    quasi_static = 'quasi_static'
    fast_forward = 'fast_forward'
    interpolated = 'interpolated'

    @classmethod
    def noun(cls) -> str:
        return 'motion mode'

    @property
    def speed(self) -> float | None:
        """The speed an episode runs at in this mode (None: no physics)."""
        return _MOTION_SPEED[self.value]

    @classmethod
    def of_speed(cls, speed: float | None) -> MotionMode:
        """The mode that runs at `speed` (one of None, 0 and 1)."""
        for m in cls:
            if m.speed == speed:
                return m
        raise cls.error()(f'speed {speed!r}; expected one of None, 0.0, 1.0')

    @classmethod
    def physical(cls) -> dict[str, float]:
        """The modes that run the physics: name -> speed."""
        return {m.value: s for m in cls if (s := m.speed) is not None}


class PerceptionMode(Closed):
    """How the height map and the carton detector see. cameras: fused from the pallet cameras and
    found in the pick cameras' images; oracle: read from the simulator (flags the run)."""

    cameras = 'cameras'
    oracle = 'oracle'

    @classmethod
    def noun(cls) -> str:
        return 'perception'


class GaugeMode(Closed):
    """How a held carton is weighed. wrench: from the wrist force/torque sensor; oracle: its
    mass and centre of mass read from the simulator (flags the run)."""

    wrench = 'wrench'
    oracle = 'oracle'

    @classmethod
    def noun(cls) -> str:
        return 'gauge'


class SourceKind(Closed):
    """Where a level's cartons come from (levels.yaml `source`)."""

    table = 'table'
    conveyor = 'conveyor'
    truck = 'truck'

    @classmethod
    def noun(cls) -> str:
        return 'source'


class CyclePhase(Closed):
    """Where a carton's cycle spends its simulated time (core/cycle.py tiles the cycle with
    these). Pick side: wait (the source presents), detect, return (the empty arm travels to
    above the carton), descend, seal, lift, measure (in-hand height), weigh. Place side: plan,
    photo (the park for a finished layer's photo), cross, place (the descent to the release
    pose), release, retract, settle (the stack settles and is measured). dwell: the arm held
    still at a goal's end for the wrist wrench reading; buffer: set-aside and take-back moves.
    """

    wait = 'wait'
    detect = 'detect'
    return_ = 'return'
    descend = 'descend'
    dwell = 'dwell'
    seal = 'seal'
    lift = 'lift'
    measure = 'measure'
    weigh = 'weigh'
    plan = 'plan'
    photo = 'photo'
    cross = 'cross'
    place = 'place'
    release = 'release'
    retract = 'retract'
    settle = 'settle'
    buffer = 'buffer'

    @classmethod
    def noun(cls) -> str:
        return 'cycle phase'


class _Telemetry(Closed):
    """A telemetry vocabulary: a value outside it is a TelemetryError."""

    @classmethod
    def error(cls) -> type[PalletizerError]:
        return TelemetryError


class EventKind(_Telemetry):
    """events.kind: the Platform's CHECK constraint accepts exactly these."""

    perceive = 'perceive'
    plan = 'plan'
    pick = 'pick'
    place = 'place'
    settle = 'settle'
    fail = 'fail'

    @classmethod
    def noun(cls) -> str:
        return 'event kind'


class SnapshotView(_Telemetry):
    """snapshots.view (the predecessor lost photos to `front`, which the CHECK rejects)."""

    top = 'top'
    side = 'side'
    iso = 'iso'
    camera = 'camera'

    @classmethod
    def noun(cls) -> str:
        return 'snapshot view'


class TelemetryMode(_Telemetry):
    """disk: files only; postgres, supabase: files plus that replica; off: write nothing."""

    disk = 'disk'
    postgres = 'postgres'
    supabase = 'supabase'
    off = 'off'

    @classmethod
    def noun(cls) -> str:
        return 'telemetry mode'
