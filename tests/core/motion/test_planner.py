"""Tests of checked pick / place plans: continuity, limits, straight lines, refusals.

Why one file of this length: every case plans through the same planner fixtures and checks
the same trajectory properties; the path and check modules have their own tests
(test_path_check.py).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from palletizer.core.motion import (
    AABB,
    HOME_Q,
    CartonPose,
    CollisionWorld,
    HeightField,
    MotionError,
    MotionParams,
    MotionPlanner,
    Waypoint,
    placed_box,
    tool_down,
    yaw_of,
)

DECK = 0.144
PLANNER = MotionPlanner()
PICK_TABLE = AABB((-0.56, -1.14, 0.0), (0.16, -0.46, 0.58), 'pick_table')
PEDESTAL = AABB((0.36, -0.96, 0.0), (0.84, -0.48, 0.48), 'pedestal')


def _world(top: float = 0.0) -> CollisionWorld:
    return CollisionWorld(HeightField(np.full((80, 120), top)), (PICK_TABLE, PEDESTAL))


def _pick_and_place(rng: np.random.Generator, n: int):
    q = np.array(HOME_Q)
    out = []
    for _ in range(n):
        dims = (rng.uniform(0.25, 0.6), rng.uniform(0.19, 0.4), rng.uniform(0.1, 0.35))
        carton = CartonPose(
            -0.20 + rng.uniform(-0.02, 0.02),
            -0.80 + rng.uniform(-0.02, 0.02),
            0.58 + dims[2] / 2,
            rng.uniform(-math.pi, math.pi),
            dims,
        )
        pick = PLANNER.plan_pick(q, carton, _world(), mass=5.0)
        assert pick.ok, pick.message
        target = CartonPose(
            rng.uniform(0.2, 1.0),
            rng.uniform(-0.25, 0.25),
            DECK + dims[2] / 2,
            rng.choice([0.0, math.pi / 2]),
            dims,
        )
        place = PLANNER.plan_place(pick.q_end, target, pick.grasp, _world())
        assert place.ok, place.message
        out.append((carton, pick, target, place))
        q = place.q_end
    return out


@pytest.fixture(scope='module')
def plans():
    return _pick_and_place(np.random.default_rng(7), 4)


def _tail(mask: np.ndarray) -> np.ndarray:
    """The last contiguous run of True in mask, as a mask."""
    out = np.zeros_like(mask)
    i = len(mask)
    while i > 0 and mask[i - 1]:
        i -= 1
    out[i:] = True
    return out


def _trajectories(plans):
    for _, pick, _, place in plans:
        yield from (pick.trajectory, pick.retreat, place.trajectory, place.retreat)


def test_pick_and_place_samples_have_no_branch_flip(plans):
    p = PLANNER.params
    dt = 1.0 / p.rate_hz
    v = np.asarray(p.limits.velocity)
    for tr in _trajectories(plans):
        steps = np.abs(np.diff(tr.q, axis=0))
        # Each 2 ms step stays within what the speed limit allows: no jump between branches.
        assert np.all(steps <= v * dt * 1.05 + 1e-12)


def test_every_sample_respects_position_speed_and_accel_limits(plans):
    lim = PLANNER.params.limits
    for tr in _trajectories(plans):
        assert np.all(lim.within(tr.q))
        assert np.all(np.abs(tr.qd) <= np.asarray(lim.velocity) + 1e-9)
        assert np.all(np.abs(tr.qdd) <= np.asarray(lim.acceleration) + 1e-9)


def test_sampled_rates_are_consistent_with_positions(plans):
    dt = 1.0 / PLANNER.params.rate_hz
    for tr in _trajectories(plans):
        fd = np.diff(tr.q, axis=0) / np.diff(tr.t)[:, None]
        mid = (tr.qd[1:] + tr.qd[:-1]) / 2
        np.testing.assert_allclose(fd, mid, atol=5e-3)
        assert np.all(np.diff(tr.t) <= dt + 1e-12)


def test_trajectories_chain_and_start_and_end_at_rest(plans):
    q = np.array(HOME_Q)
    for tr in _trajectories(plans):
        np.testing.assert_allclose(tr.q[0], q, atol=1e-9)
        np.testing.assert_allclose(tr.qd[[0, -1]], 0.0, atol=1e-9)
        q = tr.q[-1]


def test_seal_pose_cancels_the_cup_block_offset_and_descends_vertically(plans):
    kin = PLANNER.kin
    for carton, pick, _, _ in plans:
        T = kin.fk(pick.trajectory.q)
        seal = T[-1]
        # The active block's centre, taken through the full tool rotation, is over the lid centre.
        block = seal @ np.array([*pick.grasp.offset, 0.0, 1.0])
        np.testing.assert_allclose(block[:2], (carton.x, carton.y), atol=1e-4)
        assert seal[2, 3] == pytest.approx(carton.z + carton.dims[2] / 2 + 0.0015, abs=1e-4)
        # Yaw matches the carton's up to a half turn.
        dyaw = (float(yaw_of(seal)) - carton.yaw) % math.pi
        assert min(dyaw, math.pi - dyaw) < 1e-4
        # The last waypoint pair is a vertical descent: xy fixed while z drops.
        low = _tail(T[:, 2, 3] < seal[2, 3] + 0.15)
        assert low.sum() > 10
        np.testing.assert_allclose(T[low, :2, 3] - seal[:2, 3], 0.0, atol=2e-4)


def test_release_height_is_plan_top_plus_cup_gap_plus_drop(plans):
    for _, _, target, place in plans:
        T = PLANNER.kin.fk(place.trajectory.q[-1])
        assert T[2, 3] == pytest.approx(target.z + target.dims[2] / 2 + 0.0015 + 0.002, abs=1e-4)


def test_place_retracts_vertically_to_where_the_move_back_would_rise_to(plans):
    # Straight up from the release to the hover's safe height over the stack with the carton
    # on it (the transit height over these first-layer cartons), not only to the approach
    # height: the move back then starts with no rise of its own.
    p = PLANNER.params
    for *_, target, place in plans:
        start = PLANNER.kin.fk(place.retreat.q[0])[:3, 3]
        end = PLANNER.kin.fk(place.retreat.q[-1])[:3, 3]
        np.testing.assert_allclose(end[:2], start[:2], atol=1e-6)
        top = target.z + target.dims[2] / 2
        rise = max(p.transit_height, top + p.stack_clearance)
        assert end[2] == pytest.approx(max(start[2] + p.place_clearance, rise), abs=1e-4)
        hover = PLANNER.plan_hover(place.q_end, -0.2, -1.22, 1.06, _world(top))
        assert hover.ok and all(w.name != 'rise' for w in hover.waypoints), hover.waypoints


def test_a_retract_out_of_reach_of_the_safe_height_stops_where_the_arm_reaches(plans):
    # With 1 m of stack clearance the safe height is out of the arm's reach: the retract goes
    # as high as the arm reaches above the release, never below the approach height.
    p = dataclasses.replace(PLANNER.params, stack_clearance=1.0)
    planner = MotionPlanner(params=p)
    carton, pick, target, _ = plans[0]
    place = planner.plan_place(pick.q_end, target, pick.grasp, _world())
    assert place.ok, place.message
    start = planner.kin.fk(place.retreat.q[0])[:3, 3]
    end = planner.kin.fk(place.retreat.q[-1])[:3, 3]
    top = target.z + target.dims[2] / 2
    assert start[2] + p.place_clearance + 0.05 < end[2] < top + p.stack_clearance
    T = planner.kin.fk(place.retreat.q[-1])
    higher = tool_down(float(end[0]), float(end[1]), float(end[2]) + 0.06, float(yaw_of(T)))
    # The reach, less its 5 cm margin, found to 5 mm: 6 cm higher is out of reach.
    assert planner.kin.ik_nearest(higher, place.q_end) is None


def test_a_placed_carton_raises_the_stack_top_and_blocks_a_path_through_it():
    world = _world()
    carton = placed_box(0.6, 0.0, 0.4, math.pi / 2, (0.4, 0.3, 0.5))
    np.testing.assert_allclose(carton.lo, (0.45, -0.2, 0.15))
    np.testing.assert_allclose(carton.hi, (0.75, 0.2, 0.65))
    with_it = CollisionWorld(world.height_field, world.boxes, (carton,))
    assert world.stack_top(DECK) == pytest.approx(DECK)  # an empty pallet: the deck
    assert with_it.stack_top(DECK) == pytest.approx(0.65)
    q = PLANNER.kin.ik_nearest(tool_down(0.3, 0.0, 0.55, 0.0), np.array(HOME_Q))
    wps = [Waypoint(0.9, 0.0, 0.55, 0.0, None, 'through')]
    assert PLANNER.plan_cartesian(q, wps, world).ok
    blocked = PLANNER.plan_cartesian(q, wps, with_it)
    assert not blocked.ok and blocked.cause == 'collision' and 'placed_carton' in blocked.message


def test_tcp_speed_respects_cartesian_and_approach_speeds(plans):
    p = PLANNER.params
    for _, pick, _, _ in plans:
        tr = pick.trajectory
        T = PLANNER.kin.fk(tr.q)
        speed = np.linalg.norm(np.diff(T[:, :3, 3], axis=0), axis=1) / np.diff(tr.t)
        assert speed.max() <= p.cartesian_speed * 1.02
        seal_z = T[-1, 2, 3]
        final = _tail(T[1:, 2, 3] < seal_z + p.place_clearance - 0.005)
        assert final.sum() > 10
        assert speed[final].max() <= p.approach_speed * 1.02


def test_place_crosses_above_the_stack_plus_carried_height():
    top = 0.55
    world = _world(top)
    q = np.array(HOME_Q)
    dims = (0.4, 0.3, 0.2)
    pick = PLANNER.plan_pick(q, CartonPose(-0.2, -0.8, 0.68, 0.0, dims), world)
    assert pick.ok, pick.message
    target = CartonPose(0.6, 0.0, DECK + top + 0.1, 0.0, dims)
    place = PLANNER.plan_place(pick.q_end, target, pick.grasp, world)
    assert place.ok, place.message
    cross = place.waypoints[[w.name for w in place.waypoints].index('cross')]
    assert cross.z == pytest.approx(DECK + top + 0.2 + 0.0015 + 0.22)


def test_target_two_metres_away_is_refused_as_unreachable_naming_the_waypoint():
    q = np.array(HOME_Q)
    far = CartonPose(2.6, 0.0, 0.3, 0.0, (0.4, 0.3, 0.2))
    res = PLANNER.plan_pick(q, far, _world())
    assert not res.ok
    assert res.cause == 'ik_unreachable'
    assert res.trajectory is None and res.retreat is None
    assert res.failing_name == 'cross'
    assert 'waypoint' in res.message


def test_tall_column_on_the_straight_path_is_refused_as_collision():
    heights = np.zeros((80, 120))
    heights[35:45, 55:65] = 0.9  # a 0.9 m column at the pallet centre
    world = CollisionWorld(HeightField(heights))
    q = np.array(HOME_Q)
    z0 = PLANNER.kin.fk(q)[2, 3]
    wps = [
        Waypoint(0.2, -0.3, z0, 0.0, name='over_start'),
        Waypoint(0.2, -0.3, 0.9, 0.0, name='down'),
        Waypoint(1.0, 0.3, 0.9, 0.0, name='through_column'),
    ]
    res = PLANNER.plan_cartesian(q, wps, world)
    assert not res.ok
    assert res.cause == 'collision'
    assert res.failing_waypoint == 2 and res.failing_name == 'through_column'
    assert res.trajectory is None
    # The same path without the column is accepted.
    assert PLANNER.plan_cartesian(q, wps, CollisionWorld(HeightField(np.zeros((80, 120))))).ok


def test_static_pillar_on_the_cross_is_refused_as_collision_with_the_carried_carton():
    pillar = AABB((0.1, -0.6, 0.0), (0.3, -0.4, 1.6), 'pillar')
    world = CollisionWorld(HeightField(np.zeros((80, 120))), (PICK_TABLE, pillar))
    q = np.array(HOME_Q)
    dims = (0.4, 0.3, 0.2)
    pick = PLANNER.plan_pick(q, CartonPose(-0.2, -0.8, 0.68, 0.0, dims), _world())
    place = PLANNER.plan_place(
        pick.q_end, CartonPose(0.9, 0.2, DECK + 0.1, 0.0, dims), pick.grasp, world
    )
    assert not place.ok and place.cause == 'collision'
    assert place.failing_name == 'cross'
    assert 'pillar' in place.message


def test_carton_too_heavy_for_its_cups_is_refused_before_motion():
    res = PLANNER.plan_pick(
        np.array(HOME_Q), CartonPose(-0.2, -0.8, 0.64, 0.0, (0.24, 0.18, 0.12)), mass=30.0
    )
    assert not res.ok and res.cause == 'grasp_slip' and res.trajectory is None


def test_start_pose_that_is_not_tool_down_raises():
    with pytest.raises(MotionError, match='does not point the tool down'):
        PLANNER.plan_cartesian(
            np.array([1.0472, -2.0944, 1.5708, -1.5708, -1.5708, 0.0]),
            [Waypoint(0.5, 0.0, 1.0, 0.0)],
        )


def test_controller_rate_is_configurable():
    planner = MotionPlanner(params=MotionParams(rate_hz=125.0))
    q = np.array(HOME_Q)
    T0 = planner.kin.fk(q)
    res = planner.plan_cartesian(q, [Waypoint(T0[0, 3], T0[1, 3], T0[2, 3] - 0.2, 0.0)])
    assert res.ok
    np.testing.assert_allclose(np.diff(res.trajectory.t), 1 / 125.0)


def test_motion_params_reject_nonpositive_speed():
    with pytest.raises(MotionError, match='cartesian_speed'):
        MotionParams(cartesian_speed=0.0)


def _distance_to_polyline(p: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Distance of points p (n, 3) to the polyline through vertices (m, 3)."""
    best = np.full(len(p), np.inf)
    for a, b in zip(vertices[:-1], vertices[1:], strict=True):
        ab = b - a
        t = np.clip(((p - a) @ ab) / max(ab @ ab, 1e-18), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(p - (a + t[:, None] * ab), axis=1))
    return best


