"""Conveyor source: an opaque store, an elevator and two belt sections that stop at the station."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import mujoco
import numpy as np

from palletizer.sim.cartons import CartonHandle, CartonLike, carton_body_xml, yaw_quat
from palletizer.sim.sources.base import (
    JitterFn,
    Presented,
    RestMeter,
    SourceError,
    SourceState,
    StepWorld,
)

__all__ = ['ConveyorSource', 'LineParams', 'TableTop', 'conveyor_params']

# Collision bits (docs/levels.md §1.2): furniture 3 meets cartons (1) and the arm (2); visuals 0.
_SOLID = 'contype="3" conaffinity="3" group="0"'
_VISUAL = 'contype="0" conaffinity="0" group="2"'
_DECK_RGBA = '0.12 0.12 0.13 1'
_FRAME_RGBA = '0.55 0.57 0.60 1'
# The black box: opaque, hides waiting cartons (docs/levels.md §2.3).
_STORE_RGBA = '0.05 0.05 0.06 1'
_MARKER_RGBA = '0.95 0.80 0.10 1'  # yellow station marker (docs/cell.md §3.4)


@dataclass(frozen=True)
class TableTop:
    """A static pick table the line delivers onto: centre (x, y), half sizes, top [m]."""

    centre: tuple[float, float] = (-0.20, -0.80)  # docs/cell.md §3.3, clear of the pallet corner
    half_size: tuple[float, float, float] = (0.36, 0.34, 0.29)
    top: float = 0.58
    friction: tuple[float, float, float] = (0.9, 0.01, 0.001)


@dataclass(frozen=True)
class LineParams:
    """Geometry and timing of a store -> elevator -> two belts delivery line. Lengths [m].

    Defaults are the conveyor of docs/cell.md §3.4 (line A dimensions) with the line-B store and
    elevator in front of it (docs/levels.md §2.3). Elevator and store numbers are not in any
    available reference file; each says why it was chosen.
    """

    kind: str = 'conveyor'
    # Ends 0.35 m past the station (the belt history of docs/levels.md §2.3).
    belt_x: tuple[float, float] = (-1.55, 0.15)
    belt_y: float = -0.80
    belt_width: float = 0.50
    top: float = 0.58  # same height as the pick table so the pick pose is shared
    speed: float = 0.25  # [m/s]
    friction: tuple[float, float, float] = (0.9, 0.01, 0.001)
    station: tuple[float, float] = (-0.20, -0.80)
    station_tol: float = 0.020
    rest_speed: float = 0.015  # [m/s] lid centre; between chatter (~9 mm/s) and bounce (~300)
    rest_time: float = 0.10  # [s] sustained (docs/levels.md §2.3)
    timeout_s: float = 25.0  # [s] simulated, per present() call
    # On the surface = centre within this of surface + H/2 (docs/levels.md §2.3).
    ride_tol: float = 0.04
    max_tilt: float = math.radians(10.0)  # more than this and the carton has tipped: a jam
    # Belts stop this far short of the target: a carton on a belt that stops dead slides
    # v^2 / (2 mu g) = 0.25^2 / (2 0.95 9.81) = 3.4 mm before it rests.
    brake_lead: float = 0.0035
    table: TableTop | None = None
    deck_thickness: float = 0.04
    elevator_depth: float = 0.75  # along X: the largest rotated footprint (0.55 x 0.40 at 30 deg
    # = 0.68 m) fits with margin, so the carton never touches the belt end while lifting
    elevator_side: float = 0.05  # platform wider than the belt by this on each side
    lower_height: float = 0.20  # store floor / elevator low stop: the line-B value is unknown
    # [s] cosine profile: peak 1.9 m/s^2 for 0.38 m, well under g. 1.6 s (0.73 m/s^2) made the
    # elevator the line's bottleneck once the arm waited above the station: level 11 seed 1 at
    # speed 1 waited 0.8, 0.3 and 1.1 s for cartons 2-4, 0.12 s each (the rest check) at 1.0 s
    # with store_speed 0.5.
    lift_time: float = 1.0
    seam_gap: float = 0.003  # air between neighbouring decks, so moving decks never touch
    infeed_length: float = 0.40  # metering belt between the store queue and the elevator
    store_gap: float = 0.10  # black-box mouth upstream of the elevator (docs/levels.md §2.3 `gap`)
    store_speed: float = (
        0.50  # [m/s] store queue and infeed belts, inside the black box (see lift_time)
    )
    queue_gap: float = 0.05  # air between waiting cartons in the store
    store_height: float = 1.25  # black box (docs/levels.md §2.3)
    store_margin: float = 0.15
    guide_margin: float = 0.01  # side guides keep the rotated footprint this far inside the belt
    # Accumulation: the next carton waits with its front this far upstream of the end of the
    # section before the station's section, and at least this far behind a stopped carton
    # ahead. 20 mm keeps it off the seam after the 3.4 mm brake slide; with the largest rotated
    # footprint (0.68 m) at the table centre, about 40 mm of air remain to the presented carton.
    # The store head waiting for the elevator stops as far short of the infeed end (or 10 mm
    # behind the mouth, whichever is first: see store_hold_front).
    hold_margin: float = 0.02
    # A section starts running when a carton that must move comes this close to it, so the
    # leading edge never meets a still deck.
    drive_lead: float = 0.01

    @property
    def store_brake_lead(self) -> float:
        """brake_lead for the store's faster decks: the slide grows with the speed squared."""
        return self.brake_lead * (self.store_speed / self.speed) ** 2

    @property
    def platform_width(self) -> float:
        """Elevator platform and store width [m]."""
        return self.belt_width + 2.0 * self.elevator_side

    @property
    def platform_x(self) -> tuple[float, float]:
        """X range of the elevator platform [m]."""
        x1 = self.belt_x[0] - self.seam_gap
        return (x1 - self.elevator_depth, x1)

    @property
    def infeed_x(self) -> tuple[float, float]:
        """X range of the metering belt between store queue and elevator [m]."""
        x1 = self.platform_x[0] - self.seam_gap
        return (x1 - self.infeed_length, x1)

    @property
    def queue_end(self) -> float:
        """Downstream end of the store queue belt [m]."""
        return self.infeed_x[0] - self.seam_gap

    @property
    def mouth_x(self) -> float:
        """Face of the black box with the mouth [m]."""
        return self.platform_x[0] - self.store_gap

    @property
    def store_hold_front(self) -> float:
        """Front edge [m] of the store head waiting for the elevator: on the infeed, behind the
        mouth, so the opaque store still hides it."""
        return min(self.infeed_x[1] - self.hold_margin, self.mouth_x - 0.01)

    @property
    def sections(self) -> tuple[tuple[str, float, float], ...]:
        """(drive, x0, x1) of every separately driven deck downstream of the elevator, in order.

        The belt splits at its middle into belt_a and belt_b; a table line ends in the table.
        """
        mid = 0.5 * (self.belt_x[0] + self.belt_x[1])
        decks = [
            (f'{self.kind}_belt_a', self.belt_x[0], mid - self.seam_gap / 2),
            (f'{self.kind}_belt_b', mid + self.seam_gap / 2, self.belt_x[1]),
        ]
        if self.table is not None:
            cx, hx = self.table.centre[0], self.table.half_size[0]
            decks.append(('pick_table', cx - hx, cx + hx))
        return tuple(decks)

    @property
    def hold_front(self) -> float | None:
        """Front edge [m] of a carton waiting at the accumulation point; None when there is none.

        The point lies `hold_margin` short of the downstream end of the section before the one
        the station stands on, so the drive under a presented carton can stop while the ones
        upstream still run. A station on the first section leaves no room to hold.
        """
        decks = self.sections
        at = max((i for i, d in enumerate(decks) if d[1] <= self.station[0]), default=0)
        if at == 0:
            return None
        return decks[at - 1][2] - self.hold_margin


