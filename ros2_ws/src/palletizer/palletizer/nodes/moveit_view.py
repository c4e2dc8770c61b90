"""MoveIt's view of the cell, as the trajectory executor sees it, in moveit_msgs types.

- `/monitored_planning_scene` (moveit_msgs/PlanningScene, latched, a full scene each time, not a
  diff): the furniture the executor's moves clear (execution/layout.py `arm_boxes`: pedestal,
  auxiliary table, pick table or conveyor, trailer walls), the pallet, the stack (each carton
  this executor placed, at its planned pose with the weighed size: what the planner believes, not
  the referee's truth) as collision boxes in `world`, and the held carton attached to `tcp`;
  the arm's joint state as robot_state.
- `/display_planned_path` (moveit_msgs/DisplayTrajectory): each trajectory the executor sends to
  the controller, with the joint state it starts from.

So a MoveIt instance, or RViz's MotionPlanning and Trajectory displays on a ROS machine, see what
the planner and the executor see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from geometry_msgs.msg import Pose
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    DisplayTrajectory,
    PlanningScene,
    RobotState,
    RobotTrajectory,
)
from sensor_msgs.msg import JointState
from shape_msgs.msg import SolidPrimitive
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg

from palletizer.core.contracts import PackageSpec, PalletGeometry, PlacementPlan
from palletizer.core.motion import AABB

__all__ = ['HELD_ID', 'HELD_LINK', 'MODEL', 'CellScene', 'display_trajectory']

MODEL = 'ur10e_palletizer'  # the <robot name> of /robot_description (core/description.py)
FRAME = 'world'
HELD_LINK = 'tcp'  # the cups' plane: a held carton hangs along tcp z
HELD_ID = 'held'
# The links a held carton touches by design: the cups sit on its lid.
_TOUCH = ('tcp', 'gripper', 'tool0', 'flange', 'wrist_3_link')


@dataclass(frozen=True)
class _Box:
    id: str
    centre: tuple[float, float, float]
    yaw: float
    dims: tuple[float, float, float]


def _pose(centre: Sequence[float], yaw: float) -> Pose:
    p = Pose()
    p.position.x, p.position.y, p.position.z = (float(v) for v in centre)
    p.orientation.z, p.orientation.w = math.sin(yaw / 2), math.cos(yaw / 2)
    return p


def _object(box: _Box, frame: str) -> CollisionObject:
    o = CollisionObject(id=box.id, operation=CollisionObject.ADD)
    o.header.frame_id = frame
    o.pose.orientation.w = 1.0
    o.primitives = [SolidPrimitive(type=SolidPrimitive.BOX, dimensions=list(box.dims))]
    o.primitive_poses = [_pose(box.centre, box.yaw)]
    return o


class CellScene:
    """The planning scene of one episode: fixed furniture and pallet, the stack as it grows, the
    carton in the gripper. A new episode (`reset`) empties the stack and the gripper."""

    def __init__(self, furniture: Sequence[AABB], pallet: PalletGeometry) -> None:
        fixed = [
            _Box(
                b.name,
                tuple((lo + hi) / 2 for lo, hi in zip(b.lo, b.hi, strict=True)),  # type: ignore[arg-type]
                0.0,
                tuple(hi - lo for lo, hi in zip(b.lo, b.hi, strict=True)),  # type: ignore[arg-type]
            )
            for b in furniture
        ]
        (cx, cy), (sx, sy) = pallet.centre_xy, pallet.size_xy
        # From the floor to the deck top, as viz_markers draws it.
        fixed.append(_Box('pallet', (cx, cy, pallet.deck_z / 2), 0.0, (sx, sy, pallet.deck_z)))
        self.fixed = tuple(fixed)
        self.stack: list[_Box] = []
        self.held: tuple[float, float, float] | None = None  # (L, W, H) [m]

    def reset(self) -> None:
        self.stack.clear()
        self.held = None

    def picked(self, dims: Sequence[float]) -> None:
        """The carton is in the gripper: its size as the pick saw it [m]."""
        L, W, H = (float(v) for v in dims)
        self.held = (L, W, H)

    def placed(self, plan: PlacementPlan, spec: PackageSpec) -> None:
        """The held carton was released at its planned pose (world, centre)."""
        dims = tuple(float(v) for v in spec.dims_m)
        name = f'carton_{len(self.stack)}_{spec.package_id}'
        self.stack.append(_Box(name, tuple(plan.position), float(plan.yaw), dims))  # type: ignore[arg-type]
        self.held = None

    def dropped(self) -> None:
        """The gripper holds nothing any more (a failed pick or a lost carton)."""
        self.held = None

    def message(self, joints: JointState) -> PlanningScene:
        """The whole scene (is_diff false), with the arm at `joints`."""
        scene = PlanningScene(name='palletizer', robot_model_name=MODEL, is_diff=False)
        scene.robot_state = RobotState(joint_state=joints, is_diff=False)
        scene.world.collision_objects = [_object(b, FRAME) for b in (*self.fixed, *self.stack)]
        if self.held is not None:
            L, W, H = self.held
            obj = _object(_Box(HELD_ID, (0.0, 0.0, H / 2), 0.0, (L, W, H)), HELD_LINK)
            scene.robot_state.attached_collision_objects = [
                AttachedCollisionObject(link_name=HELD_LINK, object=obj, touch_links=list(_TOUCH))
            ]
        return scene


def display_trajectory(traj: JointTrajectoryMsg, start: JointState) -> DisplayTrajectory:
    """One planned move for RViz's Trajectory display: the trajectory sent to the controller and
    the joint state it starts from."""
    return DisplayTrajectory(
        model_id=MODEL,
        trajectory=[RobotTrajectory(joint_trajectory=traj)],
        trajectory_start=RobotState(joint_state=start, is_diff=False),
    )