def _tcp_and_polyline(res):
    """(TCP positions (n, 3), polyline vertices (m, 3)) of both phases of a pick or place."""
    n_first = len(res.waypoints) - 1
    for tr, wps in (
        (res.trajectory, res.waypoints[:n_first]),
        (res.retreat, res.waypoints[n_first:]),
    ):
        T = PLANNER.kin.fk(tr.q)
        assert np.all(T[:, 2, 2] < -1 + 1e-9)  # tool down at every sample
        yield T[:, :3, 3], np.vstack([T[0, :3, 3], [[w.x, w.y, w.z] for w in wps]])


def test_sampled_tcp_stays_on_the_straight_lines_away_from_rounded_corners(plans):
    r = PLANNER.params.blend_radius
    for _, pick, _, place in plans:
        for res in (pick, place):
            for tcp, verts in _tcp_and_polyline(res):
                dist = _distance_to_polyline(tcp, verts)
                near = np.zeros(len(tcp), dtype=bool)
                for v in verts[1:-1]:
                    near |= np.linalg.norm(tcp - v, axis=1) < r + 1e-6
                assert dist[~near].max() < 1e-4
                # A rounded corner cuts at most a third of the blend radius off it.
                assert dist.max() < r / 3


def test_without_rounding_the_tcp_stays_on_the_straight_lines_everywhere():
    planner = MotionPlanner(params=MotionParams(blend_radius=0.0))
    rng = np.random.default_rng(7)
    dims = (0.4, 0.3, 0.2)
    pick = planner.plan_pick(
        np.array(HOME_Q), CartonPose(-0.2, -0.8, 0.68, rng.uniform(-1, 1), dims), _world()
    )
    place = planner.plan_place(
        pick.q_end, CartonPose(0.5, 0.1, DECK + 0.1, 0.0, dims), pick.grasp, _world()
    )
    assert pick.ok and place.ok
    for res in (pick, place):
        for tcp, verts in _tcp_and_polyline(res):
            assert _distance_to_polyline(tcp, verts).max() < 1e-4


