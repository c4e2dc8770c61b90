"""core.motion trajectories survive the trajectory_msgs/JointTrajectory round trip; the
executor's results survive the Pick / Place / MoveArm round trip."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('trajectory_msgs', reason='interfaces not built: run scripts/setup')

from palletizer.core.errors import PalletizerError  # noqa: E402
from palletizer.core.motion import HOME_Q, CartonPose, JointTrajectory, MotionPlanner  # noqa: E402
from palletizer.core.ports import EpisodeAborted  # noqa: E402
from palletizer.execution import (  # noqa: E402
    ExecResult,
    Outcome,
    duration_to_s,
    exec_result_from_msg,
    exec_result_to_msg,
    motion_outcome,
    trajectory_from_msg,
    trajectory_to_msg,
)

NAMES = (
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
)


def _planned() -> JointTrajectory:
    plan = MotionPlanner().plan_pick(
        np.array(HOME_Q), CartonPose(-0.2, -0.8, 0.73, 0.3, (0.4, 0.3, 0.3))
    )
    assert plan.ok and plan.trajectory is not None
    return plan.trajectory


def test_planned_trajectory_round_trips_times_positions_velocities_accelerations():
    traj = _planned()
    msg = trajectory_to_msg(traj, NAMES)
    assert list(msg.joint_names) == list(NAMES) and len(msg.points) == len(traj)
    back = trajectory_from_msg(msg, NAMES)
    np.testing.assert_allclose(back.t, traj.t, atol=1e-9)  # whole nanoseconds
    np.testing.assert_array_equal(back.q, traj.q)
    np.testing.assert_array_equal(back.qd, traj.qd)
    np.testing.assert_array_equal(back.qdd, traj.qdd)


def test_dwell_appends_one_point_holding_the_end_at_rest():
    traj = _planned()
    msg = trajectory_to_msg(traj, NAMES, dwell_s=0.1)
    assert len(msg.points) == len(traj) + 1
    last = msg.points[-1]
    np.testing.assert_allclose(duration_to_s(last.time_from_start), traj.duration + 0.1)
    np.testing.assert_array_equal(last.positions, traj.q[-1])
    assert list(last.velocities) == [0.0] * 6 and list(last.accelerations) == [0.0] * 6


def test_times_become_seconds_and_nanoseconds():
    t = np.array([0.0, 0.002, 1.5, 61.000000001])
    z = np.zeros((4, 6))
    msg = trajectory_to_msg(JointTrajectory(t, z, z, z), NAMES)
    assert (msg.points[2].time_from_start.sec, msg.points[2].time_from_start.nanosec) == (
        1,
        500_000_000,
    )
    assert msg.points[3].time_from_start.sec == 61
    np.testing.assert_allclose([duration_to_s(p.time_from_start) for p in msg.points], t)


def test_reading_back_reorders_to_the_requested_joint_order():
    rng = np.random.default_rng(2)
    q = rng.normal(size=(3, 6))
    traj = JointTrajectory(np.array([0.0, 0.1, 0.2]), q, 2 * q, 3 * q)
    msg = trajectory_to_msg(traj, NAMES)
    rev = tuple(reversed(NAMES))
    back = trajectory_from_msg(msg, rev)
    np.testing.assert_array_equal(back.q, q[:, ::-1])
    np.testing.assert_array_equal(back.qdd, 3 * q[:, ::-1])


def test_missing_velocities_read_as_zero():
    traj = JointTrajectory(np.array([0.0, 0.5]), np.ones((2, 6)), np.ones((2, 6)), np.ones((2, 6)))
    msg = trajectory_to_msg(traj, NAMES)
    for p in msg.points:
        p.velocities = []
        p.accelerations = []
    back = trajectory_from_msg(msg)
    np.testing.assert_array_equal(back.qd, np.zeros((2, 6)))


def test_wrong_joint_count_and_names_are_refused():
    z = np.zeros((2, 5))
    with pytest.raises(PalletizerError, match='trajectory has 5 joints; expected 6'):
        trajectory_to_msg(JointTrajectory(np.array([0.0, 1.0]), z, z, z), NAMES)
    msg = trajectory_to_msg(_planned(), NAMES)
    with pytest.raises(PalletizerError, match='expected each of'):
        trajectory_from_msg(msg, (*NAMES[:5], 'wrist_4_joint'))


def _as_node_reports(kind, out: ExecResult):
    """The Pick / Place result the trajectory_executor node builds from an ExecResult."""
    return exec_result_to_msg(out, kind.Result())


@pytest.mark.parametrize('outcome', list(Outcome))
def test_action_results_read_back_as_the_exec_result_the_node_reported(outcome):
    from palletizer_msgs.action import Pick, Place

    cause = '' if outcome in (Outcome.OK, Outcome.INVALID_REQUEST) else 'collision'
    msg = '' if outcome is Outcome.OK else 'why'
    place = ExecResult(outcome, msg, cause, failing_waypoint=2, reach_residual_m=0.004)
    back = exec_result_from_msg(_as_node_reports(Place, place))
    assert back == place
    if outcome is Outcome.INVALID_REQUEST:
        with pytest.raises(EpisodeAborted, match='the executor refused the place goal: why'):
            motion_outcome(back, placing=True)
    else:
        assert motion_outcome(back, placing=True) == motion_outcome(place, placing=True)
    pick = ExecResult(outcome, msg, cause, active_cups=12, grip_capacity_ratio=3.5)
    assert exec_result_from_msg(_as_node_reports(Pick, pick)) == pick


@pytest.mark.parametrize('outcome', [o for o in Outcome if o is not Outcome.INVALID_REQUEST])
def test_a_move_response_reads_back_as_the_exec_result_of_the_park_or_ready(outcome):
    from palletizer_msgs.srv import MoveArm

    cause = '' if outcome is Outcome.OK else 'ik_unreachable'
    out = ExecResult(outcome, '' if outcome is Outcome.OK else 'why', cause, motion_s=2.25)
    res = exec_result_to_msg(out, MoveArm.Response())
    assert res.error_code == getattr(MoveArm.Response, outcome.name) and res.motion_s == 2.25
    assert exec_result_from_msg(res) == out


def test_an_outcome_without_a_constant_in_the_message_is_refused_naming_those_it_has():
    from palletizer_msgs.srv import MoveArm

    with pytest.raises(
        PalletizerError,
        match='MoveArm_Response has no result constant for '
        'outcome INVALID_REQUEST; it has OK, IK_UNREACHABLE',
    ):
        exec_result_to_msg(ExecResult(Outcome.INVALID_REQUEST, 'bad'), MoveArm.Response())


def test_a_code_means_the_same_outcome_in_pick_place_and_move_arm():
    from palletizer_msgs.action import Pick, Place
    from palletizer_msgs.srv import MoveArm

    for o in Outcome:
        codes = {
            getattr(k, o.name)
            for k in (Pick.Result, Place.Result, MoveArm.Response)
            if hasattr(k, o.name)
        }
        assert len(codes) == 1, (o, codes)
    assert Place.Result.GRASP_SLIP == Pick.Result.GRASP_SLIP == MoveArm.Response.GRASP_SLIP == 302


def test_an_unknown_action_error_code_is_refused_with_the_valid_ones():
    from palletizer_msgs.action import Place

    with pytest.raises(
        PalletizerError,
        match=r'error_code = 7; expected one of 0 \(OK\), 301 \(IK_UNREACHABLE\), 302',
    ):
        exec_result_from_msg(Place.Result(error_code=7))
