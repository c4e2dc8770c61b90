"""The photo park: a checked tool-down Cartesian move out of the cameras' view (docs/cell.md §3.1).

A joint-space move out of the way once swept the stack (10/10 -> 4/10 with overhang_violation
in the predecessor, docs/telemetry.md §8.8), so the park rises vertically first, crosses above the
stack on an arc around the robot base and descends to the park pose, every sample checked like
a pick or place. Straight lines from the pick station or the pallet to the park pass over the
base, where no branch-continuous IK exists; so does a place planned straight from the park
pose (level 11 seed 1: all three replans of the layer-2 carton failed that way). The next
motion therefore first leaves the park the same way round, to a point above the pallet centre
(`plan_unpark`); returning to where the park started is not safe, as the source may have
staged the next carton under it meanwhile (seen on level 13: the held carton pressed on it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from palletizer.core.motion import (
    CarriedLoad,
    CollisionWorld,
    MotionError,
    MotionPlanner,
    MotionResult,
    Waypoint,
)
from palletizer.core.motion.kinematics import yaw_of

__all__ = ['ParkPose', 'Parked', 'park_waypoints', 'plan_park', 'plan_unpark']

# Largest base-angle step between arc waypoints [rad]: 20 deg chords stay within 1.5 % of the
# arc's radius.
_ARC_STEP = math.radians(20.0)


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


@dataclass(frozen=True)
class ParkPose:
    """TCP park pose for the photos, and where the arm leaves it for: world frame [m], [rad].

    x, y, z, yaw: docs/cell.md §3.1 "park for photos" (pallet.yaml motion.park_xy / park_z), in
    front of the pallet's -y edge, out of the top and side cameras' view of the stack; the yaw
    is reached modulo a half turn (the cup block is symmetric).
    leave_x, leave_y: above the pallet centre (docs/cell.md §3.2), from where straight moves to
    any slot stay over the pallet, away from the base.
    min_radius: the arcs keep the TCP at least this far from the base axis [m]; the failed
    straight crosses passed at 0.2-0.3 m.
    pallet_half, clear_distance: a TCP whose horizontal distance from the pallet footprint
    (centre leave_x, leave_y; half sizes [m]) is at least clear_distance is out of the photos
    already, and the park does not move. Level 11 seed 1, layer-2 photo: taken with the arm at
    the pick station after the lift (0.45 m from the footprint, carton held) the top and side
    views of the pallet equal those from the park pose; the held carton's largest half
    diagonal is 0.34 m.
    """

    x: float = 1.15
    y: float = -1.02
    z: float = 1.05
    yaw: float = 0.0
    leave_x: float = 0.60
    leave_y: float = 0.00
    min_radius: float = 0.45
    pallet_half: tuple[float, float] = (0.60, 0.40)
    clear_distance: float = 0.40

    def __post_init__(self) -> None:
        for name in ('x', 'y', 'z', 'yaw', 'leave_x', 'leave_y', 'min_radius'):
            v = getattr(self, name)
            if not math.isfinite(v):
                raise MotionError(f'ParkPose.{name} = {v!r}; expected a finite number')
        if self.min_radius < 0:
            raise MotionError(f'ParkPose.min_radius = {self.min_radius}; expected >= 0 [m]')
        if len(self.pallet_half) != 2 or not all(
            math.isfinite(v) and v > 0 for v in self.pallet_half
        ):
            raise MotionError(
                f'ParkPose.pallet_half = {self.pallet_half!r}; expected two positive half sizes [m]'
            )
        if not math.isfinite(self.clear_distance) or self.clear_distance <= 0:
            raise MotionError(
                f'ParkPose.clear_distance = {self.clear_distance!r}; expected > 0 [m]'
            )

    def out_of_photos(self, x: float, y: float) -> bool:
        """True when a TCP at (x, y) is clear_distance or more from the pallet footprint."""
        dx = max(abs(x - self.leave_x) - self.pallet_half[0], 0.0)
        dy = max(abs(y - self.leave_y) - self.pallet_half[1], 0.0)
        return math.hypot(dx, dy) >= self.clear_distance


@dataclass(frozen=True, eq=False)
class Parked:
    """A park that was executed: where it ended (q_end [rad]) and the tool yaw before it."""

    q_end: np.ndarray
    yaw_before: float


def _tcp(planner: MotionPlanner, q: np.ndarray) -> tuple[float, float, float, float]:
    T = planner.kin.fk(np.asarray(q, dtype=float))
    if T[2, 2] > -math.cos(1e-4):
        raise MotionError(
            f'start configuration {np.round(q, 4).tolist()} does not point the tool down; '
            'the park is a tool-down Cartesian move'
        )
    return float(T[0, 3]), float(T[1, 3]), float(T[2, 3]), float(yaw_of(T))


def _safe_z(
    planner: MotionPlanner, world: CollisionWorld | None, load: CarriedLoad | None, *z: float
) -> float:
    """Cross height: the stack top + the held carton + stack clearance, >= transit and z."""
    p = planner.params
    top = world.stack_top(p.deck_z) if world is not None else p.deck_z
    held = load.dims[2] + p.cup_gap if load is not None else 0.0
    return max(p.transit_height, top + held + p.stack_clearance, *z)


def _arc(
    planner: MotionPlanner,
    q1: float,
    start: tuple[float, float, float],
    end: tuple[float, float, float],
    z: float,
    min_radius: float,
    name: str,
    other_way: bool = False,
) -> list[Waypoint]:
    """Waypoints at height z from start (x, y, yaw) to end round the base, the shorter way
    unless the base joint would leave its limits, radius blended from start to end (>= min_radius), yaw turning with the arc to the end
    yaw modulo pi."""
    bx, by = float(planner.kin.base_xyz[0]), float(planner.kin.base_xyz[1])
    (x0, y0, yaw0), (x1, y1, yaw1) = start, end
    a0, a1 = math.atan2(y0 - by, x0 - bx), math.atan2(y1 - by, x1 - bx)
    r0, r1 = math.hypot(x0 - bx, y0 - by), math.hypot(x1 - bx, y1 - by)
    # The shorter way round unless it runs the base joint (now at q1) into its limits (0.3 rad
    # margin): at the station q1 can sit near +2 pi (level 14 seed 1: 6.156).
    lo, hi = planner.kin.limits.lower[0] + 0.3, planner.kin.limits.upper[0] - 0.3
    short = _wrap(a1 - a0)
    ways = sorted((short, short - math.copysign(2 * math.pi, short)), key=abs)
    ways = [d for d in ways if lo <= q1 + d <= hi] or ways
    da = ways[-1] if other_way else ways[0]
    # The end yaw is taken modulo a half turn (the 4 x 4 cup block and a carton look the same
    # after one): the turn closest to the base's keeps wrist 3 where it is, since in the
    # working family q6 follows q1 - yaw; a fixed turn ran wrist 3 past 2 pi (level 11 seed 1).
    base = _wrap(yaw1 - yaw0)
    dyaw = min((base + k * math.pi for k in range(-3, 4)), key=lambda c: abs(c - da))
    n = max(1, math.ceil(abs(da) / _ARC_STEP))
    wps = []
    for k in range(1, n + 1):
        u = k / n
        if k == n:
            x, y = x1, y1
        else:
            r = max(r0 + (r1 - r0) * u, min_radius)
            x, y = bx + r * math.cos(a0 + da * u), by + r * math.sin(a0 + da * u)
        wps.append(Waypoint(x, y, z, yaw0 + dyaw * u, None, name))
    return wps


def park_waypoints(
    planner: MotionPlanner,
    q_start: np.ndarray,
    park: ParkPose,
    world: CollisionWorld | None = None,
    load: CarriedLoad | None = None,
    other_way: bool = False,
) -> tuple[Waypoint, ...]:
    """Rise vertically, cross at a safe height on an arc round the base, descend to the park.

    The cross height clears the height map's top by the stack clearance (plus the carried
    carton's height when holding one), and is never below the transit height, the park z or
    the start z. Empty when the arm is already parked (1 mm, 1 mrad) or already out of the
    photos (ParkPose.out_of_photos).
    """
    x0, y0, z0, yaw0 = _tcp(planner, q_start)
    if math.dist((x0, y0, z0), (park.x, park.y, park.z)) < 1e-3 and (
        abs(_wrap(2 * (park.yaw - yaw0))) < 2e-3  # modulo a half turn
    ):
        return ()
    if park.out_of_photos(x0, y0):
        return ()
    z = _safe_z(planner, world, load, park.z, z0)
    wps: list[Waypoint] = []
    if z > z0 + 1e-6:
        wps.append(Waypoint(x0, y0, z, yaw0, None, 'rise'))
    end = (park.x, park.y, park.yaw)
    wps += _arc(
        planner, float(q_start[0]), (x0, y0, yaw0), end, z, park.min_radius, 'cross', other_way
    )
    if z > park.z + 1e-6:
        wps.append(Waypoint(park.x, park.y, park.z, park.yaw, None, 'park'))
    return tuple(wps)


def plan_park(
    planner: MotionPlanner,
    q_start: np.ndarray,
    park: ParkPose | None = None,
    world: CollisionWorld | None = None,
    load: CarriedLoad | None = None,
) -> tuple[MotionResult, Parked | None]:
    """The checked, timed park move and, when it moves the arm, its Parked memo (None when
    the arm is already parked or out of the photos, or the plan failed). The arc goes the
    preferred way round the base; when that fails its checks, the other way (a truck level's
    bulkhead blocks one)."""
    pose = park or ParkPose()
    wps = park_waypoints(planner, q_start, pose, world, load)
    if not wps:
        return MotionResult(True, None, None, None, ()), None
    plan = planner.plan_cartesian(q_start, wps, world, load)
    if not plan.ok:
        other = park_waypoints(planner, q_start, pose, world, load, other_way=True)
        if other != wps:
            retry = planner.plan_cartesian(q_start, other, world, load)
            plan = retry if retry.ok else plan
    if not plan.ok or plan.trajectory is None:
        return plan, None
    yaw0 = _tcp(planner, q_start)[3]
    return plan, Parked(np.array(plan.trajectory.q[-1], dtype=float), yaw0)


def plan_unpark(
    planner: MotionPlanner,
    q_now: np.ndarray,
    parked: Parked | None,
    park: ParkPose | None = None,
    world: CollisionWorld | None = None,
    load: CarriedLoad | None = None,
    tolerance: float = 0.01,
) -> MotionResult | None:
    """Leave the park: rise to a safe height, arc round the base to above the pallet centre,
    the yaw back to what it was before the park (modulo a half turn); the other way round when
    that fails its checks. None when there is nothing to undo: not parked, or the arm has left
    the park pose since (e.g. a cell reset), judged with `tolerance` [rad] per joint."""
    if parked is None:
        return None
    if np.abs(np.asarray(q_now, dtype=float) - parked.q_end).max() > tolerance:
        return None
    pose = park or ParkPose()
    x0, y0, z0, yaw0 = _tcp(planner, q_now)
    z = _safe_z(planner, world, load, z0)
    wps: list[Waypoint] = []
    if z > z0 + 1e-6:
        wps.append(Waypoint(x0, y0, z, yaw0, None, 'rise'))
    end = (pose.leave_x, pose.leave_y, parked.yaw_before)
    plan = None
    for other in (False, True):
        way = wps + _arc(
            planner, float(q_now[0]), (x0, y0, yaw0), end, z, pose.min_radius, 'unpark', other
        )
        retry = planner.plan_cartesian(q_now, tuple(way), world, load)
        plan = retry if plan is None or retry.ok else plan
        if plan.ok:
            break
    return plan