def test_the_arm_does_not_stop_at_a_rounded_corner(plans):
    for _, _, _, place in plans:
        names = [w.name for w in place.waypoints]
        corner = place.waypoints[names.index('cross')]
        tcp = PLANNER.kin.fk(place.trajectory.q)[:, :3, 3]
        i = int(np.argmin(np.linalg.norm(tcp - (corner.x, corner.y, corner.z), axis=1)))
        dt = np.diff(place.trajectory.t)[0]
        speed = np.linalg.norm(tcp[i + 1] - tcp[i - 1]) / (2 * dt)
        assert speed > 0.2, f'{speed:.3f} m/s at the cross corner'


def test_a_rounded_corner_that_would_clip_an_obstacle_is_planned_with_a_stop_instead():
    q = np.array(HOME_Q)
    T0 = PLANNER.kin.fk(q)
    x0, y0, z0 = T0[:3, 3]
    # Across, then down: the rounded corner lowers the tool's trailing edge onto a post that
    # the straight cross passes over and the vertical descent misses.
    wps = [
        Waypoint(x0 + 0.3, y0, z0, 0.0, None, 'cross'),
        Waypoint(x0 + 0.3, y0, z0 - 0.3, 0.0, None, 'down'),
    ]
    free = PLANNER.plan_cartesian(q, wps, CollisionWorld(None, ()))
    post = AABB((x0 + 0.14, y0 - 0.2, 0.0), (x0 + 0.16, y0 + 0.2, z0 - 0.01), 'post')
    guarded = PLANNER.plan_cartesian(q, wps, CollisionWorld(None, (post,)))
    assert free.ok and guarded.ok, guarded.message
    assert guarded.trajectory.duration > free.trajectory.duration
    tcp = PLANNER.kin.fk(guarded.trajectory.q)[:, :3, 3]
    verts = np.array([[x0, y0, z0], [x0 + 0.3, y0, z0], [x0 + 0.3, y0, z0 - 0.3]])
    assert _distance_to_polyline(tcp, verts).max() < 1e-4


