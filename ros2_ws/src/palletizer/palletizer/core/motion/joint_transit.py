"""Transit in joint space: a plan's cross run as a straight line between joint configurations.

A tool-down Cartesian cross keeps the tool on a straight line in the world, so the shoulder pan
whips where the line passes the base and the cross detours round it (path.around_base). Between
the vertical rise and descent, nothing asks for a straight line: the cross has only to clear the
stack and the furniture. `joint_transit_path` keeps a plan's vertical legs where they are (the
rise off the source, the drop and the final descent, sampled on the start's IK branch as the
Cartesian plan samples them) and replaces its transit legs (`TRANSIT_LEGS`) by the straight line
in joint space between the configurations the Cartesian plan has at their ends. Each corner
between a vertical leg and that line is rounded in joint space (a quadratic Bezier from
blend_radius before the corner to as far after it), so the arm does not stop there; a corner
next to a final approach (a leg with its own speed) is stopped at, as the Cartesian plan does.

Why the tool stays down: the UR's shoulder lift, elbow and wrist 1 axes are parallel, so the
tool's axis depends only on q2 + q3 + q4 and q5 (and the pan). Every configuration of the path
is tool-down on the same IK branch, so those are the same at both ends of the line and along it
(a Bezier's points are affine combinations of its control points): the tool points down
throughout and its yaw changes with q1 - q6. The TCP's path in the world is a curve round the
base at roughly the reach of its ends; its height may sag or bulge between them.

The result is a SampledPath like path.sample_path's (poses from the forward kinematics on a
uniform grid of path length), so check.check_path checks it sample by sample (IK on the
branch, limits, wrist and arm strikes, the swept tool and carton) and the timing times it
unchanged. Each grid point's speed cap is the Cartesian transit speed, the yaw rate, and
sqrt(accel / curvature): the carried carton's centripetal acceleration on the curve stays within
the Cartesian bound, as on path.py's rounded corners.
"""

from __future__ import annotations

import math

import numpy as np

from palletizer.core.motion.check import ArmModel, follow_path
from palletizer.core.motion.kinematics import fk_dh
from palletizer.core.motion.params import MotionParams
from palletizer.core.motion.path import Leg, PathSegment, SampledPath, group_legs, sample_path

__all__ = ['TRANSIT_LEGS', 'joint_transit_path', 'transit_span']

# The waypoint names of a cross (planner.py): the legs a joint-space line may replace.
TRANSIT_LEGS = frozenset({'climb', 'around', 'cross'})

# Largest joint change [rad] between the dense samples of the joint-space pieces before they are
# put on the path-length grid (linear interpolation between them): 2 mrad moves the TCP by at
# most ~3 mm at the UR10e's 1.3 m reach, within the grid's 5 mm.
_DENSE_STEP = 0.002
# The most of a piece a rounded corner may take, as path.py's blends (40 % of either leg).
_BLEND_SHARE = 0.4


def transit_span(legs: tuple[Leg, ...]) -> tuple[int, int] | None:
    """[i, j): the consecutive transit legs of a plan (TRANSIT_LEGS), each leaving its speed to
    the transit speed; None when there are none, they are not consecutive, or the legs around
    them are not vertical (a plan this module does not make)."""
    idx = [k for k, leg in enumerate(legs) if leg.name in TRANSIT_LEGS and leg.transit]
    if not idx or idx != list(range(idx[0], idx[-1] + 1)):
        return None
    i, j = idx[0], idx[-1] + 1
    for leg in (*legs[:i], *legs[j:]):
        if leg.dist > 0 and np.linalg.norm(leg.end[:2] - leg.start[:2]) > 1e-6:
            return None
    return i, j


def _tcp_poses(q: np.ndarray, arm: ArmModel, yaw0: float) -> np.ndarray:
    """(n, 4) TCP x, y, z [m], yaw [rad] of joints q (n, 6), yaw unwrapped from yaw0."""
    T = arm.T_world_base @ fk_dh(q) @ np.linalg.inv(arm.T_tcp_flange)
    yaw = np.unwrap(np.concatenate([[yaw0], np.arctan2(T[:, 1, 0], T[:, 0, 0])]))[1:]
    return np.column_stack([T[:, 0, 3], T[:, 1, 3], T[:, 2, 3], yaw])


