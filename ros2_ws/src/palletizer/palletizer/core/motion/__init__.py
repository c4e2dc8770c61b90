"""palletizer.core.motion: UR10e kinematics, tool-down Cartesian plans and time parameterisation."""

from __future__ import annotations

from palletizer.core.motion.collision import AABB, CarriedLoad, CollisionWorld, HeightField
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.grasp import Grasp, GripperGeometry, plan_grasp, tool_to_world_xy
from palletizer.core.motion.kinematics import (
    DH,
    HOME_Q,
    Frame,
    JointLimits,
    UR10eKinematics,
    branch_family,
    fk_dh,
    ik_batch,
    tool_down,
    tool_down_batch,
    yaw_of,
)
from palletizer.core.motion.params import MotionParams
from palletizer.core.motion.planner import CartonPose, MotionPlanner, MotionResult, Waypoint
from palletizer.core.motion.reach import AnalyticReach, ReachParams, ReachTable, build_reach_table
from palletizer.core.motion.timing import JointTrajectory

__all__ = [
    'AABB',
    'AnalyticReach',
    'ReachParams',
    'ReachTable',
    'build_reach_table',
    'CarriedLoad',
    'CartonPose',
    'CollisionWorld',
    'Grasp',
    'GripperGeometry',
    'HeightField',
    'JointTrajectory',
    'MotionParams',
    'MotionPlanner',
    'MotionResult',
    'Waypoint',
    'plan_grasp',
    'tool_to_world_xy',
    'DH',
    'HOME_Q',
    'Frame',
    'JointLimits',
    'MotionError',
    'UR10eKinematics',
    'branch_family',
    'fk_dh',
    'ik_batch',
    'tool_down',
    'tool_down_batch',
    'yaw_of',
]