def conveyor_params(cell: Mapping[str, Any] | None = None) -> LineParams:
    """LineParams of the conveyor, read from the `conveyor:` block of cell.yaml when given."""
    if cell is None or 'conveyor' not in cell:
        return LineParams()
    c = cell['conveyor']
    cx, cy = c['centre']
    length, width = c['size']
    return LineParams(
        kind='conveyor',
        belt_x=(cx - length / 2.0, cx + length / 2.0),
        belt_y=float(cy),
        belt_width=float(width),
        top=float(c['top']),
        speed=float(c['speed']),
        friction=tuple(c['friction']),
        station=tuple(c['station']),
        station_tol=float(c['station_tol']),
        rest_speed=float(c['rest_speed']),
        rest_time=float(c['rest_time']),
        timeout_s=float(c['timeout_s']),
    )


class _Lift(Enum):
    DOWN = 'down'
    LIFTING = 'lifting'
    UP = 'up'
    LOWERING = 'lowering'


@dataclass(frozen=True)
class _Stage:
    """Staged pose of one carton in the store: centre [m], yaw [rad], lateral offset dy [m]."""

    pos: tuple[float, float, float]
    yaw: float
    dy: float


def _guided(
    dims: tuple[float, float, float], dy: float, dyaw: float, width: float
) -> tuple[float, float]:
    """Clamp staging (dy, dyaw) so the rotated footprint fits a lane `width` wide.

    Side guides on the store belt would square a carton up the same way. Without them a
    0.535 x 0.356 carton at 25 deg (level 23, seed 1) spans 0.55 m on a 0.50 m belt.
    """
    length, wide = dims[0], dims[1]

    def span(a: float) -> float:
        return length * abs(math.sin(a)) + wide * abs(math.cos(a))

    if span(dyaw) > width:
        if span(0.0) > width:
            dyaw = 0.0
        else:
            lo, hi = 0.0, abs(dyaw)
            for _ in range(40):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if span(mid) <= width else (lo, mid)
            dyaw = math.copysign(lo, dyaw)
    room = max(0.0, (width - span(dyaw)) / 2.0)
    return float(np.clip(dy, -room, room)), float(dyaw)


