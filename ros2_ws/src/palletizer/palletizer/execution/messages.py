"""Message conversions of the executor: joint trajectories, Pick, Place and MoveArm results.

Message types only, no rclpy: trajectory_msgs/JointTrajectory both ways, and the sequencer's
ExecResult to a Pick or Place action result or a MoveArm response and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from trajectory_msgs.msg import JointTrajectoryPoint

from palletizer.core.errors import PalletizerError
from palletizer.core.motion import JointTrajectory
from palletizer.execution.sequencer import ExecResult, Outcome

__all__ = [
    'duration_to_s',
    'exec_result_from_msg',
    'exec_result_to_msg',
    'trajectory_from_msg',
    'trajectory_to_msg',
]

_NS = 1_000_000_000


def _duration(t: float) -> Duration:
    ns = int(round(t * _NS))
    return Duration(sec=ns // _NS, nanosec=ns % _NS)


def duration_to_s(d: Duration) -> float:
    """builtin_interfaces/Duration as seconds [s]."""
    return d.sec + d.nanosec * 1e-9


def trajectory_to_msg(
    traj: JointTrajectory, joint_names: Sequence[str], dwell_s: float = 0.0
) -> JointTrajectoryMsg:
    """Every sample as a point with positions, velocities, accelerations and time_from_start.

    dwell_s > 0 appends a point that holds the final position, at rest, dwell_s [s] after the
    end: the servo settles while the wrist sensor keeps streaming, so the end of the goal is a
    still reading. The header stamp stays zero: the controller starts the goal as soon as it
    accepts it. Times are rounded to whole nanoseconds.
    """
    names = list(joint_names)
    q, qd, qdd = np.asarray(traj.q), np.asarray(traj.qd), np.asarray(traj.qdd)
    if q.ndim != 2 or q.shape[1] != len(names):
        raise PalletizerError(
            f'trajectory has {q.shape[-1] if q.ndim == 2 else q.shape} joints; expected '
            f'{len(names)} ({", ".join(names)})'
        )
    points = [
        JointTrajectoryPoint(
            positions=q[i].tolist(),
            velocities=qd[i].tolist(),
            accelerations=qdd[i].tolist(),
            time_from_start=_duration(float(t)),
        )
        for i, t in enumerate(np.asarray(traj.t))
    ]
    if dwell_s > 0 and points:
        zero = [0.0] * len(names)
        points.append(
            JointTrajectoryPoint(
                positions=q[-1].tolist(),
                velocities=zero,
                accelerations=zero,
                time_from_start=_duration(float(traj.t[-1]) + dwell_s),
            )
        )
    return JointTrajectoryMsg(joint_names=names, points=points)


def trajectory_from_msg(
    msg: JointTrajectoryMsg, joint_names: Sequence[str] | None = None
) -> JointTrajectory:
    """A message back to a JointTrajectory, columns reordered to `joint_names` when given.

    Points without velocities or accelerations read as zeros.
    """
    names = list(msg.joint_names)
    order = list(range(len(names)))
    if joint_names is not None:
        want = list(joint_names)
        missing = [j for j in want if j not in names]
        if missing or len(want) != len(names):
            raise PalletizerError(
                f'trajectory joint_names {names}; expected each of {want} exactly once'
            )
        order = [names.index(j) for j in want]
    n = len(names)
    m = len(msg.points)
    t = np.empty(m)
    q, qd, qdd = np.zeros((m, n)), np.zeros((m, n)), np.zeros((m, n))
    for i, p in enumerate(msg.points):
        t[i] = duration_to_s(p.time_from_start)
        q[i] = np.asarray(p.positions, dtype=float)[order]
        if len(p.velocities):
            qd[i] = np.asarray(p.velocities, dtype=float)[order]
        if len(p.accelerations):
            qdd[i] = np.asarray(p.accelerations, dtype=float)[order]
    return JointTrajectory(t, q, qd, qdd)


# The optional fields of the executor's results, and the ExecResult field each one carries.
_FIELDS = (
    ('failing_waypoint', int),
    ('active_cups', int),
    ('grip_capacity_ratio', float),
    ('reach_residual_m', float),
    ('motion_s', float),
)


def exec_result_to_msg(out: ExecResult, msg: Any) -> Any:
    """Fill a Pick or Place result or a MoveArm response from `out`; returns `msg`.

    error_code is the message's constant named like the outcome (one numbering in the executor
    band, docs/interfaces.md §9.2); error_msg is empty when ok; cause is the closed-vocabulary
    cause; the optional fields the message has (a pick's cups, a place's failing waypoint, a
    move's motion time) are copied.
    """
    kind = type(msg)
    code = getattr(kind, out.outcome.name, None)
    if code is None:
        raise PalletizerError(
            f'{kind.__name__} has no result constant for outcome {out.outcome.name}; it has '
            + ', '.join(o.name for o in Outcome if hasattr(kind, o.name))
        )
    msg.error_code = code
    msg.error_msg = '' if out.ok else out.message
    msg.cause = out.cause
    for name, cast in _FIELDS:
        if hasattr(msg, name):
            setattr(msg, name, cast(getattr(out, name)))
    return msg


def exec_result_from_msg(result: Any) -> ExecResult:
    """A palletizer_msgs Pick or Place action result, or a MoveArm response, back to the
    ExecResult it reports.

    The outcome is the Outcome whose name is the result constant equal to error_code; fields
    one result does not carry (a pick's failing waypoint, a place's cups, a move's motion time)
    keep their defaults. With execution.motion_outcome this is the director's view of the
    trajectory executor.
    """
    kind = type(result)
    by_code = {getattr(kind, o.name): o for o in Outcome if hasattr(kind, o.name)}
    outcome = by_code.get(result.error_code)
    if outcome is None:
        raise PalletizerError(
            f'{kind.__name__}.error_code = {result.error_code}; expected one of '
            + ', '.join(f'{code} ({o.name})' for code, o in sorted(by_code.items()))
        )
    return ExecResult(
        outcome,
        result.error_msg,
        result.cause,
        failing_waypoint=int(getattr(result, 'failing_waypoint', -1)),
        active_cups=int(getattr(result, 'active_cups', 0)),
        grip_capacity_ratio=float(getattr(result, 'grip_capacity_ratio', 0.0)),
        reach_residual_m=float(getattr(result, 'reach_residual_m', 0.0)),
        motion_s=float(getattr(result, 'motion_s', 0.0)),
    )