def test_many_cycles_with_random_yaws_keep_the_wrist_within_its_range():
    rng = np.random.default_rng(11)
    q = np.array(HOME_Q)
    dims = (0.4, 0.3, 0.2)
    for _ in range(10):
        pick = PLANNER.plan_pick(
            q, CartonPose(-0.2, -0.8, 0.68, rng.uniform(-math.pi, math.pi), dims), _world()
        )
        assert pick.ok, pick.message
        target = CartonPose(
            rng.uniform(0.3, 0.9),
            rng.uniform(-0.2, 0.2),
            DECK + 0.1,
            rng.uniform(-math.pi, math.pi),
            dims,
        )
        place = PLANNER.plan_place(pick.q_end, target, pick.grasp, _world())
        assert place.ok, place.message
        # A box is symmetric under a half turn: the tool never turns more than a quarter turn
        # beyond what the base rotation asks of the wrist.
        for tr in (pick.trajectory, place.trajectory):
            yaw = yaw_of(PLANNER.kin.fk(tr.q[[0, -1]]))
            assert abs((yaw[1] - yaw[0] + math.pi) % (2 * math.pi) - math.pi) <= math.pi / 2 + 1e-6
        q = place.q_end
        assert abs(q[5]) < 2 * math.pi - 0.3


def test_a_held_turn_puts_the_carton_frame_at_the_planned_yaw_over_many_cycles():
    """The carton frame (the one its weighed CoG is in) ends at the planned yaw, not a half
    turn off: the place keeps the pick's tool-to-carton turn modulo a full turn. Without it
    (held_turn None) the tool takes the nearest half turn and half the places flip."""
    rng = np.random.default_rng(5)
    q = np.array(HOME_Q)
    dims = (0.4, 0.3, 0.2)
    flipped_free = 0
    for _ in range(12):
        obs_yaw = rng.uniform(-math.pi, math.pi)
        pick = PLANNER.plan_pick(q, CartonPose(-0.2, -0.8, 0.68, obs_yaw, dims), _world())
        assert pick.ok, pick.message
        tool_at_pick = yaw_of(PLANNER.kin.fk(pick.trajectory.q[-1]))
        turn = (tool_at_pick - obs_yaw + math.pi) % (2 * math.pi) - math.pi
        assert min(abs(turn), math.pi - abs(turn)) < 1e-3  # 0 or a half turn
        target = CartonPose(
            rng.uniform(0.3, 0.9),
            rng.uniform(-0.2, 0.2),
            DECK + 0.1,
            rng.choice([0.0, math.pi / 2, math.pi, 3 * math.pi / 2]),
            dims,
        )
        free = PLANNER.plan_place(pick.q_end, target, pick.grasp, _world())
        place = PLANNER.plan_place(pick.q_end, target, pick.grasp, _world(), held_turn=turn)
        assert place.ok and free.ok, place.message
        for res, kept in ((place, True), (free, False)):
            tool = yaw_of(PLANNER.kin.fk(res.trajectory.q[-1]))
            frame = tool - turn  # the carton frame's yaw as released
            err = (frame - target.yaw + math.pi) % (2 * math.pi) - math.pi
            if kept:
                assert abs(err) < 1e-3, (math.degrees(err), math.degrees(turn))
            else:
                flipped_free += abs(err) > 1.0
        q = place.q_end
        assert abs(q[5]) < 2 * math.pi - 0.3
    assert flipped_free > 0  # the symmetric choice does flip some


@pytest.mark.parametrize(
    'q0, carton, turn',
    [
        # Level 32 seed 1: the nearest IK at the target is the solution a full turn the other
        # way round; the half turn the other way (3.154 rad) was not a candidate.
        ((-2.11, -0.856, 1.867, -2.582, -1.571, 4.173), (-0.428, -1.021, -1.558), 2.23),
        # Level 33 seed 48: the nearest IK is on the other shoulder branch.
        ((-2.55, -1.511, 2.261, -2.32, -1.571, 5.304), (-0.402, -1.106, -0.017), 2.75),
    ],
)
def test_a_pick_round_the_base_turns_the_tool_the_way_that_keeps_wrist_3_in_its_limits(
    q0, carton, turn
):
    """After places that leave wrist 3 near a limit, the pick of the next carton swings over
    2 rad round the base: the tool yaw is chosen for the shoulder turn the path really makes."""
    # The logged joints (3 decimals) put back exactly tool-down at their TCP.
    T = PLANNER.kin.fk(np.array(q0))
    q0 = PLANNER.kin.ik_nearest(tool_down(*T[:3, 3], float(yaw_of(T))), np.array(q0))
    box = CartonPose(carton[0], carton[1], 0.12, carton[2], (0.3, 0.2, 0.2))
    assert PLANNER._base_turn(q0, box.x, box.y) == pytest.approx(turn, abs=0.05)
    res = PLANNER.plan_pick(q0, box, CollisionWorld(None, ()), mass=2.0)
    assert res.ok, res.message
    q = np.concatenate([res.trajectory.q, res.retreat.q])
    assert np.all(np.abs(q[:, 5]) <= 2 * math.pi)
    assert q[-1, 0] - q0[0] == pytest.approx(turn, abs=0.15)


