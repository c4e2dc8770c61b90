"""ROS-free logic of the cell bridge: FollowJointTrajectory execution, frames and records."""

from __future__ import annotations

from palletizer.bridge.fjt import (
    FjtDefaults,
    FjtOutcome,
    FjtRunner,
    FjtStatus,
    PreparedGoal,
    Tick,
)
from palletizer.bridge.frames import (
    TRUTH_PREFIX,
    CartonRecord,
    FramePose,
    camera_frames,
    camera_matrices,
    carton_records,
    cell_frames,
)
from palletizer.bridge.stream import KINEMATICS_EVERY, StepStream, steps_per_sample

__all__ = [
    'KINEMATICS_EVERY',
    'TRUTH_PREFIX',
    'CartonRecord',
    'FjtDefaults',
    'FjtOutcome',
    'FjtRunner',
    'FjtStatus',
    'FramePose',
    'PreparedGoal',
    'StepStream',
    'Tick',
    'camera_frames',
    'camera_matrices',
    'carton_records',
    'cell_frames',
    'steps_per_sample',
]
