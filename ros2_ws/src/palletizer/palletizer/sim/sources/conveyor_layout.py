"""Layout of the conveyor and table lines: their geometry, the positions derived from it
and where each carton is staged at build time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.config.cell import CellConfig
from palletizer.sim.cartons import CartonLike
from palletizer.sim.sources.base import JitterFn

__all__ = ['LineParams', 'Stage', 'StorePlan', 'TableTop', 'conveyor_params', 'plan_store']


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


def conveyor_params(cell: CellConfig | None = None) -> LineParams:
    """LineParams of the conveyor, from the `conveyor` block of cell.yaml (Config.cell) when
    given."""
    if cell is None:
        return LineParams()
    c = cell.conveyor
    cx, cy = c.centre
    length, width = c.size
    return LineParams(
        kind='conveyor',
        belt_x=(cx - length / 2.0, cx + length / 2.0),
        belt_y=cy,
        belt_width=width,
        top=c.top,
        speed=c.speed,
        friction=c.friction,
        station=c.station,
        station_tol=c.station_tol,
        rest_speed=c.rest_speed,
        rest_time=c.rest_time,
        timeout_s=c.timeout_s,
    )


@dataclass(frozen=True)
class Stage:
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


@dataclass(frozen=True)
class StorePlan:
    """Where plan_store() staged the load, and the store length that follows from it.

    stages: staged pose by carton index. at_station, held: the carton staged at the station
    and the one at the hold point (None when there is none). store_x0: upstream end of the
    store queue belt [m].
    """

    stages: dict[int, Stage]
    at_station: int | None
    held: int | None
    store_x0: float


def plan_store(p: LineParams, draws: Sequence[CartonLike], jitter: JitterFn) -> StorePlan:
    """Stage the first carton at the station, the second at the hold point and the rest
    single file in the store, head at the mouth (`store_hold_front`) on the infeed, in
    arrival order.

    The x jitter is not applied: the queue and the station stop erase it.
    """
    lane = min(p.belt_width, p.platform_width) - 2.0 * p.guide_margin
    stages: dict[int, Stage] = {}
    front = p.store_hold_front - p.store_brake_lead
    hold = p.hold_front
    held: int | None = None
    at_station: int | None = None
    for d in draws:
        _, dy, dyaw = jitter(d.index, 0)
        dy, dyaw = _guided(d.dims, dy, dyaw, lane)
        hx = _x_half(d.dims, dyaw)
        if at_station is None:
            # At the station, on the table or belt, dropped 1 mm to settle at reset.
            z = p.top + d.dims[2] / 2.0 + 0.001
            stages[d.index] = Stage(pos=(p.station[0], p.belt_y + dy, z), yaw=dyaw, dy=dy)
            at_station = d.index
            continue
        if hold is not None and held is None:
            # Already on the belt at the hold point, dropped 1 mm to settle at reset.
            z = p.top + d.dims[2] / 2.0 + 0.001
            x = hold - p.brake_lead - hx
            stages[d.index] = Stage(pos=(x, p.belt_y + dy, z), yaw=dyaw, dy=dy)
            held = d.index
            continue
        z = p.lower_height + d.dims[2] / 2.0 + 0.001  # 1 mm drop settles at reset
        stages[d.index] = Stage(pos=(front - hx, p.belt_y + dy, z), yaw=dyaw, dy=dy)
        front -= 2.0 * hx + p.queue_gap
    # At least a short queue belt even when the load leaves the store (nearly) empty.
    store_x0 = min(front, p.queue_end - 0.02) - p.store_margin
    return StorePlan(stages, at_station, held, store_x0)
