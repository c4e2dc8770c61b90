"""FollowJointTrajectory semantics: validation, interpolation and tolerances like ros2_control."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.jtc import (
    INVALID_GOAL,
    INVALID_JOINTS,
    GoalError,
    JointTolerance,
    ToleranceSet,
    check_tolerance,
    resolve_tolerances,
    validate_goal,
)

J = ['a', 'b', 'c']


def _pt(q, t, v=(), a=()):
    return {'positions': q, 'velocities': v, 'accelerations': a, 'time_from_start': t}


def test_goal_in_another_joint_order_is_reordered_to_the_controller_order():
    tr = validate_goal(J, ['c', 'a', 'b'], [_pt([3.0, 1.0, 2.0], 1.0)], [0, 0, 0])
    np.testing.assert_allclose(tr.q[0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    'names, points, code, match',
    [
        (['a', 'b'], [_pt([0, 0], 1.0)], INVALID_JOINTS, 'do not match the controller joints'),
        (['a', 'a', 'b'], [_pt([0, 0, 0], 1.0)], INVALID_JOINTS, 'every joint exactly once'),
        (J, [], INVALID_GOAL, 'no points'),
        (J, [_pt([0, 0, 0], 1.0), _pt([0, 0, 0], 1.0)], INVALID_GOAL, 'strictly increasing'),
        (J, [_pt([0, 0], 1.0)], INVALID_GOAL, 'expected 3 finite values'),
        (J, [_pt([0, float('nan'), 0], 1.0)], INVALID_GOAL, 'expected 3 finite values'),
        (J, [_pt([0, 0, 0], 1.0, v=[1, 2])], INVALID_GOAL, 'velocities has 2 values'),
        (J, [_pt([0, 0, 9.0], 1.0)], INVALID_GOAL, 'puts c at 9.0000 rad, outside its limits'),
    ],
)
def test_bad_goals_are_refused_with_the_controller_error_code(names, points, code, match):
    with pytest.raises(GoalError, match=match) as e:
        validate_goal(J, names, points, [0, 0, 0], lower=[-3.2] * 3, upper=[3.2] * 3)
    assert e.value.code == code


def test_quintic_sampling_meets_every_point_with_its_derivatives():
    pts = [
        _pt([0.0, 0, 0], 0.5, [1.0, 0, 0], [0.0, 0, 0]),
        _pt([1.0, 0, 0], 1.5, [0.5, 0, 0], [-1.0, 0, 0]),
    ]
    tr = validate_goal(J, J, pts, [0, 0, 0])
    q, qd, qdd = tr.sample(1.5 - 1e-9)
    assert q[0] == pytest.approx(1.0, abs=1e-6) and qd[0] == pytest.approx(0.5, abs=1e-5)
    q, qd, _ = tr.sample(0.5)
    assert q[0] == pytest.approx(0.0) and qd[0] == pytest.approx(1.0)
    # Before the first point the controller interpolates from the start state.
    q, _, _ = tr.sample(0.25)
    assert 0.0 <= abs(q[0]) < 1.0
    q, qd, _ = tr.sample(5.0)
    assert q[0] == 1.0 and qd[0] == 0.0


def test_linear_sampling_without_velocities():
    tr = validate_goal(J, J, [_pt([0.0, 0, 0], 1.0), _pt([2.0, 0, 0], 2.0)], [0, 0, 0])
    q, qd, _ = tr.sample(1.5)
    assert q[0] == pytest.approx(1.0) and qd[0] == pytest.approx(2.0)


def test_goal_tolerances_merge_over_defaults_zero_keeps_negative_disables():
    d = ToleranceSet((JointTolerance(0.1),) * 3, (JointTolerance(0.01),) * 3, 0.5)
    r = resolve_tolerances(
        J,
        d,
        path=[('b', 0.0, 0.0, 0.0), ('c', -1.0, 0.0, 0.0)],
        goal=[('a', 0.002, 0.0, 0.0)],
        goal_time=0.0,
    )
    assert [t.position for t in r.path] == [0.1, 0.1, -1.0]
    assert r.goal[0].position == 0.002 and r.goal_time == 0.5
    assert (
        check_tolerance(r.path, np.array([0.0, 0.2, 5.0]), joints=J)
        == 'b position error 0.2000 rad > 0.1000'
    )
    assert check_tolerance(r.path, np.array([0.05, 0.05, 5.0]), joints=J) is None
    with pytest.raises(GoalError, match="unknown joint 'z'"):
        resolve_tolerances(J, d, path=[('z', 1.0, 0, 0)])
