"""The UR controller's status as `ur_robot_driver` reports it: robot mode, safety mode, the
External Control program and speed scaling, with the dashboard's commands on them.

ROS-free: the cell bridge serves it under the driver's names (docs/real-cell.md). The modes are
the values of ur_dashboard_msgs' RobotMode and SafetyMode; the answers are the dashboard
server's (Universal Robots, "Dashboard Server e-Series, port 29999").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ['PROGRAM', 'UNLOCK_AFTER_S', 'RobotMode', 'SafetyMode', 'UrStatus']

PROGRAM = 'external_control.urp'  # the program the driver's set-up loads on the teach pendant
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


@dataclass
class UrStatus:
    """A powered, running UR10e with External Control playing, at full speed."""

    robot_mode: RobotMode = RobotMode.RUNNING
    safety_mode: SafetyMode = SafetyMode.NORMAL
    program_running: bool = True
    speed_scaling: float = 1.0  # [0, 1]: the speed slider times the controller's own scaling
    stopped_at: float | None = None  # [s] sim time of the last protective stop
    program: str = PROGRAM

    def motion_refused(self) -> str:
        """Why a trajectory goal cannot run now, naming the state; '' when it can."""
        if self.safety_mode != SafetyMode.NORMAL:
            return f'safety mode is {self.safety_mode.name}'
        if self.robot_mode != RobotMode.RUNNING:
            return f'robot mode is {self.robot_mode.name}'
        if not self.program_running:
            return 'the External Control program is not running'
        return ''

    def protective_stop(self, now: float) -> None:
        """The arm struck something: the controller stops it, and the program with it."""
        self.safety_mode = SafetyMode.PROTECTIVE_STOP
        self.program_running = False
        self.stopped_at = now

    def unlock_protective_stop(self, now: float) -> tuple[bool, str]:
        if self.safety_mode != SafetyMode.PROTECTIVE_STOP:
            return False, 'Robot is not in protective stop'
        if self.stopped_at is not None and now - self.stopped_at < UNLOCK_AFTER_S:
            return False, (
                'Cannot unlock protective stop until 5s after occurrence. Always inspect cause '
                'of protective stop before unlocking'
            )
        self.safety_mode = SafetyMode.NORMAL
        return True, 'Protective stop releasing'

    def play(self) -> tuple[bool, str]:
        if self.safety_mode != SafetyMode.NORMAL or self.robot_mode != RobotMode.RUNNING:
            return False, 'Failed to execute: play'
        self.program_running = True
        return True, 'Starting program'

    def stop(self) -> tuple[bool, str]:
        self.program_running = False
        return True, 'Stopped'

    def program_state(self) -> str:
        """ur_dashboard_msgs/ProgramState's state."""
        return 'PLAYING' if self.program_running else 'STOPPED'