def test_pick_uses_a_given_cup_block_offset():
    from palletizer.core.motion import Grasp

    grasp = Grasp(0, 2, 0, 2, (-0.0747, -0.048), 4 * 35.0, None)
    carton = CartonPose(-0.2, -0.8, 0.68, 0.4, (0.4, 0.3, 0.2))
    res = PLANNER.plan_pick(np.array(HOME_Q), carton, _world(), grasp=grasp)
    assert res.ok and res.grasp is grasp
    seal = PLANNER.kin.fk(res.trajectory.q[-1])
    block = seal @ np.array([*grasp.offset, 0.0, 1.0])
    np.testing.assert_allclose(block[:2], (carton.x, carton.y), atol=1e-4)
    assert np.linalg.norm(seal[:2, 3] - block[:2]) > 0.08


def test_fast_drop_and_final_descent_run_without_a_stop_between(plans):
    p = PLANNER.params
    for _, _, _, place in plans:
        tr = place.trajectory
        T = PLANNER.kin.fk(tr.q)
        z = T[:, 2, 3]
        speed = np.linalg.norm(np.diff(T[:, :3, 3], axis=0), axis=1) / np.diff(tr.t)
        release_z = z[-1]
        # Around the switch to approach speed the TCP keeps moving down at approach speed.
        near = np.abs(z[1:] - (release_z + p.place_clearance)) < 0.01
        assert near.sum() > 3
        assert speed[near].min() > 0.5 * p.approach_speed


def test_empty_cups_accelerate_harder_than_a_carried_carton():
    q = np.array(HOME_Q)
    carton = CartonPose(-0.2, -0.8, 0.68, 0.0, (0.4, 0.3, 0.2))
    slow = MotionPlanner(params=MotionParams(empty_accel=2.0)).plan_pick(q, carton, _world())
    fast = PLANNER.plan_pick(q, carton, _world())
    assert slow.ok and fast.ok
    assert fast.trajectory.duration < slow.trajectory.duration - 0.05
    # The lift carries the carton: the same loaded acceleration either way.
    assert fast.retreat.duration == pytest.approx(slow.retreat.duration, abs=2e-3)


def test_motion_params_reject_nonpositive_empty_accel():
    with pytest.raises(MotionError, match='empty_accel'):
        MotionParams(empty_accel=0.0)


def test_truck_to_pallet_cross_goes_around_the_base_axis():
    """A straight cross from the trailer to the pallet passes 0.2 m from the base axis (no IK
    near the shoulder singularity); the planner arcs around it instead."""
    from palletizer.core.motion import HOME_Q, CartonPose, MotionPlanner, UR10eKinematics
    from palletizer.core.motion.grasp import plan_grasp
    from palletizer.core.motion.kinematics import tool_down

    kin = UR10eKinematics()
    planner = MotionPlanner(kin)
    q_truck = kin.ik_nearest(tool_down(-0.41, -0.90, 0.94, 1.58), np.asarray(HOME_Q))
    assert q_truck is not None
    target = CartonPose(0.63, -0.2, 0.144 + 0.09, 0.0, (0.36, 0.24, 0.18))
    res = planner.plan_place(q_truck, target, plan_grasp(0.36, 0.24))
    assert res.ok, res.message
    assert 'around' in [w.name for w in res.waypoints]
    bx, by = kin.base_xyz[0], kin.base_xyz[1]
    tcp = np.array([kin.fk(q)[:3, 3] for q in res.trajectory.q[::5]])
    r = np.hypot(tcp[:, 0] - bx, tcp[:, 1] - by)
    assert r.min() > 0.40, r.min()


def test_every_jerk_limited_timing_keeps_each_joint_within_its_jerk_limit():
    q = np.array(HOME_Q)
    dims = (0.4, 0.3, 0.2)
    out = {}
    for timing in ('time_optimal', 'jerk_limited', 'ruckig'):
        planner = MotionPlanner(params=MotionParams(timing=timing))
        pick = planner.plan_pick(q, CartonPose(-0.2, -0.8, 0.68, 0.3, dims), _world())
        assert pick.ok, pick.message
        target = CartonPose(0.7, 0.1, DECK + 0.1, 0.0, dims)
        place = planner.plan_place(pick.q_end, target, pick.grasp, _world())
        assert place.ok, place.message
        trs = (pick.trajectory, pick.retreat, place.trajectory, place.retreat)
        jerk = np.concatenate(
            [np.abs(np.diff(tr.qdd, axis=0)) / np.diff(tr.t)[:, None] for tr in trs]
        ).max(axis=0)
        out[timing] = (jerk, sum(tr.duration for tr in trs))
    limit = np.asarray(PLANNER.params.limits.jerk)
    assert np.all(out['jerk_limited'][0] <= limit)  # the default
    assert np.all(out['ruckig'][0] <= limit)
    # Unsmoothed, the acceleration steps between grid points: the check above can fail.
    assert out['time_optimal'][0].max() > 4 * limit.max()
    # Smoothing costs a few per cent; ruckig with one set of limits per segment far more.
    assert out['time_optimal'][1] < out['jerk_limited'][1] < 1.06 * out['time_optimal'][1]
    assert out['ruckig'][1] > 1.2 * out['jerk_limited'][1]


def test_a_release_that_would_drive_the_wrist_into_the_base_is_refused_before_motion():
    """Level 12 seed 1 (grid planner): placing 0.43 m from the base axis, 0.25 m above the
    deck, folded wrist 1 into the robot's base; the checks now see the arm's wrist joints."""
    q = np.array(HOME_Q)
    dims = (0.24, 0.18, 0.10)
    pick = PLANNER.plan_pick(q, CartonPose(-0.2, -0.8, 0.63, 0.0, dims), _world())
    assert pick.ok, pick.message
    near = CartonPose(0.637, -0.294, DECK + 0.05, 0.0, dims)
    res = PLANNER.plan_place(pick.q_end, near, pick.grasp, _world())
    assert not res.ok and res.cause == 'collision' and 'robot base or pedestal' in res.message
    assert res.trajectory is None
    # The same carton farther out along the pallet's near edge is fine.
    far = CartonPose(0.3, -0.294, DECK + 0.05, 0.0, dims)
    assert PLANNER.plan_place(pick.q_end, far, pick.grasp, _world()).ok


