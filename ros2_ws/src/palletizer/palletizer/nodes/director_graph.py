"""What the episode director reads of the rest of the graph before its episodes run.

The other nodes' parameters (what each reports it runs: the oracle flag follows from them) and,
with robot:=ur, whether the UR driver's trajectory action is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rcl_interfaces.srv import GetParameters
from rclpy.client import Client
from rclpy.node import Node

from palletizer.nodes.calls import Calls
from palletizer.nodes.director_params import DirectorParams

__all__ = ['DRIVER_WAIT_S', 'GraphLookups']

# [s] how long robot:=ur waits for the driver's trajectory action once the director is up.
# The driver is started first, and discovery on one host takes well under a second. The
# director itself takes ~3.5 s to come up (measured under ros2 launch: the line came 14.3 s
# after the launch with a 10 s wait, 10.0 s with 6 s), so 5 s names a missing driver within
# 10 s of the launch on an unloaded machine.
DRIVER_WAIT_S = 5.0


class GraphLookups:
    """Parameters of other nodes and the driver's action, seen from `node`."""

    def __init__(self, node: Node, calls: Calls) -> None:
        self.node = node
        self.calls = calls
        self._param_clients: dict[str, Client] = {}

    def param_of(self, node: str, name: str) -> str | None:
        """A parameter of another node, through its parameter service (read-only, retried)."""
        cli = self._param_clients.get(node)
        if cli is None:
            cli = self._param_clients[node] = self.node.create_client(
                GetParameters, f'/{node}/get_parameters'
            )
        req = GetParameters.Request(names=[name])
        res = self.calls.service(
            cli, req, f'{node} parameters', self.calls.t.quick_s, repeatable=True, retry_s=5.0
        )
        return res.values[0].string_value if res.values else None

    def driver_missing(self, p: DirectorParams, stopping: Callable[[], bool]) -> str:
        """With robot:=ur, why the episodes cannot run on the cell (the driver's trajectory
        action absent after DRIVER_WAIT_S, or the simulated cell's services, which the episodes
        still call, absent); '' when they can."""
        if p.robot != 'ur':
            return ''
        end = time.monotonic() + DRIVER_WAIT_S
        while not self._has_action(p.trajectory_action):
            if time.monotonic() >= end or stopping():
                return (
                    f'no FollowJointTrajectory server at {p.trajectory_action}: is '
                    'ur_robot_driver running and the External Control program playing?'
                )
            time.sleep(0.2)
        if not p.real:
            return (
                f'the UR driver is there ({p.trajectory_action}), but cell_interfaces:=sim '
                "calls the simulated cell's services: robot:=ur needs cell_interfaces:=real"
            )
        return ''

    def _has_action(self, name: str) -> bool:
        """An action server is up at `name`: only servers publish the goals' status (the
        executor's client makes the name show in the graph either way)."""
        return int(self.node.count_publishers(f'{name}/_action/status')) > 0
