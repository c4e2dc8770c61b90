"""Cartesian path construction: waypoints, the legs between them, and the dense tool-down path.

A plan's waypoints become straight legs (Leg); legs that continue straight, or meet at a
transit corner that may be rounded, join into one segment (LegGroup); each segment is sampled
on a uniform arc-length grid (SampledPath), a rounded corner as a quartic Bezier
(kern.blend_path). around_base gives the via points that keep a cross away from the robot's
vertical axis. Nothing here solves IK or checks a collision: that is check.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import TWO_PI
from palletizer.core.motion.params import MotionParams

__all__ = [
    'Leg',
    'LegGroup',
    'PathSegment',
    'SampledPath',
    'Waypoint',
    'around_base',
    'group_legs',
    'legs_through',
    'sample_path',
    'wrap_pi',
]


@dataclass(frozen=True)
class Waypoint:
    """A tool-down Cartesian target: TCP position [m] and yaw [rad] in the world frame.

    speed: Cartesian speed of the segment that ends here [m/s] (None: MotionParams transit
    speed). name: what the waypoint is for, reported when it fails.
    """

    x: float
    y: float
    z: float
    yaw: float
    speed: float | None = None
    name: str = ''


@dataclass(frozen=True, eq=False)
class Leg:
    """One straight leg of a tool-down path: from the previous pose to a waypoint.

    start, end: (4,) TCP pose (x, y, z [m], yaw [rad]) in the world; end's yaw is the
    waypoint's, unwrapped to within pi of start's. dist: Cartesian length [m]; turn: |yaw
    change| [rad]; length: path length [m], max(dist, r_yaw * turn) with r_yaw =
    cartesian_speed / angular_speed [m/rad] folding the yaw in. cap: the leg's bound on the
    path speed [m/s] (its Cartesian speed and the yaw rate limit, both in path units).
    accel_scale: length / dist (1 for a pure turn), the path acceleration per unit Cartesian
    acceleration. transit: the waypoint leaves its speed to the transit speed (a corner between
    transit legs may be rounded). speed: the Cartesian speed asked [m/s]. name: the waypoint's.
    """

    start: np.ndarray
    end: np.ndarray
    dist: float
    turn: float
    length: float
    cap: float
    accel_scale: float
    transit: bool
    speed: float
    name: str


@dataclass(frozen=True)
class LegGroup:
    """Consecutive legs run as one segment, without a stop between them.

    members: indices into the path's legs (ascending). blended: its corners are rounded
    (kern.blend_path); else its legs are collinear and it is sampled as one straight line.
    """

    members: tuple[int, ...]
    blended: bool


@dataclass(frozen=True, eq=False)
class PathSegment:
    """One rest-to-rest segment's path grid, as the timing takes it.

    s: (k + 1,) arc length at each grid point [m], from 0; cap: (k + 1,) path speed bound at
    each grid point [m/s]; accel: the bound on the path acceleration [m/s^2].
    """

    s: np.ndarray
    cap: np.ndarray
    accel: float


@dataclass(frozen=True, eq=False)
class SampledPath:
    """The dense tool-down path of a plan: its start pose, then every segment's samples.

    poses: (n, 4) TCP x, y, z [m], yaw [rad] in the world, poses[0] the start. leg: (n,) the
    leg (index into `legs`) each sample lies on, 0 for the start. group: (n,) the segment
    (index into `segments`) each sample ends, 0 for the start. legs: the legs sampled.
    segments: each segment's grid; segment g has group == g samples, plus the sample before.
    """

    poses: np.ndarray
    leg: np.ndarray
    group: np.ndarray
    legs: tuple[Leg, ...]
    segments: tuple[PathSegment, ...]

    @classmethod
    def joined(
        cls,
        poses: Sequence[np.ndarray],
        leg: Sequence[np.ndarray],
        group: Sequence[np.ndarray],
        legs: Sequence[Leg],
        segments: Sequence[PathSegment],
    ) -> SampledPath:
        """The path from its pieces in order: each of poses, leg and group concatenated."""
        return cls(
            np.concatenate(poses),
            np.concatenate(leg),
            np.concatenate(group),
            tuple(legs),
            tuple(segments),
        )


def wrap_pi(a: float) -> float:
    """Angle a [rad] wrapped to [-pi, pi)."""
    return (a + math.pi) % TWO_PI - math.pi


def _yaw_radius(p: MotionParams) -> float:
    """[m/rad]: the path length a unit of tool yaw counts for (yaw folded into the length)."""
    return p.cartesian_speed / p.angular_speed


def legs_through(
    start: tuple[float, float, float, float],
    wps: Sequence[Waypoint],
    index0: int,
    p: MotionParams,
) -> tuple[Leg, ...]:
    """The legs from the start pose (x, y, z [m], yaw [rad]) through `wps` in turn.

    Raises MotionError naming waypoint index0 + k when waypoint k is not finite.
    """
    prev = np.array(start)
    r_yaw = _yaw_radius(p)
    legs = []
    for k, wp in enumerate(wps):
        for name, v in (('x', wp.x), ('y', wp.y), ('z', wp.z), ('yaw', wp.yaw)):
            if not math.isfinite(v):
                raise MotionError(f'waypoint {index0 + k} ({wp.name}) {name} = {v!r}')
        yaw = prev[3] + wrap_pi(wp.yaw - prev[3])
        nxt = np.array([wp.x, wp.y, wp.z, yaw])
        dist = float(np.linalg.norm(nxt[:3] - prev[:3]))
        dyaw = abs(float(nxt[3] - prev[3]))
        length = max(dist, r_yaw * dyaw)
        speed = p.cartesian_speed if wp.speed is None else wp.speed
        vel = [speed * length / dist] if dist > 0 else []
        if dyaw > 0:
            vel.append(p.angular_speed * length / dyaw)
        # Pure turns use cartesian_accel / r_yaw as the angular limit: 1 in s units.
        scale = length / dist if dist > 0 else 1.0
        cap = min(vel) if vel else speed
        legs.append(
            Leg(prev, nxt, dist, dyaw, length, cap, scale, wp.speed is None, speed, wp.name)
        )
        prev = nxt
    return tuple(legs)


def group_legs(legs: Sequence[Leg], blend: bool, p: MotionParams) -> tuple[LegGroup, ...]:
    """The path's segments: runs of legs the arm moves through without stopping.

    Straight legs that continue in the same direction without turning (a fast drop then the
    slow final descent) form one segment: the speed changes without a stop. With `blend`, a
    transit corner turning by less than 120 deg between legs that move more than they turn the
    tool is rounded (MotionParams.blend_radius > 0), not stopped at.
    """
    r_yaw = _yaw_radius(p)
    groups: list[list[int]] = []
    blended: list[bool] = []
    for k, leg in enumerate(legs):
        if groups and leg.dist > 0:
            last = legs[groups[-1][-1]]
            if last.dist > 0:
                d0 = (last.end[:3] - last.start[:3]) / last.dist
                d1 = (leg.end[:3] - leg.start[:3]) / leg.dist
                if leg.turn == 0.0 and last.turn == 0.0 and float(d0 @ d1) > 1 - 1e-9:
                    groups[-1].append(k)
                    continue
                if (
                    blend
                    and p.blend_radius > 0
                    and leg.transit
                    and last.transit
                    and float(d0 @ d1) > -0.5
                    and r_yaw * leg.turn <= leg.dist
                    and r_yaw * last.turn <= last.dist
                ):
                    groups[-1].append(k)
                    blended[-1] = True
                    continue
        groups.append([k])
        blended.append(False)
    return tuple(LegGroup(tuple(g), b) for g, b in zip(groups, blended, strict=True))


def _blended(legs: Sequence[Leg], p: MotionParams, accel: float) -> tuple[np.ndarray, ...]:
    """A polyline of legs with its corners rounded: (poses (n+1, 4), arc length s (n+1,),
    local leg index (n+1,), speed cap (n+1,)) on a uniform arc-length grid.

    Each corner between non-collinear legs becomes a quartic Bezier from blend_radius before
    the corner to blend_radius after it (at most 40 % of either leg), its first and last three
    control points on the legs: tangent to both with zero curvature where it meets them, so the
    joint accelerations have no step there. The speed cap is the leg's transit or approach
    speed, the yaw rate limit, and sqrt(accel / curvature) so the rounded corner's centripetal
    acceleration stays within the Cartesian bound.
    """
    return kern.blend_path(
        np.array([legs[0].start] + [leg.end for leg in legs], dtype=float),
        np.array([leg.dist for leg in legs], dtype=float),
        np.array([leg.speed for leg in legs], dtype=float),
        float(p.blend_radius),
        float(p.path_step),
        float(p.path_step_yaw),
        float(p.angular_speed),
        float(accel),
    )


def _straight(
    legs: Sequence[Leg], p: MotionParams, accel: float
) -> tuple[np.ndarray, np.ndarray, PathSegment]:
    """Collinear legs sampled as one line: (poses (n, 4) after the start, local leg index
    (n,), the segment's grid). At least 2 intervals: the timing needs second differences."""
    start, end = legs[0].start, legs[-1].end
    ends = np.cumsum([leg.length for leg in legs])
    length = float(ends[-1])
    dist = sum(leg.dist for leg in legs)
    dyaw = sum(leg.turn for leg in legs)
    n = max(math.ceil(dist / p.path_step), math.ceil(dyaw / p.path_step_yaw), 2)
    u = np.linspace(0.0, 1.0, n + 1)
    poses = start + u[1:, None] * (end - start)
    s = u * length
    local = np.minimum(np.searchsorted(ends, s[1:] - 1e-12), len(legs) - 1)
    # Speed bound of each interval: the slowest leg it overlaps; of each grid point: the
    # slower of its two intervals.
    cap_int = np.full(n, np.inf)
    lo = np.concatenate([[0.0], ends[:-1]])
    for r, leg in enumerate(legs):
        touch = (s[:-1] < ends[r] - 1e-12) & (s[1:] > lo[r] + 1e-12)
        cap_int[touch] = np.minimum(cap_int[touch], leg.cap)
    cap = np.minimum(np.append(cap_int, cap_int[-1]), np.insert(cap_int, 0, cap_int[0]))
    scaled = accel * (legs[0].accel_scale if len(legs) == 1 else 1.0)
    return poses, local, PathSegment(s, cap, scaled)


def sample_path(
    legs: tuple[Leg, ...], groups: Sequence[LegGroup], p: MotionParams, accel: float
) -> SampledPath:
    """Every segment of `groups` sampled at most path_step [m] and path_step_yaw [rad] apart.

    accel: the Cartesian acceleration bound [m/s^2] (loaded or empty cups); a lone leg that
    turns the tool scales it to path units (Leg.accel_scale).
    """
    poses = [legs[0].start[None, :]]
    leg_of = [np.array([0])]
    group_of = [np.array([0])]
    segments = []
    for g, group in enumerate(groups):
        members = np.asarray(group.members)
        run = [legs[k] for k in group.members]
        if group.blended:
            bp, bs, bleg, bcap = _blended(run, p, accel)
            poses.append(bp[1:])
            leg_of.append(members[bleg[1:]])
            group_of.append(np.full(len(bp) - 1, g))
            segments.append(PathSegment(bs, bcap, accel))
            continue
        line, local, segment = _straight(run, p, accel)
        poses.append(line)
        leg_of.append(members[local])
        group_of.append(np.full(len(line), g))
        segments.append(segment)
    return SampledPath.joined(poses, leg_of, group_of, legs, segments)


def around_base(
    x0: float, y0: float, x1: float, y1: float, base_xy: tuple[float, float], clearance: float
) -> list[tuple[float, float, float]]:
    """Via points (x, y, fraction of the way) that keep a cross away from the base axis.

    A straight cross from (x0, y0) to (x1, y1) [m] that passes within `clearance` [m] of the
    robot's vertical axis at base_xy goes through the shoulder singularity; it is replaced by
    chords of an arc around the base (the shorter way round), each chord's midpoint still
    outside the clearance radius. Empty when the straight cross keeps its distance.
    """
    bx, by = base_xy
    r_safe = clearance
    d = np.array([x1 - x0, y1 - y0])
    L2 = float(d @ d)
    if L2 < 1e-12:
        return []
    u = float(np.clip(((bx - x0) * d[0] + (by - y0) * d[1]) / L2, 0.0, 1.0))
    if math.hypot(x0 + u * d[0] - bx, y0 + u * d[1] - by) >= r_safe:
        return []
    a0 = math.atan2(y0 - by, x0 - bx)
    a1 = math.atan2(y1 - by, x1 - bx)
    sweep = wrap_pi(a1 - a0)
    # Hug the base: the arc's radius is just outside the clearance, so the detour stays
    # away from the furniture farther out (the trailer's walls).
    radius = r_safe / math.cos(math.radians(20.0))

    def chord_clear(p: tuple[float, float], q: tuple[float, float]) -> bool:
        dx, dy = q[0] - p[0], q[1] - p[1]
        n2 = dx * dx + dy * dy
        t = 0.0 if n2 < 1e-12 else min(1.0, max(0.0, ((bx - p[0]) * dx + (by - p[1]) * dy) / n2))
        return math.hypot(p[0] + t * dx - bx, p[1] + t * dy - by) >= r_safe * 0.999

    vias: list[tuple[float, float, float]] = []
    for n in range(1, 13):
        vias = [
            (
                bx + radius * math.cos(a0 + sweep * k / (n + 1)),
                by + radius * math.sin(a0 + sweep * k / (n + 1)),
                k / (n + 1),
            )
            for k in range(1, n + 1)
        ]
        pts = [(x0, y0), *((v[0], v[1]) for v in vias), (x1, y1)]
        if all(chord_clear(a, b) for a, b in zip(pts, pts[1:], strict=False)):
            break
    return vias
