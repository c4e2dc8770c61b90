"""palletizer.core.motion: UR10e kinematics, tool-down Cartesian plans and time parameterisation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from palletizer.core.motion.collision import (
    AABB,
    CarriedLoad,
    CollisionWorld,
    HeightField,
    placed_box,
)
from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.grasp import (
    Grasp,
    GripperGeometry,
    block_offsets,
    grasp_alternatives,
    plan_grasp,
    tool_to_world_xy,
)
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
    'placed_box',
    'block_offsets',
    'grasp_alternatives',
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

_LAZY = {'AnalyticReach', 'ReachParams', 'ReachTable', 'build_reach_table'}

if TYPE_CHECKING:  # what __getattr__ returns, for the type checker
    from palletizer.core.motion.reach import (
        AnalyticReach,
        ReachParams,
        ReachTable,
        build_reach_table,
    )


def __getattr__(name: str) -> object:
    # reach.py doubles as `python -m palletizer.core.motion.reach`; importing it eagerly here
    # would make runpy warn that the module was imported before it ran as __main__.
    if name in _LAZY:
        from palletizer.core.motion import reach

        return getattr(reach, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