def test_wrist_near_mount_measures_the_wrist_joints_against_base_and_pedestal():
    from palletizer.core.motion.kinematics import wrist_near_mount

    kin = PLANNER.kin
    folded = kin.ik_nearest(tool_down(0.637, -0.294, 0.247, 0.0), np.array(HOME_Q))
    out = kin.ik_nearest(tool_down(0.3, -0.3, 0.25, 0.0), np.array(HOME_Q))
    got = wrist_near_mount(np.array([folded, out]), 0.24, 0.095, 0.181, 0.075)
    assert got.tolist() == [True, False]


def test_a_tall_stack_is_crossed_as_high_as_the_arm_reaches_and_still_cleared():
    """Level 16 seed 1: a 1.0 m stack asked 1.48 m for the carried carton's full crossing
    clearance, out of the UR10e's reach above the station and on the way; the lift and the
    cross now stop where the arm reaches and keep at least 5 cm over the stack."""
    heights = np.full((80, 120), 0.6)
    heights[:30, :] = 1.0  # the tallest rows, between the station and the target
    world = CollisionWorld(HeightField(heights), (PICK_TABLE, PEDESTAL))
    dims = (0.33, 0.24, 0.14)
    q = PLANNER.kin.ik_nearest(tool_down(-0.199, -0.796, 1.30, 0.07), np.array(HOME_Q))
    full = DECK + 1.0 + dims[2] + PLANNER.params.cup_gap + PLANNER.params.stack_clearance
    pick = PLANNER.plan_pick(q, CartonPose(-0.199, -0.796, 0.58 + 0.07, 0.07, dims), world)
    assert pick.ok, pick.message
    lift_top = PLANNER.kin.fk(pick.q_end)[2, 3]
    assert lift_top < full - 0.02  # the full clearance height is out of reach there
    target = CartonPose(0.16, 0.085, DECK + 0.6 + 0.07, 3 * math.pi / 2, dims)
    place = PLANNER.plan_place(pick.q_end, target, pick.grasp, world)
    assert place.ok, place.message
    tcp = np.array([PLANNER.kin.fk(qq)[:3, 3] for qq in place.trajectory.q[::10]])
    assert tcp[:, 2].max() < full
    # With the TCP over the tall rows the carried carton's bottom stays 5 cm above them.
    over = (tcp[:, 0] > 0.0) & (tcp[:, 1] < -0.1)
    assert over.sum() >= 5
    bottom = tcp[:, 2] - PLANNER.params.cup_gap - dims[2]
    assert bottom[over].min() >= DECK + 1.0 + 0.05 - 1e-3


def test_arm_box_hits_sees_the_forearm_and_wrist_capsules_of_the_robot_body():
    """The kernel's links are the self-filter's capsules (RobotBody.shapes, in the world): a
    small box just outside a capsule's surface (plus the margin) is missed, just inside hit."""
    from palletizer.core.heightmap_fusion import RobotBody
    from palletizer.core.motion.kinematics import arm_box_hits

    kin = PLANNER.kin
    Tbw = kin.T_world_base
    body = RobotBody()
    margin = 0.015
    for q in (
        kin.ik_nearest(tool_down(0.3, -0.3, 0.25, 0.0), np.array(HOME_Q)),
        kin.ik_nearest(tool_down(0.05, -0.35, 0.30, 1.2), np.array(HOME_Q)),
    ):
        caps, _ = body.shapes(q)
        for a, b, r in caps[4:]:  # forearm, wrists 1, 2, 3
            mid = (a + b) / 2
            # Straight out from the capsule's middle, across its axis and away from the arm.
            axis = (b - a) / np.linalg.norm(b - a)
            out = np.cross(axis, [0.0, 0.0, 1.0])
            if np.linalg.norm(out) < 0.1:
                out = np.cross(axis, [1.0, 0.0, 0.0])
            out /= np.linalg.norm(out)
            for side in (out, -out):
                for gap, want in ((r + margin - 0.006, 0), (r + margin + 0.006, -1)):
                    c = mid + side * (gap + 0.005)
                    lo, hi = c - 0.005, c + 0.005
                    got = arm_box_hits(q[None], Tbw, lo[None], hi[None], margin)
                    if want == -1:
                        # Another link may stand there: only a box clear of every capsule.
                        d = [
                            np.linalg.norm(
                                c
                                - (
                                    a2
                                    + np.clip((c - a2) @ (b2 - a2) / ((b2 - a2) @ (b2 - a2)), 0, 1)
                                    * (b2 - a2)
                                )
                            )
                            - r2
                            for a2, b2, r2 in caps[4:]
                        ]
                        if min(d) < margin + 0.01:
                            continue
                    assert got.tolist() == [want], (r, gap, side)


