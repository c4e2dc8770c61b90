"""Tests of the joint-space transit (core/motion/joint_transit.py): the tool stays down, the
vertical legs stay vertical, it is faster, and a cross it cannot make falls back to Cartesian."""

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
)
from palletizer.core.motion.check import ArmModel
from palletizer.core.motion.joint_transit import joint_transit_path, transit_span
from palletizer.core.motion.path import Waypoint, legs_through

DECK = 0.144
PICK_TABLE = AABB((-0.56, -1.14, 0.0), (0.16, -0.46, 0.58), 'pick_table')
PEDESTAL = AABB((0.36, -0.96, 0.0), (0.84, -0.48, 0.48), 'pedestal')
CARTESIAN = MotionPlanner()
JOINT = MotionPlanner(params=MotionParams(transit='joint'))


def _world(extra: tuple[AABB, ...] = ()) -> CollisionWorld:
    return CollisionWorld(HeightField(np.zeros((80, 120))), (PICK_TABLE, PEDESTAL, *extra))


def _cycle(planner: MotionPlanner, world: CollisionWorld | None = None):
    """A pick on the table, a place at the far pallet corner, the move back over the table."""
    world = world or _world()
    dims = (0.40, 0.30, 0.25)
    carton = CartonPose(-0.20, -0.80, 0.58 + dims[2] / 2, 0.3, dims)
    pick = planner.plan_pick(np.array(HOME_Q), carton, world, mass=5.0)
    assert pick.ok, pick.message
    target = CartonPose(1.0, 0.25, DECK + dims[2] / 2, math.pi / 2, dims)
    place = planner.plan_place(pick.q_end, target, pick.grasp, world)
    back = planner.plan_hover(place.q_end, -0.20, -1.22, 1.06, world, 0.3) if place.ok else None
    return pick, place, back


@pytest.fixture(scope='module')
def cycles():
    return _cycle(CARTESIAN), _cycle(JOINT)


def _tcp(planner: MotionPlanner, q: np.ndarray) -> np.ndarray:
    return np.array([planner.kin.fk(qi) for qi in q])


def test_the_joint_transit_keeps_the_tool_pointing_down_throughout(cycles):
    _, (pick, place, back) = cycles
    for traj in (pick.trajectory, place.trajectory, back.trajectory):
        T = _tcp(JOINT, traj.q[::5])
        assert float(np.max(T[:, 2, 2])) < -math.cos(2e-3)


def test_the_joint_transit_is_faster_than_the_cartesian_one(cycles):
    (_, c_place, c_back), (_, j_place, j_back) = cycles
    # Measured: place 3.17 -> 2.86 s, back 2.34 -> 2.02 s (the carried carton's 1.5 m/s cap
    # binds on the longer curve round the base; the empty arm's wrist 3 turns 0.6 rad not 3.8).
    assert j_place.trajectory.duration < 0.95 * c_place.trajectory.duration
    assert j_back.trajectory.duration < 0.9 * c_back.trajectory.duration


def test_a_joint_transit_turns_the_tool_with_the_pan_and_wrist_3_hardly_moves(cycles):
    (_, c_place, _), (_, j_place, _) = cycles
    turn = lambda r: abs(float(r.trajectory.q[-1, 5] - r.trajectory.q[0, 5]))  # noqa: E731
    assert turn(j_place) < 0.5 < turn(c_place)


def test_the_cross_leaves_the_straight_line_of_the_cartesian_one(cycles):
    """It is not the Cartesian path timed again: mid-cross the TCP stands well off that line."""
    (_, c_place, _), (_, j_place, _) = cycles
    mid = len(j_place.trajectory.q) // 2
    p = _tcp(JOINT, j_place.trajectory.q[mid : mid + 1])[0, :3, 3]
    line = _tcp(CARTESIAN, c_place.trajectory.q[::10])[:, :3, 3]
    assert float(np.min(np.linalg.norm(line - p, axis=1))) > 0.05


def test_the_place_ends_at_the_release_and_its_final_descent_stays_vertical(cycles):
    (_, c_place, _), (_, j_place, _) = cycles
    T = _tcp(JOINT, j_place.trajectory.q)
    end = T[-1, :3, 3]
    np.testing.assert_allclose(
        end, _tcp(CARTESIAN, c_place.trajectory.q[-1:])[0, :3, 3], atol=1e-4
    )
    # The last place_clearance less the corner's rounding runs straight down onto the release.
    low = T[:, 2, 3] < end[2] + JOINT.params.place_clearance - JOINT.params.blend_radius
    tail = np.flatnonzero(low)
    assert len(tail) > 10 and np.all(np.diff(tail) == 1)
    assert float(np.max(np.linalg.norm(T[tail, :2, 3] - end[:2], axis=1))) < 1e-3


def test_the_pick_approach_descends_vertically_onto_the_lid(cycles):
    (c_pick, _, _), (j_pick, _, _) = cycles
    np.testing.assert_allclose(j_pick.trajectory.q[-1], c_pick.trajectory.q[-1], atol=1e-6)
    T = _tcp(JOINT, j_pick.trajectory.q)
    end = T[-1, :3, 3]
    low = T[:, 2, 3] < end[2] + JOINT.params.place_clearance - JOINT.params.blend_radius
    assert float(np.max(np.linalg.norm(T[low, :2, 3] - end[:2], axis=1))) < 1e-3


