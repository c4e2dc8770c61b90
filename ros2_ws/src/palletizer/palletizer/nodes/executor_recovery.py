"""The UR dashboard as the trajectory executor uses it: what stopped a goal, and the way back.

After a goal the controller ended on its own, the arm (nodes/executor_arm.py) reads the
controller's modes and the program's state here and, where a real cell would, unlocks the
protective stop and plays the program again (execution/recovery.py says which).
"""

from __future__ import annotations

import time
from typing import Any

from rclpy.callback_groups import CallbackGroup
from rclpy.client import Client
from rclpy.node import Node
from std_srvs.srv import Trigger
from ur_dashboard_msgs.srv import GetRobotMode, GetSafetyMode, IsProgramRunning

from palletizer.core.ur_modes import UNLOCK_AFTER_S
from palletizer.execution.recovery import ControllerState, Recovery
from palletizer.nodes.executor_arm import JointFeed, wait_future

__all__ = ['DASHBOARD', 'DashboardClient']

# The UR driver's dashboard client (ur_robot_driver's dashboard_client node).
DASHBOARD = '/dashboard_client'


class DashboardClient:
    """The dashboard client's services on `node`: the controller's state and the recovery.

    feed: the joint states, whose stamps are the controller's time (the unlock waits on it).
    """

    def __init__(
        self, node: Node, feed: JointFeed, server_timeout: float, callback_group: CallbackGroup
    ) -> None:
        self.node = node
        self.feed = feed
        self.server_timeout = server_timeout
        self.dash = {
            key: node.create_client(kind, f'{DASHBOARD}/{name}', callback_group=callback_group)
            for key, kind, name in (
                ('robot_mode', GetRobotMode, 'get_robot_mode'),
                ('safety_mode', GetSafetyMode, 'get_safety_mode'),
                ('program_running', IsProgramRunning, 'program_running'),
                ('unlock', Trigger, 'unlock_protective_stop'),
                ('play', Trigger, 'play'),
            )
        }

    def _call(self, client: Client, request: Any, what: str) -> Any:
        """A dashboard call's response, or None (logged) when there is no answer."""
        log = self.node.get_logger()
        if not client.wait_for_service(timeout_sec=self.server_timeout):
            log.error(f'no {what} service {client.srv_name}')
            return None
        res = wait_future(client.call_async(request), self.server_timeout)
        if res is None:
            log.error(f'{client.srv_name}: no answer in {self.server_timeout} s')
        return res

    def state(self) -> ControllerState | None:
        """The controller's modes and the program's state from the dashboard, or None."""
        robot = self._call(self.dash['robot_mode'], GetRobotMode.Request(), 'dashboard')
        safety = self._call(self.dash['safety_mode'], GetSafetyMode.Request(), 'dashboard')
        running = self._call(self.dash['program_running'], IsProgramRunning.Request(), 'dashboard')
        if robot is None or safety is None or running is None:
            return None
        return ControllerState(
            int(robot.robot_mode.mode), int(safety.safety_mode.mode), bool(running.program_running)
        )

    def recover(self, how: Recovery) -> str:
        """Unlock the protective stop (UNLOCK), then play the program; '' or what failed."""
        log = self.node.get_logger()
        if how is Recovery.UNLOCK:
            # The controller refuses an unlock within UNLOCK_AFTER_S of the stop (of its time:
            # the joint states' stamps); asked again until it agrees or the wait runs out.
            since = self.feed.newest()
            end = time.monotonic() + self.server_timeout + 4.0 * UNLOCK_AFTER_S
            while True:
                waited = self.feed.newest() - since
                if waited >= UNLOCK_AFTER_S:
                    res = self._call(self.dash['unlock'], Trigger.Request(), 'dashboard')
                    if res is None:
                        return 'no answer to unlock_protective_stop'
                    if res.success:
                        log.info(f'unlock_protective_stop: {res.message}')
                        break
                    answer = res.message
                else:
                    answer = f'{waited:.1f} s of {UNLOCK_AFTER_S:.0f} s waited'
                if time.monotonic() >= end:
                    return f'the protective stop could not be unlocked: {answer}'
                time.sleep(0.2)
        res = self._call(self.dash['play'], Trigger.Request(), 'dashboard')
        if res is None or not res.success:
            return f'play refused: {res.message if res is not None else "no answer"}'
        log.info(f'play: {res.message}')
        state = self.state()
        if state is None or state.recovery() is not Recovery.NONE:
            return f'after play: {state.describe() if state is not None else "no state"}'
        return ''
