"""A UR controller's own stops, as the palletizer meets them, and the way back.

A real UR10e ends a trajectory goal on its own: a protective stop when the arm strikes
something (safety mode PROTECTIVE_STOP, the External Control program stopped with it), the
program stopped from the pendant or by a lost connection. After an aborted goal the executor
reads the controller's state from the dashboard (`ControllerState`), says it in one line, and
recovers where a real cell would (`Recovery`): unlock a protective stop once the controller
allows it, play the program again, and resume the goal's own path from where the arm stands
(`resume_path`), at a reduced speed. What only an operator may clear (an emergency stop, a
safeguard stop, a fault, the arm powered off) ends the carton with the state named.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from palletizer.core.motion.kinematics import JointLimits
from palletizer.core.motion.timing import (
    JointTrajectory,
    PathLimits,
    sample_segments,
    time_segment,
)
from palletizer.core.ur_modes import RobotMode, SafetyMode

__all__ = ['RESUME_LIMITS', 'ControllerState', 'Recovery', 'resume_path']

# The resumed path's limits along its joint-space arc length [rad, /s, /s^2, /s^3]: a third of
# the slowest joint's speed limit (UR10e shoulder 120 deg/s), gentle acceleration: a resumed
# move follows a path planned for a motion that did not finish, past what stopped it.
RESUME_LIMITS = PathLimits(velocity=0.7, acceleration=1.5, jerk=10.0)
# Grid step of the resumed path [rad of joint-space arc length].
_STEP = 2e-3


class Recovery(Enum):
    NONE = 'none'  # nothing stopped the controller: the abort is the goal's own
    PLAY = 'play'  # play the program again, then resume
    UNLOCK = 'unlock'  # unlock the protective stop, play the program, then resume
    OPERATOR = 'operator'  # an operator's to clear: end the carton, naming the state


@dataclass(frozen=True)
class ControllerState:
    """What the dashboard says after a goal ended: robot mode, safety mode, program running."""

    robot_mode: int
    safety_mode: int
    program_running: bool

    def describe(self) -> str:
        """One line naming the state, e.g. 'safety mode PROTECTIVE_STOP, robot mode RUNNING,
        program stopped'."""
        return (
            f'safety mode {_name(SafetyMode, self.safety_mode)}, robot mode '
            f'{_name(RobotMode, self.robot_mode)}, program '
            f'{"running" if self.program_running else "stopped"}'
        )

    def recovery(self) -> Recovery:
        if self.safety_mode == SafetyMode.PROTECTIVE_STOP:
            return Recovery.UNLOCK
        if self.safety_mode not in (SafetyMode.NORMAL, SafetyMode.REDUCED):
            return Recovery.OPERATOR
        if self.robot_mode != RobotMode.RUNNING:
            return Recovery.OPERATOR
        return Recovery.NONE if self.program_running else Recovery.PLAY


def _name(kind: type[Enum], value: int) -> str:
    try:
        return kind(value).name
    except ValueError:
        return str(value)


def resume_path(
    traj: JointTrajectory,
    q_now: np.ndarray,
    limits: JointLimits,
    rate_hz: float,
    path_limits: PathLimits = RESUME_LIMITS,
) -> tuple[JointTrajectory, float]:
    """The rest of `traj`'s path from `q_now`, rest to rest: (trajectory, time into `traj`
    [s] where it joins it).

    The arm stopped near the path; the sample of `traj` nearest to `q_now` is where it picks
    up. The resumed path runs from `q_now` straight to that sample and on through the rest of
    `traj`'s samples, so it goes where the planned path went, collision-checked as it was,
    re-timed from rest within `path_limits` and the joint limits.
    """
    q_now = np.asarray(q_now, dtype=float)
    i = int(np.argmin(np.linalg.norm(traj.q - q_now, axis=1)))
    pts = np.vstack([q_now[None, :], traj.q[i + 1 :]])
    step = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    keep = np.concatenate([[True], step > 1e-9])
    pts = pts[keep]
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
    joined = float(traj.t[i])
    if arc[-1] < 1e-6:
        z = np.zeros((1, pts.shape[1]))
        return JointTrajectory(np.array([0.0]), pts[:1].copy(), z, z.copy()), joined
    n = max(3, int(np.ceil(arc[-1] / _STEP)) + 1)
    s = np.linspace(0.0, arc[-1], n)
    q = np.column_stack([np.interp(s, arc, pts[:, j]) for j in range(pts.shape[1])])
    seg = time_segment(s, q, path_limits, limits)
    return sample_segments([seg], limits, rate_hz), joined
