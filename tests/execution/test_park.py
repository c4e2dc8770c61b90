"""The photo park: a checked tool-down Cartesian move round the base, and the way out of it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.contracts import HeightMap
from palletizer.core.motion import HOME_Q, MotionError, MotionPlanner, tool_down
from palletizer.core.motion.kinematics import yaw_of
from palletizer.execution import Outcome, ParkPose, PickPlaceSequencer, plan_park, plan_unpark

from tests.execution.test_sequencer import RecordingArm, _obs, _place_args

MP = MotionPlanner()
BASE = np.asarray(MP.kin.base_xyz[:2])


def _tcp(q):
    T = MP.kin.fk(np.asarray(q))
    return T[:3, 3], float(yaw_of(T)), T


def _low_pose_over_the_pallet():
    q = MP.kin.ik_nearest(tool_down(0.9, 0.1, 0.55, 0.0), np.array(HOME_Q))
    assert q is not None
    return q


def test_park_from_home_ends_tool_down_at_the_park_pose_yaw_0_modulo_a_half_turn():
    plan, parked = plan_park(MP, np.array(HOME_Q))
    assert plan.ok and parked is not None
    p, yaw, T = _tcp(plan.trajectory.q[-1])
    np.testing.assert_allclose(p, (1.15, -1.02, 1.05), atol=1e-4)
    assert abs(math.sin(yaw)) < 1e-4 and T[2, 2] < -0.9999
    np.testing.assert_allclose(parked.q_end, plan.trajectory.q[-1])


def test_park_from_low_over_the_pallet_rises_vertically_first_and_keeps_off_the_base_axis():
    q0 = _low_pose_over_the_pallet()
    plan, _ = plan_park(MP, q0)
    assert plan.ok, plan.message
    first = plan.waypoints[0]
    assert first.name == 'rise'
    np.testing.assert_allclose((first.x, first.y), (0.9, 0.1), atol=1e-6)
    assert first.z >= MP.params.transit_height
    pose = ParkPose()
    for w in plan.waypoints:
        assert math.hypot(w.x - BASE[0], w.y - BASE[1]) >= pose.min_radius - 1e-9
    # The dense path, not only the waypoints, stays off the base axis.
    tcp = np.array([_tcp(q)[0] for q in plan.trajectory.q[::10]])
    assert np.hypot(*(tcp[:, :2] - BASE).T).min() > 0.4
    assert {w.z for w in plan.waypoints} == {first.z} and first.z >= ParkPose().z


def test_a_parked_arm_plans_no_move():
    plan, _ = plan_park(MP, np.array(HOME_Q))
    again, parked = plan_park(MP, plan.trajectory.q[-1])
    assert again.ok and again.trajectory is None and parked is None


def test_a_stack_too_tall_to_clear_refuses_the_park_without_a_trajectory():
    tall = HeightMap(np.full((80, 120), 1.6), None, (0.0, -0.4), 0.01)
    seq = PickPlaceSequencer(RecordingArm())
    res = seq.park(tall)
    assert not res.ok and res.outcome in (Outcome.IK_UNREACHABLE, Outcome.COLLISION)
    assert seq.arm.goals == [] and seq.parked is None


def test_park_pose_rejects_non_finite_values():
    with pytest.raises(MotionError, match=r'ParkPose.z = nan; expected a finite number'):
        ParkPose(z=float('nan'))


def test_unpark_is_nothing_when_not_parked_or_when_the_arm_moved_since():
    plan, parked = plan_park(MP, np.array(HOME_Q))
    assert plan_unpark(MP, plan.trajectory.q[-1], None) is None
    assert plan_unpark(MP, np.array(HOME_Q), parked) is None


def test_unpark_ends_above_the_pallet_centre_with_the_yaw_before_the_park():
    q0 = _low_pose_over_the_pallet()
    plan, parked = plan_park(MP, q0)
    back = plan_unpark(MP, plan.trajectory.q[-1], parked)
    assert back is not None and back.ok, back.message
    p, yaw, _ = _tcp(back.trajectory.q[-1])
    np.testing.assert_allclose(p[:2], (0.60, 0.00), atol=1e-4)
    assert abs(math.sin(yaw - _tcp(q0)[1])) < 1e-4


def test_sequencer_parks_with_the_carton_and_the_place_first_leaves_the_park():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    # The station counts as out of the photos for the default pose: ask for a wider berth.
    res = seq.park(None, ParkPose(clear_distance=1.0))
    assert res.ok and res.motion_s > 0 and len(arm.goals) == 3
    p, _, _ = _tcp(arm.q)
    np.testing.assert_allclose(p, (1.15, -1.02, 1.05), atol=1e-4)
    seen: list[str] = []
    placed = seq.place(*_place_args(), feedback=lambda ph, pr: seen.append(ph))
    assert placed.ok, placed.message
    assert seen[0] == 'unpark' and len(arm.goals) == 6  # unpark + approach + retract
    assert arm.io == [True, False] and seq.parked is None


def test_an_arm_out_of_the_photos_at_the_station_is_not_moved_but_one_over_the_pallet_is():
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    assert seq.pick(_obs()).ok
    goals = len(arm.goals)
    res = seq.park(None)
    assert res.ok and res.motion_s == 0.0 and len(arm.goals) == goals
    assert 'out of the photos' in res.message and seq.parked is None
    plan, parked = plan_park(MP, _low_pose_over_the_pallet())
    assert plan.ok and plan.trajectory is not None and parked is not None


def test_out_of_photos_measures_the_distance_from_the_pallet_footprint():
    pose = ParkPose()  # pallet 1.20 x 0.80 centred at (0.60, 0.00), 0.40 m clearance
    assert not pose.out_of_photos(0.6, 0.0)
    assert not pose.out_of_photos(0.6, -0.79)  # 0.39 m in front of the near edge
    assert pose.out_of_photos(0.6, -0.81)
    assert pose.out_of_photos(-0.2, -0.8)  # pick station: 0.45 m from the corner
    assert not pose.out_of_photos(-0.1, -0.6)  # 0.22 m from the corner


@pytest.mark.parametrize(
    ('kw', 'msg'),
    [
        ({'clear_distance': 0.0}, r'ParkPose.clear_distance = 0.0; expected > 0'),
        ({'pallet_half': (0.6, -0.4)}, r'ParkPose.pallet_half = \(0.6, -0.4\); expected two'),
    ],
)
def test_park_pose_rejects_bad_clearances(kw, msg):
    with pytest.raises(MotionError, match=msg):
        ParkPose(**kw)


def test_hover_waits_above_the_station_with_yaw_0_and_is_refused_while_holding():
    from palletizer.core.config import load_config
    from palletizer.execution import ready_pose

    cfg = load_config()
    pose = ready_pose(cfg, 'table')
    # Beside the station (out of the station camera's view of the lid), at the table top 0.58 +
    # tallest carton 0.30 (random envelope) + place clearance 0.18 + cup gap.
    dx, dy = cfg.cell.motion.ready_offset
    assert math.hypot(dx, dy) > 0.3
    np.testing.assert_allclose(pose, (-0.20 + dx, -0.80 + dy, 1.0615, 0.0), atol=1e-9)
    np.testing.assert_allclose(ready_pose(cfg, 'conveyor')[:2], (-0.20 + dx, -0.80 + dy))
    assert ready_pose(cfg, 'truck') is None
    arm = RecordingArm()
    seq = PickPlaceSequencer(arm)
    q = _low_pose_over_the_pallet()
    arm.q = q
    res = seq.hover(None, pose)
    assert res.ok and res.motion_s > 0, res.message
    p, yaw, T = _tcp(arm.q)
    np.testing.assert_allclose(p, pose[:3], atol=1e-4)
    assert abs(math.sin(yaw)) < 1e-4 and T[2, 2] < -0.9999
    assert seq.hover(None, pose).message == 'already hovering'
    assert seq.pick(_obs()).ok
    goals = len(arm.goals)
    held = seq.hover(None, pose)
    assert not held.ok and 'carton is held' in held.message and len(arm.goals) == goals


def test_a_truck_pick_rises_past_the_tie_band_and_a_station_pick_does_not():
    from palletizer.core.config import load_config
    from palletizer.execution import pick_rise

    cfg = load_config()
    t = cfg.cell.truck
    assert pick_rise(cfg, 'truck') == pytest.approx(t.tie_band + t.lift_clearance)
    assert t.lift_clearance > 0.0
    assert pick_rise(cfg, 'table') == pick_rise(cfg, 'conveyor') == 0.0
