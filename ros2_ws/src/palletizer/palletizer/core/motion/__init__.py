"""palletizer.core.motion: UR10e kinematics, tool-down Cartesian plans and time parameterisation."""

from __future__ import annotations

from palletizer.core.motion.errors import MotionError
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

__all__ = [
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
