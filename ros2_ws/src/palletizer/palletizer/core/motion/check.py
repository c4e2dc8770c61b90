"""The checks of a dense tool-down path before it is timed: IK, limits, collisions.

check_path follows the start configuration's analytic IK branch along a SampledPath (branch
continuity and joint limits, kern.follow_branch), then checks the wrist against the robot's
own mount, the arm's links against the furniture boxes, and the swept tool (and carried
carton) against the world, in that order; the first failure is a Refusal naming the waypoint
it was on the way to. ArmModel holds what those checks take of the kinematics. reach_limit
asks the analytic IK how high the tool reaches over given points, for the plans' heights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.collision import CarriedLoad, CollisionWorld, first_collision
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import (
    DH_ARRAYS,
    UR10eKinematics,
    arm_box_hits,
    branch_family,
    branch_index,
    tool_down,
    wrist_near_mount,
)
from palletizer.core.motion.params import MotionParams
from palletizer.core.motion.path import SampledPath
from palletizer.core.motion.timing import JointTrajectory

__all__ = [
    'COLLISION',
    'GRASP_SLIP',
    'IK_UNREACHABLE',
    'ArmModel',
    'CheckedPath',
    'JointSegment',
    'Refusal',
    'check_path',
    'first_arm_box_strike',
    'first_swept_hit',
    'first_wrist_strike',
    'follow_path',
    'joint_segments',
    'reach_limit',
]

# Failure causes, from the closed vocabulary of episode failures (docs/telemetry.md §8.2).
IK_UNREACHABLE = 'ik_unreachable'
COLLISION = 'collision'
# No cup block can hold the carton: it would slip, the vocabulary's nearest cause.
GRASP_SLIP = 'grasp_slip'

# Below the highest reachable point a rise stops short by this much [m]: at the edge of the
# workspace the elbow is nearly straight and the joints move fast for a small Cartesian step.
_REACH_MARGIN = 0.05


@dataclass(frozen=True, eq=False)
class ArmModel:
    """What the dense checks take of the arm, as arrays the compiled kernels take.

    T_world_base, T_base_world: world <- DH base and its inverse (4, 4) [m];
    T_tcp_flange: TCP <- flange (4, 4), the tool offset back along the tool axis [m];
    lower, upper: (6,) joint position limits [rad].
    """

    T_world_base: np.ndarray
    T_base_world: np.ndarray
    T_tcp_flange: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @classmethod
    def of(cls, kin: UR10eKinematics) -> ArmModel:
        """The arm model of `kin`, from its public frames and limits (the same arrays it
        derives for its own IK)."""
        T_world_base = kin.T_world_base
        T_tcp_flange = np.eye(4)
        T_tcp_flange[2, 3] = -kin.tcp_offset
        return cls(
            T_world_base,
            np.linalg.inv(T_world_base),
            T_tcp_flange,
            np.asarray(kin.limits.lower, dtype=float),
            np.asarray(kin.limits.upper, dtype=float),
        )


@dataclass(frozen=True, eq=False)
class Refusal:
    """Why a path failed its checks.

    cause: IK_UNREACHABLE or COLLISION. failing: the index of the waypoint the failing sample
    was on the way to (in the plan's waypoints). message: what failed, and where.
    """

    cause: str
    failing: int
    message: str


@dataclass(frozen=True, eq=False)
class JointSegment:
    """One checked rest-to-rest segment, ready for timing.

    s: (k,) arc length [m] on a uniform grid; q: (k, 6) joints [rad] at each s; cap: (k,) path
    speed bound [m/s]; accel: path acceleration bound [m/s^2].
    """

    s: np.ndarray
    q: np.ndarray
    cap: np.ndarray
    accel: float


@dataclass(frozen=True, eq=False)
class CheckedPath:
    """A dense path that passed every check: its segments and final configuration q_end (6,).
    timed: its timing where the planner already has it (it timed two paths to keep the faster);
    None until then."""

    segments: tuple[JointSegment, ...]
    q_end: np.ndarray
    timed: JointTrajectory | None = None


def follow_path(
    q0: np.ndarray, path: SampledPath, arm: ArmModel, max_joint_step: float
) -> tuple[np.ndarray, np.ndarray]:
    """Joints (n, 6) along the path on the analytic IK branch of q0 (in the working family,
    kinematics.branch_family), and (n,) True where that fails.

    A failure marks a sample without an in-limit, in-family solution within max_joint_step
    [rad] of the previous one. The start may be off exact tool-down by up to 1e-4 rad (rounded
    joint values): the residual fades out over the first segment so the path starts exactly
    at q0. Raises MotionError when q0 is farther than 1e-3 rad from its own branch.
    """
    b = branch_index(q0)
    q, bad, start_err = kern.follow_branch(
        np.ascontiguousarray(path.poses, dtype=float),
        arm.T_base_world,
        arm.T_tcp_flange,
        b,
        np.asarray(q0, dtype=float),
        int(np.count_nonzero(path.leg == 0)),
        arm.lower,
        arm.upper,
        float(max_joint_step),
        *DH_ARRAYS,
    )
    if start_err > 1e-3 and math.isfinite(start_err):
        raise MotionError(f'start configuration {q0.tolist()} is not on IK branch {b}')
    return q, bad


def first_wrist_strike(q: np.ndarray, p: MotionParams) -> int | None:
    """The first sample of q (n, 6) whose wrist comes too close to the robot's base or
    pedestal; None when none does.

    The tool-and-carton checks do not see the arm: level 12 seed 1 (grid planner) drove
    wrist 1 into the base placing 0.43 m from the base axis, 0.25 m above the deck.
    """
    near = wrist_near_mount(q, p.pedestal_radius, p.base_radius, p.shoulder_height, p.link_radius)
    return int(np.argmax(near)) if near.any() else None


def first_arm_box_strike(
    q: np.ndarray, world: CollisionWorld, T_world_base: np.ndarray, margin: float
) -> tuple[int, str] | None:
    """The first sample of q (n, 6) whose forearm or wrist links come within margin [m] of one
    of the world's arm boxes, and that box's name; None when none does.

    Level 12 (seeds 1, 11, 31, 40): placing at the pallet corner by the pick table, wrist 2
    struck the table's top edge.
    """
    if not world.arm_boxes:
        return None
    lo = np.array([b.lo for b in world.arm_boxes], dtype=float)
    hi = np.array([b.hi for b in world.arm_boxes], dtype=float)
    box = arm_box_hits(q, T_world_base, lo, hi, margin)
    if not (box >= 0).any():
        return None
    i = int(np.argmax(box >= 0))
    return i, world.arm_boxes[int(box[i])].name


def first_swept_hit(
    path: SampledPath,
    world: CollisionWorld,
    tool_body: tuple[float, float, float],
    load: CarriedLoad | None,
    p: MotionParams,
) -> tuple[int, str] | None:
    """The first sample whose swept tool (and carried carton) hits the world, and what it hits
    (collision.first_collision, footprints grown by half a path step); None when none does."""
    return first_collision(
        path.poses,
        world,
        tool_body,
        p.cup_gap,
        load,
        p.collision_tolerance,
        grow=p.path_step / 2,
    )


def joint_segments(q: np.ndarray, path: SampledPath) -> tuple[JointSegment, ...]:
    """The checked joints q (n, 6) cut into the path's segments, each with the previous
    segment's last sample as its first (the path's start for the first)."""
    segments = []
    for g, seg in enumerate(path.segments):
        sel = np.concatenate([[False], path.group[1:] == g])
        first = int(np.argmax(sel)) - 1
        q_seg = q[first : first + int(sel.sum()) + 1]
        segments.append(JointSegment(seg.s, q_seg, seg.cap, seg.accel))
    return tuple(segments)


def _refusal(cause: str, path: SampledPath, i: int, what: str, index0: int) -> Refusal:
    """A refusal at sample i, naming its pose and the waypoint (index0 + its leg) it was on
    the way to."""
    k = int(path.leg[i])
    x, y, z, yw = path.poses[i]
    where = f'({x:.3f}, {y:.3f}, {z:.3f}, yaw {yw:.3f})'
    return Refusal(
        cause,
        index0 + k,
        f'{what} {where} on the way to waypoint {index0 + k} ({path.legs[k].name})',
    )


def check_path(
    q0: np.ndarray,
    path: SampledPath,
    index0: int,
    arm: ArmModel,
    p: MotionParams,
    world: CollisionWorld | None,
    tool_body: tuple[float, float, float],
    load: CarriedLoad | None,
) -> CheckedPath | Refusal:
    """Dense IK with branch continuity, limits and collisions for every sample of the path,
    from q0; failing waypoints are reported as index0 + the leg's index."""
    if not branch_family(q0):
        what = 'start configuration is outside the elbow-up, wrist-not-flipped family'
        return Refusal(IK_UNREACHABLE, index0, what)
    q, bad = follow_path(q0, path, arm, p.max_joint_step)
    if bad.any():
        i = int(np.argmax(bad))
        return _refusal(IK_UNREACHABLE, path, i, 'no branch-continuous in-limit IK at', index0)
    i_wrist = first_wrist_strike(q, p)
    if i_wrist is not None:
        what = 'the wrist would strike the robot base or pedestal at'
        return _refusal(COLLISION, path, i_wrist, what, index0)
    if world is not None:
        struck = first_arm_box_strike(q, world, arm.T_world_base, p.arm_margin)
        if struck is not None:
            i, name = struck
            return _refusal(COLLISION, path, i, f'the arm would strike the {name} at', index0)
        hit = first_swept_hit(path, world, tool_body, load, p)
        if hit is not None:
            i, what = hit
            swept = f'swept tool{" and carton" if load else ""} hits {what} at'
            return _refusal(COLLISION, path, i, swept, index0)
    return CheckedPath(joint_segments(q, path), q[-1].copy())


def reach_limit(
    kin: UR10eKinematics,
    q_ref: np.ndarray,
    points: list[tuple[float, float]],
    yaw: float,
    z_lo: float,
    z_hi: float,
) -> float:
    """The highest z [m] in [z_lo, z_hi] at which the tool reaches every (x, y) of `points`
    tool-down at `yaw` (an in-family IK solution near q_ref): z_hi when it reaches that; else
    the highest reachable z (bisection on the analytic IK, to 5 mm) less _REACH_MARGIN, at
    least z_lo; z_lo when even that is out of reach (the dense check then reports it)."""

    def reaches(z: float) -> bool:
        return all(kin.ik_nearest(tool_down(x, y, z, yaw), q_ref) is not None for x, y in points)

    if z_hi <= z_lo or reaches(z_hi):
        return z_hi
    if not reaches(z_lo):
        return z_lo  # the dense check reports it
    lo, hi = z_lo, z_hi
    while hi - lo > 0.005:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if reaches(mid) else (lo, mid)
    return max(z_lo, lo - _REACH_MARGIN)