def _line(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """Dense joint-space line from qa to qb, both ends included."""
    n = max(2, math.ceil(float(np.max(np.abs(qb - qa))) / _DENSE_STEP))
    u = np.linspace(0.0, 1.0, n + 1)[:, None]
    return np.asarray(qa + u * (qb - qa), dtype=float)


def _bezier(p0: np.ndarray, p1: np.ndarray, p2: np.ndarray) -> np.ndarray:
    """Dense quadratic Bezier from p0 to p2 with control point p1, both ends included."""
    n = max(2, math.ceil(float(np.max(np.abs(p1 - p0) + np.abs(p2 - p1))) / _DENSE_STEP))
    t = np.linspace(0.0, 1.0, n + 1)[:, None]
    return np.asarray((1 - t) ** 2 * p0 + 2 * t * (1 - t) * p1 + t**2 * p2, dtype=float)


def _cut_back(xyz: np.ndarray, r: float) -> int:
    """Index of the sample of a piece (n, 3) about r [m] of path before its end."""
    d = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(xyz[::-1], axis=0), axis=1))])
    return len(xyz) - 1 - int(np.searchsorted(d, r))


def joint_transit_path(
    q0: np.ndarray,
    legs: tuple[Leg, ...],
    arm: ArmModel,
    p: MotionParams,
    accel: float,
) -> SampledPath | None:
    """The plan through `legs` from q0 with its transit legs replaced by a joint-space line;
    None when it has no such legs (transit_span), blending is off (MotionParams.blend_radius
    0), or the Cartesian plan's own legs have no branch-continuous IK (its check reports why).

    accel [m/s^2]: the Cartesian acceleration bound (loaded or empty cups), also the bound on
    the centripetal acceleration along the curve.
    """
    span = transit_span(legs)
    if span is None or p.blend_radius <= 0:
        return None
    i, j = span
    cart = sample_path(legs, group_legs(legs, False, p), p, accel)
    q, bad = follow_path(q0, cart, arm, p.max_joint_step)
    if bad.any():
        return None
    # The Cartesian plan's configurations where the cross begins and ends.
    b = int(np.flatnonzero(cart.leg < i)[-1]) if i > 0 else 0
    c = int(np.flatnonzero(cart.leg < j)[-1])
    before, after = q[: b + 1], q[c:]
    qb, qc = q[b], q[c]
    xyz = cart.poses[:, :3]
    chord = float(np.linalg.norm(xyz[c] - xyz[b]))
    if chord < 1e-6:
        return None
    line = _line(qb, qc)
    # (pieces of q, the leg each piece is on, where a segment ends after the piece)
    pieces: list[tuple[np.ndarray, np.ndarray, bool]] = []
    transit_leg = i + (j - i - 1)  # a refusal on the line names the cross's last waypoint
    # The corner at the top of the rise: rounded unless there is none (the cross starts the
    # plan) or the rise is too short to round.
    start_line = 0
    if len(before) > 1:
        rise_len = float(np.linalg.norm(xyz[b] - xyz[0]))
        r = min(p.blend_radius, _BLEND_SHARE * rise_len, _BLEND_SHARE * chord)
        k = _cut_back(xyz[: b + 1], r)
        f = r / chord
        start_line = min(len(line) - 1, round(f * (len(line) - 1)))
        pieces.append((before[1 : k + 1], cart.leg[1 : k + 1], False))
        blend = _bezier(before[k], qb, line[start_line])
        pieces.append((blend[1:], np.full(len(blend) - 1, i), False))
    # The corner at the end of the cross: rounded into a transit drop, stopped at before a
    # final approach (a leg with its own speed).
    next_leg = legs[j] if j < len(legs) else None
    r_end = 0.0
    if next_leg is not None and next_leg.transit and next_leg.dist > 0:
        r_end = min(p.blend_radius, _BLEND_SHARE * next_leg.dist, _BLEND_SHARE * chord)
    round_end = r_end > 0
    end_line = len(line) - 1
    if round_end:
        end_line = max(start_line + 1, len(line) - 1 - round(r_end / chord * (len(line) - 1)))
    pieces.append(
        (line[start_line + 1 : end_line + 1], np.full(end_line - start_line, transit_leg), False)
    )
    if round_end:
        k = len(after) - 1 - _cut_back(xyz[c:][::-1], r_end)
        blend = _bezier(line[end_line], qc, after[k])
        pieces.append((blend[1:], np.full(len(blend) - 1, j), False))
        pieces.append((after[k + 1 :], cart.leg[c + k + 1 :], True))
    else:
        pieces[-1] = (pieces[-1][0], pieces[-1][1], True)
        if len(after) > 1:
            pieces.append((after[1:], cart.leg[c + 1 :], True))
    return _on_grid(q0, cart.poses[0], pieces, legs, arm, p, accel)