def _x_half(dims: tuple[float, float, float], yaw: float) -> float:
    return 0.5 * (dims[0] * abs(math.cos(yaw)) + dims[1] * abs(math.sin(yaw)))


def _v(values: Sequence[float]) -> str:
    return ' '.join(f'{v:.6g}' for v in values)


def _box(
    name: str | None,
    centre: Sequence[float],
    half: Sequence[float],
    attrs: str,
    rgba: str,
    extra: str = '',
) -> str:
    label = f'name="{name}" ' if name else ''
    return (
        f'<geom {label}type="box" pos="{_v(centre)}" size="{_v(half)}" {attrs} '
        f'rgba="{rgba}" {extra}/>'
    )


def _fric(f: Sequence[float]) -> str:
    return f'friction="{_v(f)}"'


def _deck_body(
    name: str, centre: Sequence[float], half: Sequence[float], friction: Sequence[float]
) -> str:
    """A kinematic deck: a body on an X slide whose velocity (never position) is commanded.

    Its joint is reset to 0 and given the belt speed before every step, so contacts see a
    surface moving at belt speed while the deck itself stays put: cartons ride it by friction
    with no slip, as on a real belt, instead of being dragged over a static deck (which rocks
    them and turned a book_s 35 deg over the run).
    """
    return (
        f'<body name="{name}" pos="{_v(centre)}">'
        f'<joint name="{name}_drive" type="slide" axis="1 0 0" armature="1000" damping="0"/>'
        + _box(name, (0.0, 0.0, 0.0), half, _SOLID, _DECK_RGBA, _fric(friction) + ' mass="20"')
        + '</body>'
    )