def _off_line(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """For each TCP point of a (n, 3), its horizontal distance from the nearest point of b."""
    return np.array([np.min(np.linalg.norm(b[:, :2] - p[:2], axis=1)) for p in a])


def test_a_cross_the_joint_line_cannot_make_falls_back_to_the_cartesian_one(cycles):
    """A pillar where the joint-space cross strays farthest from the Cartesian line (0.47 m
    off it): the planner keeps the Cartesian cross, which clears it."""
    (_, c_place, _), (_, j_place, _) = cycles
    line = _tcp(CARTESIAN, c_place.trajectory.q)[:, :3, 3]
    curve = _tcp(JOINT, j_place.trajectory.q)[:, :3, 3]
    p = curve[int(np.argmax(_off_line(curve, line)))]
    pillar = AABB((p[0] - 0.02, p[1] - 0.02, 0.0), (p[0] + 0.02, p[1] + 0.02, 2.5), 'pillar')
    res = JOINT.plan_place(j_place.trajectory.q[0], *_place_args(_world((pillar,))))
    assert res.ok, res.message
    path = _tcp(JOINT, res.trajectory.q)[:, :3, 3]
    assert float(np.max(_off_line(path, line))) < 0.02
    assert float(np.max(_off_line(curve, line))) > 0.4


def _place_args(world: CollisionWorld):
    dims = (0.40, 0.30, 0.25)
    carton = CartonPose(-0.20, -0.80, 0.58 + dims[2] / 2, 0.3, dims)
    pick = CARTESIAN.plan_pick(np.array(HOME_Q), carton, _world(), mass=5.0)
    target = CartonPose(1.0, 0.25, DECK + dims[2] / 2, math.pi / 2, dims)
    return target, pick.grasp, world


def test_transit_span_takes_only_a_cross_between_vertical_legs():
    p = MotionParams()
    start = (0.0, -0.8, 0.9, 0.0)
    plan = [
        Waypoint(0.0, -0.8, 1.1, 0.0, None, 'rise'),
        Waypoint(0.8, 0.0, 1.1, 0.5, None, 'cross'),
        Waypoint(0.8, 0.0, 0.6, 0.5, 0.5, 'release'),
    ]
    assert transit_span(legs_through(start, plan, 0, p)) == (1, 2)
    slanted = [*plan[:2], Waypoint(0.9, 0.0, 0.6, 0.5, 0.5, 'release')]
    assert transit_span(legs_through(start, slanted, 0, p)) is None
    assert transit_span(legs_through(start, plan[:1], 0, p)) is None


def test_without_rounding_there_is_no_joint_transit():
    p = dataclasses.replace(MotionParams(), blend_radius=0.0, transit='joint')
    planner = MotionPlanner(params=p)
    q0 = np.array(HOME_Q)
    x, y, z, yaw = planner._tcp(q0)
    legs = legs_through(
        (x, y, z, yaw),
        [
            Waypoint(x, y, z + 0.1, yaw, None, 'rise'),
            Waypoint(x + 0.3, y, z + 0.1, yaw, None, 'cross'),
        ],
        0,
        p,
    )
    assert joint_transit_path(q0, legs, ArmModel.of(planner.kin), p, 3.0) is None


def test_an_unknown_transit_is_refused_naming_the_choices():
    with pytest.raises(MotionError, match="transit = 'curvy'; expected one of cartesian, joint"):
        MotionParams(transit='curvy')


def test_a_plan_refused_at_the_wrist_sparing_yaw_is_planned_again_at_the_least_world_turn():
    """Graph run, level 21 seed 1: the move back, at the yaw that spared wrist 3, found no IK
    on the Cartesian cross it is checked against first; the Cartesian transit's yaw passes."""

    class Picky(MotionPlanner):
        yaws: list[tuple[bool, float]] = []

        def _choose_yaw(self, *a, **k):
            yaw = super()._choose_yaw(*a, **k)
            self.yaws.append((self._world_yaw, yaw))
            return yaw

        def _hover(self, q0, start, goal, safe_z, world, fit):
            if not self._world_yaw:
                return dataclasses.replace(CARTESIAN.plan_hover(q0, 9.0, 0.0, 1.0), ok=False)
            return super()._hover(q0, start, goal, safe_z, world, fit)

    joint = Picky(params=MotionParams(transit='joint'))
    q0 = np.array(HOME_Q)
    res = joint.plan_hover(q0, -0.20, -1.22, 1.06, _world(), 2.5)
    assert res.ok and not joint._world_yaw
    assert [w for w, _ in joint.yaws] == [False, True]
    assert joint.yaws[0][1] != joint.yaws[1][1]  # the two choices differ here
    cart = Picky(params=MotionParams())
    assert not cart.plan_hover(q0, -0.20, -1.22, 1.06, _world(), 2.5).ok  # no second try
