"""MoveIt's view of the cell (nodes/moveit_view.py): the furniture of each source, the stack as it
grows, the held carton, and a new episode that empties both."""

from __future__ import annotations

import math

import pytest
from palletizer.core.config import load_config
from palletizer.core.contracts import PackageSpec, PalletGeometry, PlacementPlan
from palletizer.execution.layout import arm_boxes
from palletizer.nodes.moveit_view import HELD_LINK, CellScene, display_trajectory
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint


def _scene(source: str) -> CellScene:
    cfg = load_config()
    return CellScene(arm_boxes(cfg, source), PalletGeometry.from_config(cfg.cell.pallet))


def _spec(i: int) -> PackageSpec:
    return PackageSpec(f'c{i}', 'std_m', (0.4, 0.3, 0.2), 5.0)


def _plan(x: float, yaw: float) -> PlacementPlan:
    return PlacementPlan((x, 0.1, 0.244), yaw, 1, 's', 1.0, 1.0, {})


@pytest.mark.parametrize(
    ('source', 'names'),
    [
        ('table', {'pick_table'}),
        ('conveyor', {'conveyor'}),
        ('truck', {'truck_far_wall', 'truck_bulkhead'}),
    ],
)
def test_each_source_brings_its_furniture_and_every_box_spans_its_aabb(source, names):
    boxes = {b.name: b for b in arm_boxes(load_config(), source)}
    objs = {o.id: o for o in _scene(source).message(JointState()).world.collision_objects}
    assert names <= set(objs) and {'pedestal', 'pallet'} <= set(objs)
    for name, b in boxes.items():
        o = objs[name]
        p, dims = o.primitive_poses[0].position, o.primitives[0].dimensions
        for k, c in enumerate((p.x, p.y, p.z)):
            assert c - dims[k] / 2 == pytest.approx(b.lo[k]) and c + dims[k] / 2 == pytest.approx(
                b.hi[k]
            )


def test_the_stack_grows_the_held_carton_is_attached_and_a_new_episode_empties_both():
    sc = _scene('table')
    n_fixed = len(sc.message(JointState()).world.collision_objects)
    sc.picked((0.4, 0.3, 0.2))
    att = sc.message(JointState()).robot_state.attached_collision_objects
    assert len(att) == 1 and att[0].link_name == HELD_LINK
    assert list(att[0].object.primitives[0].dimensions) == [0.4, 0.3, 0.2]
    sc.placed(_plan(0.3, math.pi / 2), _spec(0))
    sc.picked((0.4, 0.3, 0.2))
    sc.placed(_plan(0.8, 0.0), _spec(1))
    msg = sc.message(JointState())
    stack = msg.world.collision_objects[n_fixed:]
    assert [o.id for o in stack] == ['carton_0_c0', 'carton_1_c1']
    q = stack[0].primitive_poses[0].orientation
    assert 2 * math.atan2(q.z, q.w) == pytest.approx(math.pi / 2)
    assert msg.robot_state.attached_collision_objects == []
    sc.picked((0.4, 0.3, 0.2))
    sc.dropped()
    assert sc.message(JointState()).robot_state.attached_collision_objects == []
    sc.picked((0.4, 0.3, 0.2))
    sc.reset()
    msg = sc.message(JointState())
    assert len(msg.world.collision_objects) == n_fixed
    assert msg.robot_state.attached_collision_objects == []


def test_a_display_trajectory_carries_the_path_and_its_start():
    traj = JointTrajectory(joint_names=['a', 'b'])
    traj.points = [JointTrajectoryPoint(positions=[0.0, 1.0])]
    start = JointState(name=['a', 'b'], position=[0.0, 1.0])
    d = display_trajectory(traj, start)
    assert d.trajectory[0].joint_trajectory.points[0].positions.tolist() == [0.0, 1.0]
    assert list(d.trajectory_start.joint_state.name) == ['a', 'b']
