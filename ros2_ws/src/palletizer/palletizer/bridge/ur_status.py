"""The UR controller's status as `ur_robot_driver` reports it: robot mode, safety mode, the
External Control program and speed scaling, with the dashboard's commands on them.

ROS-free: the cell bridge serves it under the driver's names (docs/real-cell.md). The modes are
the values of ur_dashboard_msgs' RobotMode and SafetyMode; the answers are the dashboard
server's (Universal Robots, "Dashboard Server e-Series, port 29999").
"""

from __future__ import annotations

from dataclasses import dataclass

from palletizer.core.ur_modes import UNLOCK_AFTER_S, RobotMode, SafetyMode

__all__ = ['PROGRAM', 'UNLOCK_AFTER_S', 'RobotMode', 'SafetyMode', 'UrStatus']

PROGRAM = 'external_control.urp'  # the program the driver's set-up loads on the teach pendant


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
