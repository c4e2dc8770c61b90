"""The cell bridge's control interfaces, as a UR driver serves them: FollowJointTrajectory and
SetIO, and the I/O and F/T sensor behind the rest of the driver's interfaces (nodes/ur_driver.py).

One trajectory goal at a time, refused while the controller refuses motion, executed on the
cell by bridge/fjt.py with the controller's feedback; in the hardware profile a goal held back
on its path ends in a protective stop, and the injected faults (bridge/faults.py) fire during
goals. SetIO switches the vacuum, and in the hardware profile also the line's request output.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from rclpy.action import GoalResponse
from rclpy.action.server import ServerGoalHandle
from trajectory_msgs.msg import JointTrajectoryPoint
from ur_msgs.srv import SetIO

from palletizer.bridge import FjtRunner, FjtStatus, Tick
from palletizer.bridge.faults import FaultPlan
from palletizer.bridge.ur_status import UrStatus
from palletizer.core.config import Config
from palletizer.core.jtc import INVALID_GOAL, PATH_TOLERANCE_VIOLATED, GoalError
from palletizer.nodes.cell_hardware import HardwareWorld
from palletizer.nodes.cell_streams import CellStreams, stamp
from palletizer.nodes.ur_driver import UrDriverInterfaces
from palletizer.sim.cell import Cell

__all__ = ['CellControl', 'ControlOwner']


def _tol(items: Iterable[JointTolerance]) -> list[tuple[str, float, float, float]]:
    return [(j.name, j.position, j.velocity, j.acceleration) for j in items]


def _point(q: np.ndarray, qd: np.ndarray) -> JointTrajectoryPoint:
    return JointTrajectoryPoint(positions=[float(v) for v in q], velocities=[float(v) for v in qd])


class ControlOwner(Protocol):
    """What the control interfaces use of the cell bridge node (nodes/cell_bridge.py)."""

    cfg: Config
    cell: Cell
    lock: threading.Lock
    fjt: FjtRunner
    joints: tuple[str, ...]
    hardware: bool
    faults: FaultPlan
    ur: UrStatus
    driver: UrDriverInterfaces
    world_hw: HardwareWorld | None
    streams: CellStreams
    vac_fun: int
    vac_pin: int
    vac_on: bool
    active_goal: ServerGoalHandle | None  # the FJT goal executing

    def get_logger(self) -> Any:
        """The node's logger."""


class CellControl:
    """The handlers of the trajectory action and of SetIO, on the cell of `node`."""

    def __init__(self, node: ControlOwner) -> None:
        self.node = node

    def outputs(self) -> set[int]:
        """The digital outputs that are on: the vacuum's, and the line's in the hardware profile."""
        n = self.node
        line = set() if n.world_hw is None else n.world_hw.line.outputs()
        return ({n.vac_pin} if n.vac_on else set()) | line

    def vacuum_volts(self) -> float:
        """The vacuum level on the tool analog input 2 [V] (cell.yaml gripper.vacuum_level)."""
        sealed = self.node.cell.suction.held is not None
        return self.node.cfg.cell.gripper.vacuum_level.volts_sealed if sealed else 0.0

    def zero_ft(self) -> None:
        with self.node.lock:
            self.node.cell.zero_wrench()

    def on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        n = self.node
        # One goal at a time; a second is refused rather than silently queued behind the first.
        if n.active_goal is not None:
            return GoalResponse.REJECT
        # As the driver's controller: no motion while stopped or without the program.
        refused = n.ur.motion_refused()
        if refused:
            n.get_logger().warning(f'trajectory goal refused: {refused}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def execute(self, handle: ServerGoalHandle) -> FollowJointTrajectory.Result:
        n = self.node
        goal = handle.request
        res = FollowJointTrajectory.Result()
        points = [
            {
                'positions': list(p.positions),
                'velocities': list(p.velocities),
                'accelerations': list(p.accelerations),
                'time_from_start': p.time_from_start.sec + p.time_from_start.nanosec * 1e-9,
            }
            for p in goal.trajectory.points
        ]
        gt = goal.goal_time_tolerance
        fb = FollowJointTrajectory.Feedback(joint_names=list(n.joints))

        def on_tick(tick: Tick) -> None:
            fb.header.stamp = stamp(n.cell.time)
            fb.desired = _point(tick.desired_q, tick.desired_qd)
            fb.actual = _point(tick.actual_q, tick.actual_qd)
            fb.error = _point(tick.error_q, tick.error_qd)
            handle.publish_feedback(fb)

        with n.lock:
            n.active_goal = handle
            try:
                prepared = n.fjt.prepare(
                    goal.trajectory.joint_names,
                    points,
                    _tol(goal.path_tolerance),
                    _tol(goal.goal_tolerance),
                    gt.sec + gt.nanosec * 1e-9,
                )
                n.faults.begin_goal(n.cell.suction.held is not None)
                out = n.fjt.execute(
                    prepared, on_tick, lambda: handle.is_cancel_requested, self._fault
                )
                if n.hardware and out.error_code == PATH_TOLERANCE_VIOLATED:
                    # Held back on its path: the arm struck something, and a UR's controller
                    # stops it with a protective stop.
                    n.ur.protective_stop(n.cell.time)
                    n.driver.publish_status()
                    out = dataclasses.replace(
                        out, error_string=f'protective stop: {out.error_string}'
                    )
            except GoalError as exc:
                res.error_code, res.error_string = exc.code, str(exc)
                handle.abort()
                return res
            finally:
                n.active_goal = None
                n.streams.publish_state()
        res.error_code, res.error_string = out.error_code, out.error_string
        {FjtStatus.succeeded: handle.succeed, FjtStatus.aborted: handle.abort}.get(
            out.status, handle.canceled
        )()
        return res

    def _fault(self, share: float) -> tuple[int, str] | None:
        """The injected fault due at this share of the running goal (bridge/faults.py): the
        controller's stops abort the goal as the driver's controller does; a lost vacuum
        drops the carton and the arm moves on."""
        n = self.node
        f = n.faults.due(share)
        if f is None:
            return None
        n.get_logger().warning(f'injected fault: {f.kind} at {share:.0%} of goal {f.goal}')
        if f.kind == 'vacuum_loss':
            n.cell.set_vacuum(False)  # the output stays on; the seal is gone
            return None
        if f.kind == 'protective_stop':
            n.ur.protective_stop(n.cell.time)
        else:
            n.ur.stop()
        n.driver.publish_status()
        return INVALID_GOAL, f'goal aborted: {n.ur.motion_refused()}'

    def on_set_io(self, req: SetIO.Request, res: SetIO.Response) -> SetIO.Response:
        n = self.node
        line = None if n.world_hw is None else n.world_hw.line
        if line is not None and req.fun == SetIO.Request.FUN_SET_DIGITAL_OUT:
            with n.lock:
                if line.set_output(req.pin, req.state >= 0.5):
                    n.driver.publish_io()
                    res.success = True
                    return res
        if req.fun != n.vac_fun or req.pin != n.vac_pin:
            wired = f'fun={n.vac_fun} pin={n.vac_pin} (the vacuum)'
            if line is not None:
                wired += f" and fun=1 pin={line.io.request_out} (the line's request)"
            n.get_logger().warn(f'SetIO fun={req.fun} pin={req.pin} refused; only {wired}')
            res.success = False
            return res
        with n.lock:
            n.vac_on = req.state >= 0.5
            n.cell.set_vacuum(n.vac_on)
            n.streams.publish_state()
        res.success = True
        return res
