"""After a controller's own stop: what the state calls for, and the rest of the path resumed."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.motion import JointTrajectory, MotionParams
from palletizer.core.ur_modes import RobotMode, SafetyMode
from palletizer.execution.recovery import (
    RESUME_LIMITS,
    ControllerState,
    Recovery,
    resume_path,
)

RUNNING, NORMAL = RobotMode.RUNNING, SafetyMode.NORMAL


@pytest.mark.parametrize(
    ('robot', 'safety', 'program', 'want'),
    [
        (RUNNING, NORMAL, True, Recovery.NONE),  # the abort was the goal's own
        (RUNNING, NORMAL, False, Recovery.PLAY),  # the program stopped
        (RUNNING, SafetyMode.PROTECTIVE_STOP, False, Recovery.UNLOCK),
        (RUNNING, SafetyMode.ROBOT_EMERGENCY_STOP, False, Recovery.OPERATOR),
        (RUNNING, SafetyMode.SAFEGUARD_STOP, False, Recovery.OPERATOR),
        (RobotMode.POWER_OFF, NORMAL, False, Recovery.OPERATOR),
    ],
)
def test_the_controllers_state_calls_for_its_recovery(robot, safety, program, want):
    assert ControllerState(int(robot), int(safety), program).recovery() is want


def test_the_state_is_said_in_one_line_by_its_names():
    s = ControllerState(7, 3, False)
    assert s.describe() == 'safety mode PROTECTIVE_STOP, robot mode RUNNING, program stopped'
    assert 'safety mode 99' in ControllerState(7, 99, True).describe()


def _arc(duration: float = 2.0, rate: float = 500.0) -> JointTrajectory:
    """A curved rest-to-rest joint path: joints 0 and 1 on a quarter circle of 0.8 rad."""
    t = np.arange(int(duration * rate) + 1) / rate
    u = 0.5 * (1 - np.cos(np.pi * t / duration))  # 0 -> 1, at rest at both ends
    q = np.zeros((len(t), 6))
    q[:, 0] = 0.8 * np.sin(0.5 * np.pi * u)
    q[:, 1] = -0.8 * (1 - np.cos(0.5 * np.pi * u))
    q[:, 3] = 0.3 * u
    qd = np.gradient(q, t, axis=0)
    return JointTrajectory(t, q, qd, np.gradient(qd, t, axis=0))


def test_the_rest_of_the_path_is_resumed_from_where_the_arm_stands_at_rest_on_the_path():
    traj = _arc()
    p = MotionParams()
    # Stopped at 40 % of the time, 5 mrad off the path (the servo's lag at a protective stop).
    i = int(0.4 * (len(traj) - 1))
    q_now = traj.q[i] + np.array([0.005, 0.0, 0.0, 0.0, 0.0, 0.0])
    rest, joined = resume_path(traj, q_now, p.limits, p.rate_hz)
    np.testing.assert_allclose(rest.q[0], q_now, atol=1e-9)
    np.testing.assert_allclose(rest.q[-1], traj.q[-1], atol=1e-6)
    assert np.abs(rest.qd[0]).max() < 1e-6 and np.abs(rest.qd[-1]).max() < 1e-6
    assert abs(joined - traj.t[i]) < 0.02
    # Every sample lies on the planned path (within the step off it it began with).
    gap = np.linalg.norm(rest.q[:, None, :] - traj.q[None, ::5, :], axis=2).min(axis=1)
    assert gap.max() < 0.0055
    # Within the resume limits and every joint's own.
    assert np.linalg.norm(rest.qd, axis=1).max() <= RESUME_LIMITS.velocity * 1.01
    assert np.all(np.abs(rest.qd) <= np.asarray(p.limits.velocity) * 1.001)
    assert np.allclose(np.diff(rest.t), 1.0 / p.rate_hz)
    # It does not go back over the stretch already run.
    assert np.all(np.diff(rest.q[:, 3]) >= -1e-9)


def test_an_arm_stopped_at_the_end_of_its_path_gets_a_goal_that_stays_there():
    traj = _arc()
    p = MotionParams()
    rest, joined = resume_path(traj, traj.q[-1], p.limits, p.rate_hz)
    assert len(rest) == 1 and rest.duration == 0.0
    np.testing.assert_allclose(rest.q[0], traj.q[-1])
    assert joined == pytest.approx(traj.duration)
