"""What `ur_robot_driver` offers beside the trajectory action, for the simulated cell to serve:
the io_and_status_controller's status topics, I/O states and triggers, the speed scaling
broadcaster and the dashboard client's services, under the driver's names and types
(docs/real-cell.md).

The state behind them (modes, program, speed scaling) is the cell bridge's; this module turns it
into messages and turns the dashboard's requests into calls on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from ur_dashboard_msgs.msg import ProgramState, RobotMode, SafetyMode
from ur_dashboard_msgs.srv import GetProgramState, GetRobotMode, GetSafetyMode, IsProgramRunning
from ur_msgs.msg import Analog, Digital, IOStates, ToolDataMsg

from palletizer.core import ur_modes
from palletizer.nodes.qos import LATCHED

__all__ = ['DASHBOARD', 'IO_AND_STATUS', 'SPEED_SCALING', 'ControllerStatus', 'UrDriverInterfaces']

IO_AND_STATUS = '/io_and_status_controller'
DASHBOARD = '/dashboard_client'
SPEED_SCALING = '/speed_scaling_state_broadcaster/speed_scaling'
N_DIGITAL = 18  # standard 0-7, configurable 8-15, tool 16-17 (the driver's gpio_controller)


class ControllerStatus(Protocol):
    """What the driver's interfaces read of the controller's state and ask of it (the cell
    bridge's palletizer.bridge.ur_status.UrStatus)."""

    robot_mode: ur_modes.RobotMode
    safety_mode: ur_modes.SafetyMode
    program_running: bool
    speed_scaling: float  # [0, 1]
    program: str

    def unlock_protective_stop(self, now: float) -> tuple[bool, str]: ...

    def play(self) -> tuple[bool, str]: ...

    def stop(self) -> tuple[bool, str]: ...

    def program_state(self) -> str: ...


class UrDriverInterfaces:
    """Publishers and services of the driver on `node`.

    status: the controller's state (ControllerStatus); now: sim time [s];
    zero_ft: zeroes the F/T sensor; outputs: the digital outputs that are on; inputs: the
    digital inputs that are on; vacuum_v: the tool analog input 2 [V] (the vacuum level);
    on_change: called after a dashboard or trigger request changed the state.
    """

    def __init__(
        self,
        node: Node,
        status: ControllerStatus,
        now: Callable[[], float],
        zero_ft: Callable[[], None],
        outputs: Callable[[], set[int]],
        inputs: Callable[[], set[int]],
        vacuum_v: Callable[[], float],
        callback_group: CallbackGroup | None = None,
    ) -> None:
        self.status, self.now = status, now
        self.outputs, self.inputs, self.vacuum_v = outputs, inputs, vacuum_v
        self._zero_ft = zero_ft
        pub = node.create_publisher
        self.robot_mode_pub = pub(RobotMode, f'{IO_AND_STATUS}/robot_mode', LATCHED)
        self.safety_mode_pub = pub(SafetyMode, f'{IO_AND_STATUS}/safety_mode', LATCHED)
        self.running_pub = pub(Bool, f'{IO_AND_STATUS}/robot_program_running', LATCHED)
        self.io_pub = pub(IOStates, f'{IO_AND_STATUS}/io_states', 10)
        self.tool_pub = pub(ToolDataMsg, f'{IO_AND_STATUS}/tool_data', 10)
        self.scaling_pub = pub(Float64, SPEED_SCALING, 10)
        self._last: tuple[int, int, bool] | None = None

        def srv(kind: type, name: str, cb: Callable[[Any, Any], Any]) -> None:
            node.create_service(kind, name, cb, callback_group=callback_group)

        srv(Trigger, f'{IO_AND_STATUS}/zero_ftsensor', self.on_zero_ftsensor)
        srv(Trigger, f'{IO_AND_STATUS}/resend_robot_program', self.on_play)
        srv(GetRobotMode, f'{DASHBOARD}/get_robot_mode', self.on_robot_mode)
        srv(GetSafetyMode, f'{DASHBOARD}/get_safety_mode', self.on_safety_mode)
        srv(IsProgramRunning, f'{DASHBOARD}/program_running', self.on_program_running)
        srv(GetProgramState, f'{DASHBOARD}/program_state', self.on_program_state)
        srv(Trigger, f'{DASHBOARD}/play', self.on_play)
        srv(Trigger, f'{DASHBOARD}/stop', self.on_stop)
        srv(Trigger, f'{DASHBOARD}/unlock_protective_stop', self.on_unlock)
        self.publish_status()

    # Streams ---------------------------------------------------------------------------------
    def publish_status(self) -> None:
        """Robot mode, safety mode and the program's state, latched, when one changed (as the
        driver does)."""
        s = self.status
        now = (int(s.robot_mode), int(s.safety_mode), bool(s.program_running))
        if now == self._last:
            return
        self._last = now
        self.robot_mode_pub.publish(RobotMode(mode=now[0]))
        self.safety_mode_pub.publish(SafetyMode(mode=now[1]))
        self.running_pub.publish(Bool(data=now[2]))

    def publish_io(self) -> None:
        """I/O states, tool data and speed scaling, at the cell's stream rate."""
        outs, ins = self.outputs(), self.inputs()
        msg = IOStates()
        msg.digital_out_states = [Digital(pin=i, state=i in outs) for i in range(N_DIGITAL)]
        msg.digital_in_states = [Digital(pin=i, state=i in ins) for i in range(N_DIGITAL)]
        msg.analog_in_states = [Analog(pin=i, domain=1, state=0.0) for i in range(2)]
        msg.analog_out_states = [Analog(pin=i, domain=1, state=0.0) for i in range(2)]
        self.io_pub.publish(msg)
        # The tool connector's analog input 2 in voltage mode (ToolDataMsg: range 0 = volts).
        self.tool_pub.publish(
            ToolDataMsg(analog_input_range2=0, analog_input2=float(self.vacuum_v()), tool_mode=0)
        )
        self.scaling_pub.publish(Float64(data=100.0 * float(self.status.speed_scaling)))

    # Services --------------------------------------------------------------------------------
    def _answer(self, res: Trigger.Response, ok_answer: tuple[bool, str]) -> Trigger.Response:
        res.success, text = ok_answer
        if hasattr(res, 'message'):
            res.message = text
        else:
            res.answer = text
        self.publish_status()
        return res

    def on_zero_ftsensor(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        self._zero_ft()
        res.success, res.message = True, 'zeroed the force/torque sensor'
        return res

    def on_play(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        return self._answer(res, self.status.play())

    def on_stop(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        return self._answer(res, self.status.stop())

    def on_unlock(self, _req: Trigger.Request, res: Trigger.Response) -> Trigger.Response:
        return self._answer(res, self.status.unlock_protective_stop(self.now()))

    def on_robot_mode(
        self, _req: GetRobotMode.Request, res: GetRobotMode.Response
    ) -> GetRobotMode.Response:
        res.robot_mode.mode = int(self.status.robot_mode)
        res.answer, res.success = f'Robotmode: {self.status.robot_mode.name}', True
        return res

    def on_safety_mode(
        self, _req: GetSafetyMode.Request, res: GetSafetyMode.Response
    ) -> GetSafetyMode.Response:
        res.safety_mode.mode = int(self.status.safety_mode)
        res.answer, res.success = f'Safetymode: {self.status.safety_mode.name}', True
        return res

    def on_program_running(
        self, _req: IsProgramRunning.Request, res: IsProgramRunning.Response
    ) -> IsProgramRunning.Response:
        res.program_running = bool(self.status.program_running)
        res.answer = f'Program running: {str(res.program_running).lower()}'
        res.success = True
        return res

    def on_program_state(
        self, _req: GetProgramState.Request, res: GetProgramState.Response
    ) -> GetProgramState.Response:
        state = self.status.program_state()
        res.state = ProgramState(state=state)
        res.program_name = self.status.program
        res.answer, res.success = f'{state} {res.program_name}', True
        return res
