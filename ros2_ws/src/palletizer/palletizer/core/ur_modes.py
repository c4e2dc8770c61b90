"""A UR controller's robot and safety modes, as ur_dashboard_msgs numbers them.

ROS-free, for both sides of the driver's interfaces: the emulated controller
(bridge/ur_status.py) and the palletizer that reads them back (execution/recovery.py).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ['UNLOCK_AFTER_S', 'RobotMode', 'SafetyMode']

# The controller refuses to unlock a protective stop within 5 s of it (the dashboard's answer
# says so): the operator is to look at what caused it first.
UNLOCK_AFTER_S = 5.0


class RobotMode(IntEnum):
    """ur_dashboard_msgs/RobotMode."""

    NO_CONTROLLER = -1
    DISCONNECTED = 0
    CONFIRM_SAFETY = 1
    BOOTING = 2
    POWER_OFF = 3
    POWER_ON = 4
    IDLE = 5
    BACKDRIVE = 6
    RUNNING = 7
    UPDATING_FIRMWARE = 8


class SafetyMode(IntEnum):
    """ur_dashboard_msgs/SafetyMode."""

    NORMAL = 1
    REDUCED = 2
    PROTECTIVE_STOP = 3
    RECOVERY = 4
    SAFEGUARD_STOP = 5
    SYSTEM_EMERGENCY_STOP = 6
    ROBOT_EMERGENCY_STOP = 7
    VIOLATION = 8
    FAULT = 9
    VALIDATE_JOINT_ID = 10
    UNDEFINED_SAFETY_MODE = 11
    AUTOMATIC_MODE_SAFEGUARD_STOP = 12
    SYSTEM_THREE_POSITION_ENABLING_STOP = 13