def test_a_pick_refused_for_a_collision_is_tried_with_the_tool_turned_a_half_turn():
    from palletizer.core.motion import Grasp

    # An off-centre cup block puts the tool body over one side of a small carton; a post
    # beside that side, above the table, is in the tool's way but not in the carton's.
    grasp = Grasp(0, 2, 0, 2, (-0.0747, -0.048), 4 * 35.0, None)
    carton = CartonPose(-0.2, -0.8, 0.68, 0.4, (0.26, 0.2, 0.2))
    centre = np.array([carton.x, carton.y])
    free = PLANNER.plan_pick(np.array(HOME_Q), carton, _world(), grasp=grasp)
    flange = PLANNER.kin.fk(free.trajectory.q[-1])[:2, 3]
    u = (flange - centre) / np.linalg.norm(flange - centre)
    c = centre + 0.20 * u
    post = AABB((c[0] - 0.02, c[1] - 0.02, 0.60), (c[0] + 0.02, c[1] + 0.02, 0.95), 'post')
    world = CollisionWorld(HeightField(np.zeros((80, 120))), (PICK_TABLE, PEDESTAL, post))
    seal = PLANNER.kin.fk(free.trajectory.q[-1])
    first = PLANNER._pick_at_yaw(
        np.array(HOME_Q), carton, world, grasp, math.atan2(seal[1, 0], seal[0, 0])
    )
    assert not first.ok and first.cause == 'collision' and 'post' in first.message
    res = PLANNER.plan_pick(np.array(HOME_Q), carton, world, grasp=grasp)
    assert res.ok
    turned = PLANNER.kin.fk(res.trajectory.q[-1])[:2, 3]
    # The flange is now on the far side of the cup block from the post.
    assert float(np.dot(turned - centre, u)) < 0.0
    # With the post on both sides neither turn clears it with that block; another block
    # over the lid moves the tool off the posts' line.
    c2 = centre - 0.20 * u
    post2 = AABB((c2[0] - 0.02, c2[1] - 0.02, 0.60), (c2[0] + 0.02, c2[1] + 0.02, 0.95), 'post2')
    both = CollisionWorld(HeightField(np.zeros((80, 120))), (PICK_TABLE, PEDESTAL, post, post2))
    for turn in (0.0, math.pi):
        yaw = math.atan2(seal[1, 0], seal[0, 0]) + turn
        assert not PLANNER._pick_at_yaw(np.array(HOME_Q), carton, both, grasp, yaw).ok
    res = PLANNER.plan_pick(np.array(HOME_Q), carton, both, grasp=grasp)
    assert res.ok and res.grasp.offset != grasp.offset


def test_a_pick_with_a_rise_lifts_the_carton_bottom_that_far_above_its_lid():
    # A truck pick: another column's top may stand up to tie_band above this lid, so the
    # carton leaves only once its bottom is above that (execution.layout.pick_rise).
    dims = (0.40, 0.30, 0.30)
    carton = CartonPose(-0.2, -0.8, 0.58 + 0.15, 0.0, dims)
    lid = 0.58 + 0.30
    q = np.array(HOME_Q)

    def lift_bottom(rise: float) -> float:
        res = PLANNER.plan_pick(q, carton, _world(), rise=rise)
        assert res.ok, res.message
        lift = [w for w in res.waypoints if w.name == 'lift']
        assert len(lift) == 1
        return lift[0].z - PLANNER.params.cup_gap - dims[2]

    assert lift_bottom(0.0) < lid + 0.05  # the place clearance alone: 180 mm over the lid
    assert lift_bottom(0.05) == pytest.approx(lid + 0.05)


def test_the_arm_margin_passes_a_low_truck_pick_beside_the_auxiliary_table():
    """Level 33 seed 15's pick beside the auxiliary table: the capsules keep 9.5 mm from it
    (14.8 mm before they held the whole simulated wrists), refused at the former 10 and 15 mm
    margins; the margin still refuses what comes 2 mm closer."""
    from palletizer.core.config import load_config
    from palletizer.core.motion.kinematics import arm_box_hits
    from palletizer.execution.layout import arm_boxes

    aux = next(b for b in arm_boxes(load_config(), 'truck') if b.name == 'auxiliary_table')
    lo, hi = np.array([aux.lo]), np.array([aux.hi])
    q = PLANNER.kin.ik_nearest(tool_down(-0.333, -0.593, 0.376, 0.013), np.array(HOME_Q))
    assert q is not None
    margin = MotionParams().arm_margin
    Tbw = PLANNER.kin.T_world_base
    assert arm_box_hits(q[None], Tbw, lo, hi, margin)[0] == -1
    assert arm_box_hits(q[None], Tbw, lo, hi, 0.010)[0] == 0
    grow = 0.0095 - margin + 0.002  # the table 2 mm nearer than the margin allows
    assert arm_box_hits(q[None], Tbw, lo - grow, hi + grow, margin)[0] == 0


def _tall_stack_world() -> CollisionWorld:
    """A 1.1 m stack over the whole deck (level 16's last layers)."""
    return CollisionWorld(HeightField(np.full((80, 120), 1.1)), (PICK_TABLE, PEDESTAL))


def test_an_empty_arm_leaves_a_tall_stack_for_the_wait_point_descending_on_the_way():
    """Level 16 seed 1: the stack clearance above a 1.1 m stack (1.46 m) is out of reach above
    the pick table's wait point (~1.24 m): the hover ran the whole cross at that height and was
    refused. It now keeps the full height over the stack and comes down on the way."""
    world = _tall_stack_world()
    safe = DECK + 1.1 + PLANNER.params.stack_clearance
    q = PLANNER.kin.ik_nearest(tool_down(0.9, -0.2, safe, 0.0), np.array(HOME_Q))
    res = PLANNER.plan_hover(q, -0.2, -1.22, 1.061, world, yaw=0.0)
    assert res.ok, res.message
    tcp = np.array([PLANNER.kin.fk(qq)[:3, 3] for qq in res.trajectory.q])
    assert tcp[-1] == pytest.approx([-0.2, -1.22, 1.061], abs=2e-3)
    over = (tcp[:, 0] > 0.0) & (tcp[:, 1] > -0.4)  # above the deck
    assert over.sum() >= 5
    assert tcp[over, 2].min() >= safe - 1e-3
    # Unreachable at that height above the wait point: the fallback was needed.
    assert PLANNER.kin.ik_nearest(tool_down(-0.2, -1.22, safe, 0.0), q) is None


