"""Joint-trajectory-controller semantics, ROS-free: goal validation, sampling and tolerances.

Mirrors what ros2_control's joint_trajectory_controller does with a FollowJointTrajectory goal,
so the simulated cell answers exactly like a real UR driver: the same error codes, the same
tolerance rules (0 = controller default, negative = not checked), and position/velocity/
acceleration interpolation between points (quintic when accelerations are given, cubic with
velocities, linear otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from palletizer.core.errors import PalletizerError

__all__ = [
    'GoalError',
    'JointTolerance',
    'SampledTrajectory',
    'ToleranceSet',
    'check_tolerance',
    'resolve_tolerances',
    'validate_goal',
]

# control_msgs/action/FollowJointTrajectory result codes.
SUCCESSFUL = 0
INVALID_GOAL = -1
INVALID_JOINTS = -2
OLD_HEADER_TIMESTAMP = -3
PATH_TOLERANCE_VIOLATED = -4
GOAL_TOLERANCE_VIOLATED = -5


class GoalError(PalletizerError):
    """A goal the controller refuses; `code` is the FollowJointTrajectory error code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class JointTolerance:
    """Per-joint tolerance [rad], [rad/s], [rad/s^2]; <= 0 means not checked."""

    position: float = 0.0
    velocity: float = 0.0
    acceleration: float = 0.0


@dataclass(frozen=True)
class ToleranceSet:
    """Resolved path and goal tolerances per joint (controller order) and goal time [s]."""

    path: tuple[JointTolerance, ...]
    goal: tuple[JointTolerance, ...]
    goal_time: float


@dataclass(frozen=True)
class SampledTrajectory:
    """A validated trajectory in controller joint order.

    t: (K,) times from start [s]; q, qd, qdd: (K, n) [rad], [rad/s], [rad/s^2]; has_vel /
    has_acc tell which derivatives the goal gave.
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    has_vel: bool
    has_acc: bool
    start_q: np.ndarray = field(repr=False)

    @property
    def duration(self) -> float:
        return float(self.t[-1])

    def sample(self, time: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Desired (q, qd, qdd) at `time` [s] from the goal's start; holds the end afterwards.

        Before the first point the controller interpolates from the state at goal start.
        """
        t = np.concatenate([[0.0], self.t]) if self.t[0] > 0 else self.t
        q = np.vstack([self.start_q, self.q]) if self.t[0] > 0 else self.q
        qd = np.vstack([np.zeros_like(self.start_q), self.qd]) if self.t[0] > 0 else self.qd
        qdd = np.vstack([np.zeros_like(self.start_q), self.qdd]) if self.t[0] > 0 else self.qdd
        if time >= t[-1]:
            return q[-1].copy(), np.zeros_like(q[-1]), np.zeros_like(q[-1])
        if time <= t[0]:
            return q[0].copy(), qd[0].copy(), qdd[0].copy()
        k = int(np.searchsorted(t, time, side='right')) - 1
        h = t[k + 1] - t[k]
        s = (time - t[k]) / h
        q0, q1, v0, v1, a0, a1 = q[k], q[k + 1], qd[k], qd[k + 1], qdd[k], qdd[k + 1]
        if self.has_acc:
            # Quintic Hermite on [0, 1] with scaled derivatives.
            v0, v1, a0, a1 = v0 * h, v1 * h, a0 * h * h, a1 * h * h
            c0, c1, c2 = q0, v0, a0 / 2
            c3 = 10 * (q1 - q0) - 6 * v0 - 4 * v1 - 1.5 * a0 + 0.5 * a1
            c4 = -15 * (q1 - q0) + 8 * v0 + 7 * v1 + 1.5 * a0 - a1
            c5 = 6 * (q1 - q0) - 3 * v0 - 3 * v1 - 0.5 * a0 + 0.5 * a1
            pos = c0 + s * (c1 + s * (c2 + s * (c3 + s * (c4 + s * c5))))
            vel = (c1 + s * (2 * c2 + s * (3 * c3 + s * (4 * c4 + s * 5 * c5)))) / h
            acc = (2 * c2 + s * (6 * c3 + s * (12 * c4 + s * 20 * c5))) / (h * h)
            return pos, vel, acc
        if self.has_vel:
            v0, v1 = v0 * h, v1 * h
            c2 = 3 * (q1 - q0) - 2 * v0 - v1
            c3 = -2 * (q1 - q0) + v0 + v1
            pos = q0 + s * (v0 + s * (c2 + s * c3))
            vel = (v0 + s * (2 * c2 + s * 3 * c3)) / h
            acc = (2 * c2 + 6 * c3 * s) / (h * h)
            return pos, vel, acc
        return q0 + s * (q1 - q0), (q1 - q0) / h, np.zeros_like(q0)


