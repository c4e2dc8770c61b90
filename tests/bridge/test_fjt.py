"""FjtRunner: FollowJointTrajectory goals executed on the real cell in control ticks."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.bridge import FjtDefaults, FjtRunner, FjtStatus
from palletizer.core.description import JOINTS
from palletizer.core.jtc import (
    GOAL_TOLERANCE_VIOLATED,
    INVALID_GOAL,
    INVALID_JOINTS,
    PATH_TOLERANCE_VIOLATED,
    SUCCESSFUL,
    GoalError,
)
from palletizer.sim.cell import Cell

pytestmark = pytest.mark.sim

SPEED = np.deg2rad([120, 120, 180, 180, 180, 180])


def _runner(speed: float = 1.0) -> FjtRunner:
    return FjtRunner(Cell(), JOINTS, [-6.3] * 6, [6.3] * 6, SPEED, FjtDefaults(), speed)


def _points(q0, dq, duration):
    """Rest to rest: start, then the target with zero velocity (cubic interpolation)."""
    q1 = np.asarray(q0) + np.asarray(dq)
    z = [0.0] * 6
    return [
        {'positions': list(q0), 'velocities': z, 'time_from_start': 0.0},
        {'positions': list(q1), 'velocities': z, 'time_from_start': duration},
    ]


def test_goal_is_tracked_to_its_end_within_the_goal_tolerance_with_feedback_each_tick():
    run = _runner()
    q0 = run.cell.q
    dq = np.array([0.3, -0.2, 0.2, 0.0, 0.1, 0.4])
    ticks = []
    out = run.execute(run.prepare(JOINTS, _points(q0, dq, 1.0)), ticks.append)
    assert out.status is FjtStatus.succeeded and out.error_code == SUCCESSFUL
    np.testing.assert_allclose(run.cell.q, q0 + dq, atol=0.01)
    # 1.0 s in 20 ms ticks, plus however many settling ticks the goal check needed.
    assert 50 <= len(ticks) == out.ticks <= 50 + 25
    np.testing.assert_allclose(np.diff([t.time for t in ticks]), 0.02, atol=1e-9)
    assert max(np.abs(t.error_q).max() for t in ticks) < 0.01


def test_goal_joint_order_follows_the_goal_names_not_the_controller():
    run = _runner()
    q0 = run.cell.q
    order = [5, 4, 3, 2, 1, 0]
    pts = _points(q0, [0.2, 0, 0, 0, 0, 0], 0.5)
    for p in pts:
        p['positions'] = [p['positions'][i] for i in order]
    out = run.execute(run.prepare([JOINTS[i] for i in order], pts))
    assert out.error_code == SUCCESSFUL
    # The same motion, written in another joint order, moves the same joint.
    np.testing.assert_allclose(run.cell.q[0], q0[0] + 0.2, atol=0.01)
    np.testing.assert_allclose(run.cell.q[5], q0[5], atol=0.01)


def test_tiny_path_tolerance_aborts_and_the_arm_holds_where_it_stopped():
    run = _runner()
    q0 = run.cell.q
    goal = run.prepare(
        JOINTS, _points(q0, [0.5, 0, 0, 0, 0, 0], 2.0), path_tolerance=[(JOINTS[0], 1e-5, 0, 0)]
    )
    out = run.execute(goal)
    assert out.status is FjtStatus.aborted and out.error_code == PATH_TOLERANCE_VIOLATED
    assert 'shoulder_pan_joint position error' in out.error_string
    stopped = run.cell.q
    run.cell.settle(0.5)
    np.testing.assert_allclose(run.cell.q, stopped, atol=2e-3)
    assert abs(run.cell.q[0] - q0[0]) < 0.1


def test_cancel_between_ticks_stops_short_of_the_target_and_holds():
    run = _runner()
    q0 = run.cell.q
    ticks = []
    goal = run.prepare(JOINTS, _points(q0, [1.0, 0, 0, 0, 0, 0], 4.0))
    out = run.execute(goal, ticks.append, lambda: len(ticks) >= 50)
    assert out.status is FjtStatus.canceled and out.ticks == 50
    np.testing.assert_allclose(out.sim_time, 1.0, atol=1e-9)
    run.cell.settle(0.5)
    moved = run.cell.q[0] - q0[0]
    assert 0.05 < moved < 0.5


def test_unreachable_goal_tolerance_aborts_after_the_goal_time():
    run = _runner()
    q0 = run.cell.q
    goal = run.prepare(
        JOINTS,
        _points(q0, [0.3, 0, 0, 0, 0, 0], 0.3),
        goal_tolerance=[(j, 1e-9, 0, 0) for j in JOINTS],
        goal_time_tolerance=0.1,
    )
    out = run.execute(goal)
    assert out.error_code == GOAL_TOLERANCE_VIOLATED
    np.testing.assert_allclose(out.sim_time, 0.4, atol=0.021)


def test_wrong_joint_names_are_invalid_joints():
    run = _runner()
    names = list(JOINTS[:5]) + ['gripper_joint']
    with pytest.raises(GoalError, match='do not match the controller joints') as err:
        run.prepare(names, _points(run.cell.q, [0.1] * 6, 1.0))
    assert err.value.code == INVALID_JOINTS


def test_goal_above_the_ur_speed_limits_is_invalid():
    run = _runner()
    with pytest.raises(GoalError, match='shoulder_pan_joint speed .* exceeds') as err:
        run.prepare(JOINTS, _points(run.cell.q, [1.0, 0, 0, 0, 0, 0], 0.3))
    assert err.value.code == INVALID_GOAL


def test_fast_forward_sets_the_final_point_without_physics_time():
    run = _runner(speed=0.0)
    q0 = run.cell.q
    ticks = []
    dq = np.array([0.4, 0.1, -0.1, 0.2, 0.0, 1.0])
    # Fast-forward does not speed-check: the servo never tracks the samples.
    out = run.execute(run.prepare(JOINTS, _points(q0, dq, 0.1)), ticks.append)
    assert out.error_code == SUCCESSFUL and run.cell.time == 0.0 and len(ticks) == 1
    np.testing.assert_allclose(run.cell.q, q0 + dq, atol=1e-12)


def test_two_identical_goal_sequences_leave_identical_worlds():
    digests = []
    for _ in range(2):
        run = _runner()
        q0 = run.cell.q
        run.execute(run.prepare(JOINTS, _points(q0, [0.2, -0.1, 0.1, 0, 0, 0], 0.6)))
        run.cell.settle(0.1)
        digests.append(run.cell.state_digest())
    assert digests[0] == digests[1]


def test_at_half_speed_scaling_a_goal_takes_twice_as_long_and_still_succeeds():
    """The scaled joint trajectory controller: the trajectory's time advances at the speed
    scaling (the pendant's slider), so a slowed goal is not a failure; at 0 the arm holds."""
    scale = {'s': 0.5}
    run = FjtRunner(
        Cell(),
        JOINTS,
        [-6.3] * 6,
        [6.3] * 6,
        SPEED,
        FjtDefaults(),
        1.0,
        scaling=lambda: scale['s'],
    )
    q0 = run.cell.q
    dq = np.array([0.3, -0.2, 0.2, 0.0, 0.1, 0.4])
    ticks = []
    out = run.execute(run.prepare(JOINTS, _points(q0, dq, 1.0)), ticks.append)
    assert out.status is FjtStatus.succeeded and out.error_code == SUCCESSFUL
    np.testing.assert_allclose(run.cell.q, q0 + dq, atol=0.01)
    assert 2.0 <= out.sim_time < 2.5  # 1 s of trajectory at 50 %: 2 s, plus settling ticks
    np.testing.assert_allclose(np.diff([t.time for t in ticks[:50]]), 0.01, atol=1e-9)
    # Scaled to 0 mid-way the arm holds where the trajectory stood.
    scale['s'] = 1.0
    ticks.clear()
    stop_after = 20

    def freeze(tick):
        ticks.append(tick)
        if len(ticks) == stop_after:
            scale['s'] = 0.0
        if len(ticks) == stop_after + 25:
            scale['s'] = 1.0

    q1 = run.cell.q
    out = run.execute(run.prepare(JOINTS, _points(q1, -dq, 1.0)), freeze)
    assert out.status is FjtStatus.succeeded
    held = [t.time for t in ticks[stop_after : stop_after + 24]]
    assert max(held) - min(held) < 1e-9  # trajectory time stood still while scaled to 0
    assert out.sim_time >= 1.0 + 24 * 0.02


def test_a_controller_event_aborts_the_goal_with_its_code_and_holds_the_arm_where_it_stands():
    # The controller's own stop (bridge/faults.py: a protective stop, the program stopped) is
    # asked after each tick with the share of the trajectory run: the goal ends there, aborted
    # with the event's code and text, the arm far short of the target and at rest.
    run = _runner()
    q0 = run.cell.q
    dq = np.array([0.4, 0.0, 0.0, 0.0, 0.0, 0.0])
    shares = []

    def event(share):
        shares.append(share)
        return (
            (INVALID_GOAL, 'goal aborted: safety mode is PROTECTIVE_STOP')
            if share >= 0.4
            else None
        )

    out = run.execute(run.prepare(JOINTS, _points(q0, dq, 1.0)), event=event)
    assert out.status is FjtStatus.aborted and out.error_code == INVALID_GOAL
    assert 'PROTECTIVE_STOP' in out.error_string
    assert 0.4 <= shares[-1] < 0.45 and shares == sorted(shares)
    moved = run.cell.q[0] - q0[0]
    assert 0.1 * dq[0] < moved < 0.8 * dq[0]
    run.cell.step(250)  # half a second held: the servo keeps the arm where it stopped
    assert abs(run.cell.q[0] - q0[0] - moved) < 0.02