def _on_grid(
    q0: np.ndarray,
    start: np.ndarray,
    pieces: list[tuple[np.ndarray, np.ndarray, bool]],
    legs: tuple[Leg, ...],
    arm: ArmModel,
    p: MotionParams,
    accel: float,
) -> SampledPath:
    """The dense pieces as a SampledPath: each run of pieces up to a segment end put on a
    uniform grid of path length (at most path_step and path_step_yaw apart, yaw folded in as
    path.py folds it), its joints interpolated linearly, its poses from the forward
    kinematics."""
    r_yaw = p.cartesian_speed / p.angular_speed
    poses = [start[None, :]]
    leg_of = [np.array([0])]
    group_of = [np.array([0])]
    segments: list[PathSegment] = []
    q_prev, leg_prev, yaw_prev = np.asarray(q0, dtype=float), 0, float(start[3])
    run_q: list[np.ndarray] = []
    run_leg: list[np.ndarray] = []
    for piece_q, piece_leg, ends in pieces:
        run_q.append(piece_q)
        run_leg.append(piece_leg)
        if not ends:
            continue
        qs = np.vstack([q_prev[None, :], *run_q])
        lg = np.concatenate([[leg_prev], *run_leg])
        pz = _tcp_poses(qs, arm, yaw_prev)
        dd = np.linalg.norm(np.diff(pz[:, :3], axis=0), axis=1)
        dyaw = np.abs(np.diff(pz[:, 3]))
        ds = np.maximum(np.maximum(dd, r_yaw * dyaw), 1e-9)
        s = np.concatenate([[0.0], np.cumsum(ds)])
        n = max(
            2,
            math.ceil(float(np.sum(dd)) / p.path_step),
            math.ceil(float(np.sum(dyaw)) / p.path_step_yaw),
        )
        grid = np.linspace(0.0, float(s[-1]), n + 1)
        qg = np.column_stack([np.interp(grid, s, qs[:, a]) for a in range(6)])
        qg[0], qg[-1] = qs[0], qs[-1]
        pg = _tcp_poses(qg, arm, yaw_prev)
        nearest = np.clip(np.searchsorted(s, grid, side='right') - 1, 0, len(lg) - 1)
        leg_g = lg[np.minimum(nearest + 1, len(lg) - 1)]
        leg_g[0] = lg[0]
        cap = _caps(pg, grid, leg_g, legs, p, accel)
        g = len(segments)
        poses.append(pg[1:])
        leg_of.append(leg_g[1:])
        group_of.append(np.full(n, g))
        segments.append(PathSegment(grid, cap, accel))
        q_prev, leg_prev, yaw_prev = qg[-1], int(leg_g[-1]), float(pg[-1, 3])
        run_q, run_leg = [], []
    return SampledPath.joined(poses, leg_of, group_of, legs, segments)


def _caps(
    poses: np.ndarray,
    s: np.ndarray,
    leg: np.ndarray,
    legs: tuple[Leg, ...],
    p: MotionParams,
    accel: float,
) -> np.ndarray:
    """Path speed bound [m/s of path length] at each grid point: its leg's Cartesian speed and
    the yaw rate (in path units), and sqrt(accel / curvature) of the TCP's curve."""
    h = float(s[1] - s[0])
    xyz, yaw = poses[:, :3], poses[:, 3]
    dd = np.gradient(xyz, h, axis=0)
    speed = np.array([legs[k].speed for k in leg])
    dd_norm = np.linalg.norm(dd, axis=1)
    dyaw = np.abs(np.gradient(yaw, h))
    with np.errstate(divide='ignore'):
        cap = np.minimum(
            np.where(dd_norm > 1e-9, speed / dd_norm, np.inf),
            np.where(dyaw > 1e-9, p.angular_speed / dyaw, np.inf),
        )
        # Curvature per unit path length squared: |x''(s)|, less the tangential part.
        d2 = np.gradient(dd, h, axis=0)
        tang = np.einsum('ij,ij->i', d2, dd) / np.maximum(dd_norm, 1e-9) ** 2
        normal = np.linalg.norm(d2 - tang[:, None] * dd, axis=1)
        cap = np.minimum(cap, np.where(normal > 1e-9, np.sqrt(accel / normal), np.inf))
    cap = np.minimum(cap, p.cartesian_speed * 10.0)
    return np.asarray(cap, dtype=float)