def validate_goal(
    controller_joints: Sequence[str],
    joint_names: Sequence[str],
    points: Sequence[Mapping[str, Sequence[float] | float]],
    start_q: Sequence[float],
    lower: Sequence[float] | None = None,
    upper: Sequence[float] | None = None,
) -> SampledTrajectory:
    """Check a goal the way the controller does and reorder it to controller joint order.

    points: dicts with positions, velocities, accelerations (lists, may be empty) and
    time_from_start [s]. Raises GoalError with INVALID_JOINTS or INVALID_GOAL.
    """
    names = list(joint_names)
    expected = list(controller_joints)
    if sorted(names) != sorted(expected) or len(set(names)) != len(names):
        raise GoalError(
            INVALID_JOINTS,
            f'joint_names {names} do not match the controller joints {expected} '
            '(every joint exactly once, any order)',
        )
    if not points:
        raise GoalError(INVALID_GOAL, 'the trajectory has no points')
    order = [names.index(j) for j in expected]
    n = len(expected)
    t_prev = -math.inf
    ts: list[float] = []
    qs: list[np.ndarray] = []
    vs: list[np.ndarray] = []
    as_: list[np.ndarray] = []
    has_vel = all(len(p.get('velocities', ())) > 0 for p in points)  # type: ignore[arg-type]  # a point maps keys to lists or a time
    has_acc = has_vel and all(len(p.get('accelerations', ())) > 0 for p in points)  # type: ignore[arg-type]  # a point maps keys to lists or a time
    for i, p in enumerate(points):
        t = float(p['time_from_start'])  # type: ignore[arg-type]  # a point maps keys to lists or a time
        if not math.isfinite(t) or t <= t_prev or (i == 0 and t < 0):
            raise GoalError(
                INVALID_GOAL,
                f'points[{i}].time_from_start = {t} s; expected '
                'strictly increasing, non-negative times',
            )
        t_prev = t
        pos = np.asarray(p['positions'], dtype=float)
        if pos.shape != (n,) or not np.all(np.isfinite(pos)):
            raise GoalError(
                INVALID_GOAL,
                f'points[{i}].positions has {pos.size} values; expected {n} finite values',
            )
        for key, store, given in (('velocities', vs, has_vel), ('accelerations', as_, has_acc)):
            raw = np.asarray(p.get(key, ()), dtype=float)
            if raw.size and (raw.shape != (n,) or not np.all(np.isfinite(raw))):
                raise GoalError(
                    INVALID_GOAL,
                    f'points[{i}].{key} has {raw.size} values; expected 0 or {n} finite values',
                )
            store.append(raw[order] if given else np.zeros(n))
        q = pos[order]
        if lower is not None and upper is not None:
            lo, hi = np.asarray(lower), np.asarray(upper)
            bad = np.flatnonzero((q < lo - 1e-9) | (q > hi + 1e-9))
            if bad.size:
                j = int(bad[0])
                raise GoalError(
                    INVALID_GOAL,
                    f'points[{i}] puts {expected[j]} at {q[j]:.4f} rad, '
                    f'outside its limits [{lo[j]:.4f}, {hi[j]:.4f}]',
                )
        ts.append(t)
        qs.append(q)
    if ts[-1] <= 0:
        raise GoalError(INVALID_GOAL, 'the last point must have time_from_start > 0')
    return SampledTrajectory(
        np.array(ts),
        np.array(qs),
        np.array(vs),
        np.array(as_),
        has_vel,
        has_acc,
        np.asarray(start_q, dtype=float),
    )


def resolve_tolerances(
    controller_joints: Sequence[str],
    defaults: ToleranceSet,
    path: Sequence[tuple[str, float, float, float]] = (),
    goal: Sequence[tuple[str, float, float, float]] = (),
    goal_time: float = 0.0,
) -> ToleranceSet:
    """Merge a goal's tolerances over the controller defaults (0 keeps the default, <0 disables)."""
    joints = list(controller_joints)

    def merge(
        base: tuple[JointTolerance, ...],
        given: Sequence[tuple[str, float, float, float]],
        what: str,
    ) -> tuple[JointTolerance, ...]:
        out = list(base)
        for name, pos, vel, acc in given:
            if name not in joints:
                raise GoalError(
                    INVALID_GOAL,
                    f'{what} tolerance for unknown joint {name!r}; '
                    f'expected one of {", ".join(joints)}',
                )
            i = joints.index(name)
            old = out[i]

            def pick(v: float, d: float) -> float:
                return d if v == 0 else (-1.0 if v < 0 else v)

            out[i] = JointTolerance(
                pick(pos, old.position), pick(vel, old.velocity), pick(acc, old.acceleration)
            )
        return tuple(out)

    return ToleranceSet(
        merge(defaults.path, path, 'path'),
        merge(defaults.goal, goal, 'goal'),
        goal_time if goal_time > 0 else defaults.goal_time,
    )


def check_tolerance(
    tolerances: Sequence[JointTolerance],
    error_q: np.ndarray,
    error_qd: np.ndarray | None = None,
    joints: Sequence[str] = (),
) -> str | None:
    """None when inside every checked tolerance, else a message naming the joint and excess."""
    for i, tol in enumerate(tolerances):
        name = joints[i] if i < len(joints) else f'joint {i}'
        if tol.position > 0 and abs(error_q[i]) > tol.position:
            return f'{name} position error {abs(error_q[i]):.4f} rad > {tol.position:.4f}'
        if error_qd is not None and tol.velocity > 0 and abs(error_qd[i]) > tol.velocity:
            return f'{name} velocity error {abs(error_qd[i]):.4f} rad/s > {tol.velocity:.4f}'
    return None