class ConveyorSource:
    """Cartons wait in a black-box store, ride an elevator up and two belts to the station.

    Nothing teleports after staging. Every moving surface (store queue, infeed, elevator
    rollers, the two belt sections and, on table lines, the powered table top) is a kinematic
    deck whose surface velocity is set before every physics step; cartons move only through
    contact and friction. The elevator is a kinematically driven slide that lifts the carton by
    contact. A carton that tips or leaves the belt never arrives upright at the station, so the
    wait ends as jammed after `timeout_s`.

    The line accumulates: each deck downstream of the elevator is driven on its own, and runs
    only while a carton on it must move and none on it must stay. While one carton is presented
    (or still on its way), the next leaves the raised elevator and waits at the hold point
    (`LineParams.hold_front`): on the conveyor at the downstream end of belt_a while the
    presented carton rests on belt_b, on a table line at the table edge while it rests on the
    table. On release() it moves on to the station and the elevator fetches the one after.
    A running line is full when the pallet build starts: at reset the first carton stands at
    the station (as the reference cell staged its table carton, docs/levels.md §2.3) and the second
    at the hold point, so the first present() only waits for it to rest. Their staging jitter
    (dy, dyaw) is applied there as it would be in the store. Inside the store the head likewise waits at the mouth, on the infeed
    (`LineParams.store_hold_front`), whenever the elevator is not down and empty, and is staged
    there at reset: loading the platform covers 0.49 m plus half the carton instead of 0.80 m
    plus half, 1.2 s less at store speed.
    """

    kind = 'conveyor'

    def __init__(
        self,
        draws: Sequence[CartonLike],
        jitter: JitterFn | None = None,
        params: LineParams | None = None,
    ) -> None:
        """`draws` in arrival order; `jitter(index, attempt)` gives (dx, dy, dyaw) staging offsets."""
        self.p = params or LineParams()
        if self.p.kind != self.kind:
            raise SourceError(
                f'{type(self).__name__}: params.kind = {self.p.kind!r}; expected {self.kind!r}'
            )
        self._draws = list(draws)
        if not self._draws:
            raise SourceError(f'{self.kind}: an empty load; expected at least one carton')
        self._jitter = jitter or (lambda index, attempt: (0.0, 0.0, 0.0))
        self._stages = self._plan_store()
        self._ids = {d.index: d.package_id for d in self._draws}
        self._handles: dict[int, CartonHandle] = {}
        self._joints: dict[str, tuple[int, int]] = {}
        staged = (self._held_at_start, self._station_at_start)
        self._queue: list[int] = [d.index for d in self._draws if d.index not in staged]
        self._loading: int | None = None
        self._lifted: int | None = None
        self._next: int | None = self._held_at_start  # waiting at, or heading to, the hold point
        self._active: int | None = self._station_at_start  # heading to or at the station
        self._presented: Presented | None = None
        self._taken: list[int] = []
        self._jammed = False
        self._phase = _Lift.DOWN
        self._phase_t0 = 0.0
        self._load_rest = RestMeter(0.02, self.p.rest_time)

    # -- layout -------------------------------------------------------------------------------

    def _plan_store(self) -> dict[int, _Stage]:
        """Stage the first carton at the station, the second at the hold point and the rest
        single file in the store, head at the mouth (`store_hold_front`) on the infeed, in
        arrival order.

        The x jitter is not applied: the queue and the station stop erase it.
        """
        p = self.p
        lane = min(p.belt_width, p.platform_width) - 2.0 * p.guide_margin
        stages: dict[int, _Stage] = {}
        front = p.store_hold_front - p.store_brake_lead
        hold = p.hold_front
        self._held_at_start: int | None = None
        self._station_at_start: int | None = None
        for d in self._draws:
            _, dy, dyaw = self._jitter(d.index, 0)
            dy, dyaw = _guided(d.dims, dy, dyaw, lane)
            hx = _x_half(d.dims, dyaw)
            if self._station_at_start is None:
                # At the station, on the table or belt, dropped 1 mm to settle at reset.
                z = p.top + d.dims[2] / 2.0 + 0.001
                stages[d.index] = _Stage(pos=(p.station[0], p.belt_y + dy, z), yaw=dyaw, dy=dy)
                self._station_at_start = d.index
                continue
            if hold is not None and self._held_at_start is None:
                # Already on the belt at the hold point, dropped 1 mm to settle at reset.
                z = p.top + d.dims[2] / 2.0 + 0.001
                x = hold - p.brake_lead - hx
                stages[d.index] = _Stage(pos=(x, p.belt_y + dy, z), yaw=dyaw, dy=dy)
                self._held_at_start = d.index
                continue
            z = p.lower_height + d.dims[2] / 2.0 + 0.001  # 1 mm drop settles at reset
            stages[d.index] = _Stage(pos=(front - hx, p.belt_y + dy, z), yaw=dyaw, dy=dy)
            front -= 2.0 * hx + p.queue_gap
        # At least a short queue belt even when the load leaves the store (nearly) empty.
        self._store_x0 = min(front, p.queue_end - 0.02) - p.store_margin
        return stages

    def staged_offsets(self) -> dict[int, tuple[float, float]]:
        """(dy [m], dyaw [rad]) each carton was staged with, after the side guides."""
        return {i: (s.dy, s.yaw) for i, s in self._stages.items()}

    # -- MJCF -----------------------------------------------------------------------------------

    def scenery_xml(self) -> str:
        """Store, infeed, elevator, the two belt sections (and the table on table lines)."""
        p = self.p
        k = self.kind
        y = p.belt_y
        hw = p.belt_width / 2.0
        pw = p.platform_width / 2.0
        dz = p.deck_thickness / 2.0
        parts: list[str] = []
        mid = 0.5 * (p.belt_x[0] + p.belt_x[1])
        # Two adjoining sections meeting at the middle (line B), each driven on its own so a
        # carton can wait on belt_a while the one ahead rests on belt_b (see before_step).
        for name, a, b in p.sections[:2]:
            parts.append(
                _deck_body(
                    name,
                    ((a + b) / 2, y, p.top - dz),
                    ((b - a) / 2, hw, dz),
                    p.friction,
                )
            )
        length = p.belt_x[1] - p.belt_x[0]
        frame_h = (p.top - p.deck_thickness - 0.002) / 2.0
        parts.append(
            _box(
                f'{k}_belt_frame',
                (mid, y, frame_h),
                (length / 2, hw * 0.8, frame_h),
                _VISUAL,
                _FRAME_RGBA,
            )
        )
        for side in (-1.0, 1.0):
            parts.append(
                _box(
                    None,
                    (mid, y + side * (hw + 0.015), p.top - 0.03),
                    (length / 2, 0.015, 0.035),
                    _VISUAL,
                    _FRAME_RGBA,
                )
            )
        sx, _ = p.station
        parts.append(
            _box(
                f'{k}_station_marker',
                (sx, y + hw + 0.015, p.top + 0.0055),
                (0.01, 0.015, 0.0005),
                _VISUAL,
                _MARKER_RGBA,
            )
        )
        if p.table is not None:
            t = p.table
            base_h = (t.top - p.deck_thickness - 0.001) / 2.0
            parts.append(
                _box(
                    'pick_table_base',
                    (t.centre[0], t.centre[1], base_h),
                    (t.half_size[0], t.half_size[1], base_h),
                    _SOLID,
                    '0.45 0.47 0.50 1',
                )
            )
            parts.append(
                _deck_body(
                    'pick_table',
                    (t.centre[0], t.centre[1], t.top - dz),
                    (t.half_size[0], t.half_size[1], dz),
                    t.friction,
                )
            )
        # Elevator: a platform on a vertical slide with powered rollers, driven kinematically.
        x0, x1 = p.platform_x
        parts.append(
            f'<body name="{k}_elevator" pos="{(x0 + x1) / 2:.6g} {y:.6g} {p.lower_height - dz:.6g}">'
            f'<joint name="{k}_elevator_lift" type="slide" axis="0 0 1" armature="1000" damping="0"/>'
            f'<joint name="{k}_elevator_drive" type="slide" axis="1 0 0" armature="1000" damping="0"/>'
            + _box(
                f'{k}_elevator_platform',
                (0.0, 0.0, 0.0),
                ((x1 - x0) / 2, pw, dz),
                _SOLID,
                _FRAME_RGBA,
                _fric(p.friction) + ' mass="20"',
            )
            + '</body>'
        )
        for side in (-1.0, 1.0):
            parts.append(
                _box(
                    None,
                    (x0 - 0.03, y + side * (pw + 0.04), p.store_height / 2),
                    (0.03, 0.03, p.store_height / 2),
                    _VISUAL,
                    _FRAME_RGBA,
                )
            )
        # Store: a queue belt and a metering infeed belt, inside an opaque non-colliding box.
        floor_z = p.lower_height - dz
        qx0, qx1 = self._store_x0, p.queue_end
        parts.append(
            _deck_body(
                f'{k}_store_queue',
                ((qx0 + qx1) / 2, y, floor_z),
                ((qx1 - qx0) / 2, pw, dz),
                p.friction,
            )
        )
        ix0, ix1 = p.infeed_x
        parts.append(
            _deck_body(
                f'{k}_infeed', ((ix0 + ix1) / 2, y, floor_z), ((ix1 - ix0) / 2, pw, dz), p.friction
            )
        )
        plinth = (p.lower_height - p.deck_thickness - 0.002) / 2.0
        parts.append(
            _box(
                f'{k}_store_plinth',
                ((qx0 + ix1) / 2, y, plinth),
                ((ix1 - qx0) / 2, pw, plinth),
                _VISUAL,
                _DECK_RGBA,
            )
        )
        parts.append(self._black_box_xml())
        return ''.join(parts)

    def _black_box_xml(self) -> str:
        p = self.p
        k = self.kind
        y = p.belt_y
        wall = 0.05
        bx0 = self._store_x0 - wall
        bx1 = p.mouth_x
        hy = p.platform_width / 2.0 + p.store_margin
        h = p.store_height
        tallest = max(d.dims[2] for d in self._draws)
        mouth_w = p.belt_width / 2.0 + 0.02  # docs/levels.md §2.3: just wider than the belt
        mouth_top = p.lower_height + tallest + 0.05
        cx = (bx0 + bx1) / 2.0
        lx = (bx1 - bx0) / 2.0
        g = [
            _box(
                f'{k}_store_roof', (cx, y, h - wall / 2), (lx, hy, wall / 2), _VISUAL, _STORE_RGBA
            )
        ]
        for side, tag in ((-1.0, 'right'), (1.0, 'left')):
            g.append(
                _box(
                    f'{k}_store_{tag}',
                    (cx, y + side * (hy - wall / 2), h / 2),
                    (lx, wall / 2, h / 2),
                    _VISUAL,
                    _STORE_RGBA,
                )
            )
        g.append(
            _box(
                f'{k}_store_back',
                (bx0 + wall / 2, y, h / 2),
                (wall / 2, hy, h / 2),
                _VISUAL,
                _STORE_RGBA,
            )
        )
        fx = bx1 - wall / 2
        side_w = (hy - mouth_w) / 2.0
        for side in (-1.0, 1.0):
            g.append(
                _box(
                    None,
                    (fx, y + side * (mouth_w + side_w), h / 2),
                    (wall / 2, side_w, h / 2),
                    _VISUAL,
                    _STORE_RGBA,
                )
            )
        g.append(
            _box(
                None,
                (fx, y, (mouth_top + h) / 2),
                (wall / 2, mouth_w, (h - mouth_top) / 2),
                _VISUAL,
                _STORE_RGBA,
            )
        )
        return ''.join(g)

    def cartons_xml(self) -> str:
        """Every carton parked in the store (staging happens here, at build time)."""
        return ''.join(
            carton_body_xml(d, self._stages[d.index].pos, yaw_quat(self._stages[d.index].yaw))
            for d in self._draws
        )

    # -- runtime --------------------------------------------------------------------------------

    def _deck_names(self) -> list[str]:
        k = self.kind
        names = [f'{k}_belt_a', f'{k}_belt_b', f'{k}_elevator', f'{k}_infeed', f'{k}_store_queue']
        return names + (['pick_table'] if self.p.table is not None else [])

    def bind(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Resolve carton and deck ids; put the elevator at its low stop, every deck still."""
        self._handles = {d.index: CartonHandle.bind(model, d.index, d.dims) for d in self._draws}
        joints = [f'{n}_drive' for n in self._deck_names()] + [f'{self.kind}_elevator_lift']
        for name in joints:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
            if jid < 0:
                raise SourceError(
                    f'{self.kind}: joint {name!r} missing; compile scenery_xml() first'
                )
            self._joints[name] = (int(model.jnt_qposadr[jid]), int(model.jnt_dofadr[jid]))
        for qadr, dadr in self._joints.values():
            data.qpos[qadr] = 0.0
            data.qvel[dadr] = 0.0

    def _drive(self, data: mujoco.MjData, joint: str, qpos: float, qvel: float) -> None:
        qadr, dadr = self._joints[joint]
        data.qpos[qadr] = qpos
        data.qvel[dadr] = qvel

    def _lift_height(self, t: float) -> tuple[float, float]:
        """Commanded elevator (height above the low stop [m], velocity [m/s]); ends phases."""
        p = self.p
        travel = p.top - p.lower_height
        if self._phase in (_Lift.DOWN, _Lift.UP):
            return (0.0 if self._phase is _Lift.DOWN else travel), 0.0
        s = min(max((t - self._phase_t0) / p.lift_time, 0.0), 1.0)
        z = 0.5 * travel * (1.0 - math.cos(math.pi * s))
        v = 0.5 * travel * math.pi / p.lift_time * math.sin(math.pi * s)
        if self._phase is _Lift.LOWERING:
            z, v = travel - z, -v
        if s >= 1.0:
            self._phase = _Lift.UP if self._phase is _Lift.LIFTING else _Lift.DOWN
        return z, v

    def before_step(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Run the line for one physics step: elevator, loading, delivery."""
        p = self.p
        k = self.kind
        t = float(data.time)
        z, vz = self._lift_height(t)
        pcx = 0.5 * (p.platform_x[0] + p.platform_x[1])
        v_queue = v_infeed = v_rollers = 0.0

        # Loading: the head of the store rolls onto the platform while it is down and empty;
        # while the platform is away it advances to the mouth and waits there, inside the box.
        if self._loading is None and self._queue:
            self._loading = self._queue.pop(0)
            self._load_rest.reset()
        if self._loading is not None:
            h = self._handles[self._loading]
            x = float(data.xpos[h.body][0])
            hx = float(h.half_extents(data)[0])
            if self._phase is _Lift.DOWN:
                move = x < pcx - p.store_brake_lead
                if move:
                    v_rollers = p.store_speed
                    self._load_rest.reset()
                elif self._load_rest.update(t, h.lid_speed(model, data)):
                    self._lifted, self._loading = self._loading, None
                    self._phase, self._phase_t0 = _Lift.LIFTING, t
            else:
                move = x + hx < p.store_hold_front - p.store_brake_lead
            if move:
                v_infeed = p.store_speed
                if x - hx < p.queue_end + 0.01:
                    v_queue = p.store_speed  # the whole queue closes up behind the head

        # Delivery: the active carton heads for the station; the next one may leave the raised
        # platform for the hold point meanwhile; the one after waits on the platform.
        if self._active is None and self._presented is None and self._next is not None:
            self._active, self._next = self._next, None
        if self._phase is _Lift.UP:
            if self._lifted is not None:
                if self._active is None and self._presented is None:
                    self._active, self._lifted = self._lifted, None
                elif self._next is None and p.hold_front is not None:
                    self._next, self._lifted = self._lifted, None
            if self._lifted is None and self._platform_clear(data):
                self._phase, self._phase_t0 = _Lift.LOWERING, t
        running = self._running_decks(data)
        if self._phase is _Lift.UP and f'{k}_elevator' in running:
            v_rollers = p.speed

        self._drive(data, f'{k}_elevator_lift', z, vz)
        self._drive(data, f'{k}_elevator_drive', 0.0, v_rollers)
        self._drive(data, f'{k}_store_queue_drive', 0.0, v_queue)
        self._drive(data, f'{k}_infeed_drive', 0.0, v_infeed)
        for deck, _, _ in p.sections:
            self._drive(data, f'{deck}_drive', 0.0, p.speed if deck in running else 0.0)

    def _running_decks(self, data: mujoco.MjData) -> set[str]:
        """Decks downstream of the store that run this step (the raised elevator included).

        A carton must move while short of its target (active: the station; next: the hold
        point, or `hold_margin` behind a stopped carton ahead); each target is undershot by
        `brake_lead`. A deck under a carton that must stay is stopped, and so is every carton
        touching a stopped deck (it would be dragged askew); a deck runs when a carton that
        must move stands on it or comes within `drive_lead` of it.
        """
        p = self.p
        decks = list(p.sections)
        if self._phase is _Lift.UP:
            decks.insert(0, (f'{self.kind}_elevator', *p.platform_x))
        spans: dict[int, tuple[float, float]] = {}
        moves: dict[int, bool] = {}
        for index in (self._active, self._next, self._lifted):
            if index is None:
                continue
            h = self._handles[index]
            x = float(data.xpos[h.body][0])
            hx = float(h.half_extents(data)[0])
            spans[index] = (x - hx, x + hx)
        if self._active is not None:
            x = float(data.xpos[self._handles[self._active].body][0])
            moves[self._active] = (
                self._presented is None
                and x < p.station[0] - p.brake_lead
                and self._station_clear(data)
            )
        if self._next is not None:
            target = p.hold_front if p.hold_front is not None else -math.inf
            if self._active is not None and not moves[self._active]:
                target = min(target, spans[self._active][0] - p.hold_margin)
            moves[self._next] = spans[self._next][1] < target - p.brake_lead
        if self._lifted is not None:
            moves[self._lifted] = False  # waits on the platform for the hold point to free

        def on(span: tuple[float, float], lead: float) -> set[str]:
            return {name for name, x0, x1 in decks if span[1] + lead > x0 and span[0] < x1}

        while True:
            stopped: set[str] = set().union(*(on(spans[i], 0.0) for i in spans if not moves[i]))
            stuck = [i for i in spans if moves[i] and on(spans[i], 0.0) & stopped]
            if not stuck:
                break
            for i in stuck:
                moves[i] = False
        wanted = set().union(*(on(spans[i], p.drive_lead) for i in spans if moves[i]))
        return wanted - stopped

    def _station_clear(self, data: mujoco.MjData) -> bool:
        """The line's presence sensor over the station: False while the carton taken last
        still reaches into the corridor the next one passes through on its way in (over the
        belt from the hold point to the station, up to the load's tallest carton + 50 mm). The
        arm weighs the carton it lifted there and then carries it away; the next one rolls in
        once it has left."""
        if not self._taken:
            return True
        p = self.p
        h = self._handles[self._taken[-1]]
        corners = h.bottom_corners(data)
        lo = corners.min(axis=0)
        hi = corners.max(axis=0)
        tallest = max(d.dims[2] for d in self._draws)
        upstream = p.hold_front if p.hold_front is not None else p.belt_x[0]
        upstream -= 0.7  # the arriving carton's length, at most
        return bool(
            lo[2] > p.top + tallest + 0.05
            or hi[2] + h.dims[2] < p.top
            or hi[0] < upstream
            or lo[0] > p.station[0] + 0.35
            or hi[1] < p.belt_y - p.belt_width / 2
            or lo[1] > p.belt_y + p.belt_width / 2
        )

    def _platform_clear(self, data: mujoco.MjData) -> bool:
        """True when no delivered carton still stands over the raised platform."""
        for index in (self._active, self._next):
            if index is None:
                continue
            h = self._handles[index]
            back = data.xpos[h.body][0] - h.half_extents(data)[0]
            if back <= self.p.platform_x[1] + 0.01:
                return False
        return True

    def _arrived(self, data: mujoco.MjData, h: CartonHandle) -> bool:
        """At the station, upright, and standing on the belt (not fallen or tipped)."""
        p = self.p
        pos = data.xpos[h.body]
        return bool(
            abs(pos[0] - p.station[0]) <= p.station_tol
            and h.tilt(data) <= p.max_tilt
            and abs(pos[2] - (p.top + h.dims[2] / 2.0)) <= p.ride_tol
        )

    def present(self, world: StepWorld) -> Presented | None:
        """Step until the next carton rests at the station (lid slower than rest_speed for rest_time)."""
        if self._presented is not None:
            return self._presented
        if self._jammed or not self._pending():
            return None
        p = self.p
        tick = max(1, round(0.02 / float(world.model.opt.timestep)))  # 50 Hz measurement
        rest = RestMeter(p.rest_speed, p.rest_time)
        t0 = world.time
        while world.time - t0 < p.timeout_s:
            world.step(tick)
            if self._active is None:
                continue
            h = self._handles[self._active]
            if self._arrived(world.data, h):
                if rest.update(world.time, h.lid_speed(world.model, world.data)):
                    self._presented = Presented(self._ids[self._active], self._active)
                    return self._presented
            else:
                rest.reset()
        self._jammed = True
        return None

    def release(self, package_id: str) -> None:
        """The arm took the presented carton; the one at the hold point moves on to the station."""
        if self._presented is None or self._presented.package_id != package_id:
            current = self._presented.package_id if self._presented else None
            raise SourceError(
                f'{self.kind}: release({package_id!r}) but the presented carton is {current!r}'
            )
        self._taken.append(self._presented.index)
        self._presented = None
        self._active = None

    def _pending(self) -> int:
        return len(self._draws) - len(self._taken)

    def state(self) -> SourceState:
        """Pending count, exhausted and jammed."""
        pending = self._pending()
        return SourceState(
            kind=self.kind, pending=pending, exhausted=pending == 0, jammed=self._jammed
        )

    def forecast(self) -> list[str]:
        """The store is opaque: nothing is seen ahead."""
        return []