def test_a_pick_below_a_tall_stack_lifts_as_high_as_the_source_needs_not_the_stack():
    """Level 16 seeds 1 and 4: the lift's floor was the stack's clearance, 1.46 m, which the
    arm does not reach above the table; the fallback lift now stops where the arm reaches and
    at least the carton's own clearance above its lid."""
    world = _tall_stack_world()
    dims = (0.33, 0.24, 0.14)
    q = PLANNER.kin.ik_nearest(tool_down(-0.2, -1.22, 1.095, 0.0), np.array(HOME_Q))
    pick = PLANNER.plan_pick(q, CartonPose(-0.199, -0.796, 0.58 + 0.07, -0.056, dims), world)
    assert pick.ok, pick.message
    lift_z = PLANNER.kin.fk(pick.q_end)[2, 3]
    assert 0.58 + 2 * dims[2] < lift_z < DECK + 1.1 + PLANNER.params.stack_clearance


def test_a_set_aside_beside_a_tall_stack_clears_only_the_stack_under_its_way():
    """A set-aside on the auxiliary table while a 1.1 m stack stands on the pallet: the cross
    asked the clearance over the stack's top although the way from the pick table never passes
    over the deck, out of reach 1.15 m from the base axis. It now crosses as high as the
    stack under its way asks, and still clears the table's edge."""
    world = _tall_stack_world()
    dims = (0.30, 0.20, 0.12)
    q = PLANNER.kin.ik_nearest(tool_down(-0.2, -1.22, 1.095, 0.0), np.array(HOME_Q))
    pick = PLANNER.plan_pick(q, CartonPose(-0.2, -0.8, 0.58 + 0.06, 0.0, dims), world)
    assert pick.ok, pick.message
    target = CartonPose(-0.37, -0.10, 0.62 + 0.06, 0.0, dims)
    place = PLANNER.plan_place(pick.q_end, target, pick.grasp, world)
    assert place.ok, place.message
    # The cross runs below the least clearance over the stack's top (which the arm does not
    # reach there); the carton is carried down from the lift.
    cross = place.waypoints[[w.name for w in place.waypoints].index('cross')]
    assert cross.z < DECK + 1.1 + dims[2]
    tcp = np.array([PLANNER.kin.fk(qq)[:3, 3] for qq in place.trajectory.q])
    assert tcp[-1] == pytest.approx([-0.37, -0.10, 0.62 + dims[2] + 0.0015 + 0.002], abs=3e-3)


def test_corridor_top_sees_the_stack_near_the_way_only():
    heights = np.zeros((80, 120))
    heights[60:, 100:] = 0.9  # a column near the deck's corner x 1.0-1.2, y 0.2-0.4
    placed = placed_box(0.2, -0.3, DECK + 0.55, 0.0, (0.2, 0.2, 0.3))
    world = CollisionWorld(HeightField(heights), placed=(placed,))
    # Along y = -0.6 (off the deck): the placed box's edge is 0.2 m away.
    assert world.corridor_top(DECK, [(0.0, -0.6), (1.2, -0.6)], 0.1) == DECK
    assert world.corridor_top(DECK, [(0.0, -0.6), (1.2, -0.6)], 0.25) == pytest.approx(DECK + 0.7)
    # A diagonal across the deck passes under the column's corner.
    assert world.corridor_top(DECK, [(0.0, -0.6), (0.6, 0.0), (1.1, 0.3)], 0.05) == (
        pytest.approx(DECK + 0.9)
    )
    with pytest.raises(MotionError, match='empty path'):
        world.corridor_top(DECK, [], 0.1)


def test_a_release_that_drives_wrist_2_into_the_pick_tables_corner_is_seen():
    """Level 15 seed 1's release at (0.076, -0.277, 0.349): the simulated wrist 2 touched the
    pick table's corner and the goal was aborted; the capsules, which kept 10-15 mm from it
    before they held the whole wrist, touch it too."""
    from palletizer.core.motion.kinematics import arm_box_hits

    q = np.array([[-0.9581, -0.8327, 2.1716, -2.9097, -1.5708, 2.1835]])
    lo, hi = np.array([PICK_TABLE.lo]), np.array([PICK_TABLE.hi])
    assert arm_box_hits(q, PLANNER.kin.T_world_base, lo, hi, 0.0)[0] == 0


def test_a_pick_against_the_bulkhead_takes_a_cup_block_that_moves_the_tool_off_the_wall():
    """Level 33 seed 32: a small carton 94 mm from the trailer's bulkhead, its length along
    the wall's normal. The tool body (264 mm along the carton's length) overhangs the wall at
    either turn with the rule's block; another 2 x 3 block over the same lid moves the tool a
    column along it, off the wall, and the pick is planned with that block."""
    from palletizer.core.config import load_config
    from palletizer.core.motion import AABB, plan_grasp
    from palletizer.execution.layout import static_boxes

    world = CollisionWorld(HeightField(np.zeros((80, 120))), static_boxes(load_config(), 'truck'))
    dims = (0.182, 0.167, 0.212)
    carton = CartonPose(-0.006, -1.165, 0.126, 1.56, dims)
    q = np.array(HOME_Q)
    rule = plan_grasp(dims[0], dims[1])
    yaw = PLANNER._choose_yaw(q, PLANNER._tcp(q)[3], carton.yaw, carton.x, carton.y)
    for turn in (yaw, yaw + math.pi, yaw - math.pi):
        refused = PLANNER._pick_at_yaw(q, carton, world, rule, turn)
        assert not refused.ok
    res = PLANNER.plan_pick(q, carton, world)
    assert res.ok, res.message
    assert res.grasp.offset != rule.offset and res.grasp.n_cups == rule.n_cups
    assert res.grasp.capacity >= PLANNER.params.max_carton_kg * 9.81 * 1.5
    seal = PLANNER.kin.fk(res.trajectory.q[-1])
    # The cup block's centre stands over the lid centre; the flange a column off the wall.
    assert seal[1, 3] > carton.y + 0.05
    # With the wall nearer still no block clears it: the rule's refusal is reported.
    wall = AABB((-0.7, -1.40, 0.0), (0.2, -1.12, 1.3), 'wall')
    near = CollisionWorld(HeightField(np.zeros((80, 120))), (wall,))
    res = PLANNER.plan_pick(q, carton, near)
    assert not res.ok and res.cause == 'collision' and res.grasp.offset == rule.offset
