"""palletizer.execution: pick and place over FollowJointTrajectory and SetIO, checked and verified.

ROS-free except `messages` (trajectory_msgs and the Pick / Place / MoveArm result conversion),
which loads on first use so the rest imports without the interfaces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from palletizer.execution.layout import (
    arm_boxes,
    over_carton,
    pick_rise,
    ready_pose,
    static_boxes,
)
from palletizer.execution.park import Parked, ParkPose, park_waypoints, plan_park, plan_unpark
from palletizer.execution.port import SequencerExecutor, motion_outcome, return_request
from palletizer.execution.sequencer import (
    ArmPort,
    ExecResult,
    FollowResult,
    Outcome,
    PickPlaceSequencer,
    arrival_timeline,
    controller_cause,
    cycle_phase,
)
from palletizer.execution.wrench import (
    ForceReading,
    Verdict,
    VerifyParams,
    WrenchMark,
    WrenchWindow,
    verify_hold,
    verify_release,
)

if TYPE_CHECKING:  # loaded on first use by __getattr__ below
    from palletizer.execution.messages import (
        duration_to_s,
        exec_result_from_msg,
        exec_result_to_msg,
        trajectory_from_msg,
        trajectory_to_msg,
    )

__all__ = [
    'ArmPort',
    'ExecResult',
    'FollowResult',
    'ForceReading',
    'Outcome',
    'ParkPose',
    'Parked',
    'PickPlaceSequencer',
    'SequencerExecutor',
    'Verdict',
    'VerifyParams',
    'WrenchMark',
    'WrenchWindow',
    'controller_cause',
    'duration_to_s',
    'exec_result_from_msg',
    'exec_result_to_msg',
    'motion_outcome',
    'park_waypoints',
    'arrival_timeline',
    'cycle_phase',
    'plan_park',
    'plan_unpark',
    'over_carton',
    'ready_pose',
    'return_request',
    'static_boxes',
    'arm_boxes',
    'pick_rise',
    'trajectory_from_msg',
    'trajectory_to_msg',
    'verify_hold',
    'verify_release',
]

_LAZY = {
    'duration_to_s',
    'exec_result_from_msg',
    'exec_result_to_msg',
    'trajectory_from_msg',
    'trajectory_to_msg',
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from palletizer.execution import messages

        return getattr(messages, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
