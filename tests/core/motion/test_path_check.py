"""Tests of the planner's parts: legs and dense paths (path.py), the path checks (check.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.motion import (
    HOME_Q,
    GripperGeometry,
    MotionError,
    MotionParams,
    UR10eKinematics,
    Waypoint,
    tool_down,
)
from palletizer.core.motion.check import (
    IK_UNREACHABLE,
    ArmModel,
    CheckedPath,
    Refusal,
    check_path,
    first_wrist_strike,
    reach_limit,
)
from palletizer.core.motion.path import group_legs, legs_through, sample_path, wrap_pi

P = MotionParams()
KIN = UR10eKinematics(limits=P.limits)
START = (0.4, -0.1, 1.0, 0.0)


def test_a_leg_holds_its_length_speed_and_turn():
    a, b = legs_through(
        START,
        [Waypoint(0.7, -0.1, 1.0, 0.0, None, 'cross'), Waypoint(0.7, -0.1, 1.0, 1.0, 0.5, 'turn')],
        0,
        P,
    )
    np.testing.assert_array_equal(a.start, START)
    assert (a.dist, a.turn, a.length) == pytest.approx((0.3, 0.0, 0.3))
    assert a.cap == P.cartesian_speed and a.accel_scale == 1.0 and a.transit
    assert a.name == 'cross'
    # A pure turn: its length is the yaw folded in, its speed the yaw rate limit's.
    r_yaw = P.cartesian_speed / P.angular_speed
    assert (b.dist, b.turn, b.length) == pytest.approx((0.0, 1.0, r_yaw))
    assert b.cap == pytest.approx(P.angular_speed * r_yaw) and not b.transit and b.speed == 0.5
    assert b.start is a.end


def test_a_leg_turns_the_short_way_round():
    (leg,) = legs_through(START, [Waypoint(0.5, -0.1, 1.0, 2 * math.pi - 0.1)], 0, P)
    assert leg.end[3] == pytest.approx(-0.1)
    assert wrap_pi(math.pi) == pytest.approx(-math.pi)


def test_a_non_finite_waypoint_is_named_with_its_plan_index():
    with pytest.raises(MotionError, match=r'waypoint 3 \(bad\) z = nan'):
        legs_through(
            START,
            [Waypoint(0.5, 0.0, 1.0, 0.0), Waypoint(0.5, 0.0, math.nan, 0.0, None, 'bad')],
            2,
            P,
        )


def test_straight_legs_run_as_one_segment_and_a_transit_corner_is_rounded_only_when_asked():
    wps = [
        Waypoint(0.4, -0.1, 0.8, 0.0),  # down
        Waypoint(0.4, -0.1, 0.6, 0.0, 0.5),  # on down, slower: same segment
        Waypoint(0.7, -0.1, 0.6, 0.0),  # across: a corner
    ]
    legs = legs_through(START, wps, 0, P)
    assert [(g.members, g.blended) for g in group_legs(legs, False, P)] == [
        ((0, 1), False),
        ((2,), False),
    ]
    # The corner after an approach-speed leg stops; two transit legs round it.
    assert not any(g.blended for g in group_legs(legs, True, P))
    transit = legs_through(START, [wps[0], wps[2]], 0, P)
    assert [(g.members, g.blended) for g in group_legs(transit, True, P)] == [((0, 1), True)]


def test_the_sampled_path_starts_at_the_start_and_ends_each_segment_on_its_waypoint():
    wps = [
        Waypoint(0.4, -0.1, 0.8, 0.0, None, 'down'),
        Waypoint(0.7, -0.1, 0.8, 0.3, None, 'across'),
    ]
    legs = legs_through(START, wps, 0, P)
    path = sample_path(legs, group_legs(legs, False, P), P, P.empty_accel)
    np.testing.assert_array_equal(path.poses[0], START)
    assert len(path.poses) == len(path.leg) == len(path.group)
    assert path.leg[0] == 0 and path.leg[-1] == 1 and len(path.segments) == 2
    for g, seg in enumerate(path.segments):
        last = np.flatnonzero(path.group == g)[-1]
        np.testing.assert_allclose(path.poses[last], legs[g].end, atol=1e-12)
        assert seg.s[0] == 0.0 and seg.s[-1] == pytest.approx(legs[g].length)
        assert len(seg.s) == len(seg.cap) == np.count_nonzero(path.group[1:] == g) + 1
    # 0.2 m down at 5 mm steps.
    assert np.count_nonzero(path.group[1:] == 0) == math.ceil(0.2 / P.path_step)


def test_the_arm_model_holds_the_kinematics_frames_and_limits():
    kin = UR10eKinematics(base_xyz=(0.6, -0.72, 0.5), base_yaw=0.3, tcp_offset=0.1)
    arm = ArmModel.of(kin)
    np.testing.assert_allclose(arm.T_base_world @ kin.T_world_base, np.eye(4), atol=1e-12)
    np.testing.assert_array_equal(arm.T_tcp_flange @ kin.T_flange_tcp, np.eye(4))
    np.testing.assert_array_equal(arm.lower, kin.limits.lower)
    np.testing.assert_array_equal(arm.upper, kin.limits.upper)


def _path_from_home(wps):
    """(HOME_Q, the dense path from its tool-down pose through wps, corners rounded)."""
    q0 = np.array(HOME_Q)
    T = KIN.fk(q0)
    start = (float(T[0, 3]), float(T[1, 3]), float(T[2, 3]), float(math.atan2(T[1, 0], T[0, 0])))
    legs = legs_through(start, wps, 0, P)
    return q0, sample_path(legs, group_legs(legs, True, P), P, P.empty_accel)


def test_a_checked_path_holds_each_segment_from_the_previous_ones_last_sample():
    q0, path = _path_from_home([Waypoint(0.5, 0.0, 0.8, 0.0)])
    checked = check_path(q0, path, 0, ArmModel.of(KIN), P, None, GripperGeometry().body, None)
    assert isinstance(checked, CheckedPath)
    (seg,) = checked.segments
    np.testing.assert_array_equal(seg.q[0], q0)
    np.testing.assert_array_equal(seg.q[-1], checked.q_end)
    assert len(seg.q) == len(seg.s) == len(path.poses)
    assert first_wrist_strike(seg.q, P) is None


def test_an_unreachable_sample_is_refused_naming_the_waypoint_by_its_plan_index():
    q0, path = _path_from_home([Waypoint(2.6, 0.0, 1.0, 0.0, None, 'far')])
    res = check_path(q0, path, 4, ArmModel.of(KIN), P, None, GripperGeometry().body, None)
    assert isinstance(res, Refusal)
    assert res.cause == IK_UNREACHABLE and res.failing == 4
    assert res.message.startswith('no branch-continuous in-limit IK at (')
    assert res.message.endswith('on the way to waypoint 4 (far)')


def test_reach_limit_is_the_top_when_reachable_else_the_highest_reachable_less_a_margin():
    q0 = np.array(HOME_Q)
    assert reach_limit(KIN, q0, [(0.5, 0.0)], 0.0, 0.6, 1.0) == 1.0
    z = reach_limit(KIN, q0, [(1.7, -0.7)], 0.0, 0.2, 3.0)
    assert 0.2 < z < 3.0
    assert KIN.ik_nearest(tool_down(1.7, -0.7, z, 0.0), q0) is not None
    assert KIN.ik_nearest(tool_down(1.7, -0.7, z + 0.06, 0.0), q0) is None
