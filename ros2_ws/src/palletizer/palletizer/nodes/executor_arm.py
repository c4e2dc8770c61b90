"""The trajectory executor's arm: the ArmPort of execution/sequencer.py over the UR driver.

One trajectory goal at a time on FollowJointTrajectory, watched by the vacuum level
(execution/vacuum.py) while the vacuum is on; the vacuum switched through SetIO; the wrench at
the still end of the last goal. A goal the controller stopped on its own (a protective stop,
the program stopped) is recovered through the dashboard (nodes/executor_recovery.py) and the
rest of its path resumed from where the arm stands. Also what the executor's parts share: the
joint states as they stream in (`JointFeed`) and a future waited for with a timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from control_msgs.action import FollowJointTrajectory
from rclpy.callback_groups import CallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectory as JointTrajectoryMsg
from ur_msgs.srv import SetIO

from palletizer.core.motion import JointTrajectory, MotionParams
from palletizer.core.streams import rewound
from palletizer.execution import FollowResult, ForceReading, WrenchWindow, trajectory_to_msg
from palletizer.execution.recovery import ControllerState, Recovery, resume_path
from palletizer.execution.vacuum import VacuumLevel, VacuumWatch
from palletizer.nodes.action_client import OrderedActionClient
from palletizer.nodes.convert import stamp_s

__all__ = ['ArmSettings', 'Dashboard', 'DriverArm', 'JointFeed', 'wait_future']

_SUCCEEDED = 4  # action_msgs/GoalStatus.STATUS_SUCCEEDED
# FollowResult.error_code of a goal never sent (no server): nothing to recover from.
_NO_SERVER = -100


def wait_future(future: Future, timeout_s: float, stop: threading.Event | None = None) -> Any:
    """The future's result, or None when it is not done within timeout_s [s] (wall) or
    `stop` is set first."""
    done = threading.Event()
    future.add_done_callback(lambda _f: done.set())
    if stop is None:
        return future.result() if done.wait(timeout_s) else None
    end = time.monotonic() + timeout_s
    while not done.wait(0.01):
        if stop.is_set() or time.monotonic() >= end:
            return None
    return future.result()


class JointFeed:
    """The arm's joint states as they stream in: the newest positions and their stamp, and
    the sim-time rewinds seen (cell resets), all under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.q: np.ndarray | None = None
        self.stamp = -np.inf  # [s] sim time of the newest joint state
        self.epoch = 0  # sim-time rewinds seen on the joint states (cell resets)

    def update(self, q: np.ndarray, stamp: float) -> None:
        with self.lock:
            if rewound(self.stamp, stamp):
                self.epoch += 1
            self.q, self.stamp = q, stamp

    def newest(self) -> float:
        """[s] sim time of the newest joint state (-inf before the first)."""
        with self.lock:
            return float(self.stamp)

    def positions(self) -> np.ndarray | None:
        """A copy of the newest positions; None before the first joint state."""
        with self.lock:
            return None if self.q is None else self.q.copy()


@dataclass(frozen=True)
class ArmSettings:
    """The executor's parameters the arm works by (trajectory_executor's parameters)."""

    joints: Sequence[str]
    action: str  # FollowJointTrajectory action name
    io_service: str  # SetIO service name
    vac_fun: int
    vac_pin: int
    vac_held_min: float  # [V]
    speed: float  # the cell's: 0 = fast-forward
    dwell: float  # [s] hold at the end of each goal
    wrench_timeout: float  # [s]
    margin: float  # [s] FJT result wait beyond the duration
    server_timeout: float  # [s]
    max_recoveries: int
    motion: MotionParams


class Dashboard(Protocol):
    """What the arm asks of the UR dashboard after a stopped goal (nodes/executor_recovery.py)."""

    def state(self) -> ControllerState | None:
        """The controller's modes and the program's state, or None."""

    def recover(self, how: Recovery) -> str:
        """Unlock and play as `how` says; '' or what failed."""


class DriverArm:
    """The ArmPort over FollowJointTrajectory, SetIO, the wrench and the vacuum level.

    show_path: publishes a goal's trajectory as it is sent (MoveIt's view).
    """

    def __init__(
        self,
        node: Node,
        settings: ArmSettings,
        feed: JointFeed,
        dashboard: Dashboard,
        show_path: Callable[[JointTrajectoryMsg], None],
        callback_group: CallbackGroup,
    ) -> None:
        self.node = node
        self.s = settings
        self.feed = feed
        self.dashboard = dashboard
        self.show_path = show_path
        self.vacuum = VacuumLevel(settings.vac_held_min)
        self.vac_on = False  # as last switched: a goal is watched only with the vacuum on
        self.window = WrenchWindow()
        self._last: tuple = (self.window.mark(), 0.0, 0.0, -np.inf)
        self.fjt = OrderedActionClient(
            node, FollowJointTrajectory, settings.action, callback_group=callback_group
        )
        self.set_io = node.create_client(SetIO, settings.io_service, callback_group=callback_group)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def joint_positions(self) -> np.ndarray | None:
        """The latest joint state; before the first one, waits up to server_timeout_s."""
        end = time.monotonic() + self.s.server_timeout
        while True:
            q = self.feed.positions()
            if q is not None:
                return q
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)

    def follow(self, traj: JointTrajectory, progress: Callable[[float], None]) -> FollowResult:
        """One trajectory goal; when the controller stopped it on its own (a protective stop,
        the program stopped), said in one line and recovered as a real cell would, then the
        rest of the path resumed from where the arm stands, `max_recoveries` times at most."""
        log = self.node.get_logger()
        out = self._follow_once(traj, progress)
        done = 0
        while not out.ok and out.error_code != _NO_SERVER:
            state = self.dashboard.state()
            how = Recovery.NONE if state is None else state.recovery()
            if state is None or how is Recovery.NONE:
                return out
            seen = f'{state.describe()} (the goal: {out.message})'
            if how is Recovery.OPERATOR or done >= self.s.max_recoveries:
                why = (
                    'an operator must clear it'
                    if how is Recovery.OPERATOR
                    else f'still so after {done} recover{"y" if done == 1 else "ies"}'
                )
                log.error(f'controller stopped: {seen}; not commanding the arm: {why}')
                return FollowResult(False, out.error_code, f'controller stopped: {seen}; {why}')
            log.warning(
                f'controller stopped: {seen}; recovering: '
                + ('unlock the protective stop, ' if how is Recovery.UNLOCK else '')
                + 'play the program, resume the path from where the arm stands'
            )
            err = self.dashboard.recover(how)
            q = self.joint_positions()
            if err or q is None:
                err = err or 'no joint state'
                log.error(f'recovery failed: {err}; not commanding the arm')
                return FollowResult(False, out.error_code, f'controller stopped: {seen}; {err}')
            motion = self.s.motion
            rest, joined = resume_path(traj, q, motion.limits, motion.rate_hz)
            done += 1
            log.info(
                f'resuming at {joined:.2f} s of {traj.duration:.2f} s, from where the arm stands'
            )

            def resumed(t: float, j: float = joined) -> None:
                progress(j + t)  # time along the whole path: the rest starts at `joined`

            out = self._follow_once(rest, resumed)
        return out

    def _follow_once(
        self, traj: JointTrajectory, progress: Callable[[float], None]
    ) -> FollowResult:
        s = self.s
        if not self.fjt.wait_for_server(timeout_sec=s.server_timeout):
            return FollowResult(False, _NO_SERVER, f'no FollowJointTrajectory server {s.action}')
        goal = FollowJointTrajectory.Goal(trajectory=trajectory_to_msg(traj, s.joints, s.dwell))
        self.show_path(goal.trajectory)
        mark = self.window.mark(self._now())
        self.vacuum.mark()

        def on_feedback(fb: FollowJointTrajectory.Impl.FeedbackMessage) -> None:
            m = fb.feedback
            progress(max(stamp_s(m.desired.time_from_start), stamp_s(m.header.stamp) - mark.stamp))

        handle = wait_future(self.fjt.send_goal_async(goal, on_feedback), s.server_timeout)
        if handle is None or not handle.accepted:
            return FollowResult(False, 0, 'the trajectory controller did not accept the goal')
        total = traj.duration + s.dwell
        wall = total / s.speed if s.speed > 0 else 0.0
        timeout = s.margin + 2.0 * wall
        watch = VacuumWatch(s.vac_held_min)
        # With the vacuum off (an approach, the retreat after a release) a level that was
        # high is the seal letting go as asked, or a reading from before it: not watched.
        self.vacuum.watch(watch if self.vac_on else None)
        try:
            res = wait_future(handle.get_result_async(), timeout, watch.lost)
        finally:
            self.vacuum.watch(None)
        if watch.lost.is_set():
            # The cups let go mid-move: stop commanding the arm before it carries on empty.
            wait_future(handle.cancel_goal_async(), s.server_timeout)
            msg = (
                f'vacuum lost during the move: level {watch.level:.2f} V below '
                f'{s.vac_held_min:.2f} V after {watch.held_v:.2f} V held; goal canceled, '
                'arm stopped'
            )
            self.node.get_logger().error(msg)
            return FollowResult(False, 0, msg, 'grasp_slip')
        if res is None:
            handle.cancel_goal_async()
            return FollowResult(False, 0, f'no result within {timeout:.0f} s; goal canceled')
        # Fast-forward jumps to the end: no sim time passes, the one sample after it is the
        # reading. Otherwise the still dwell at the end is averaged.
        sim = s.speed > 0
        self._last = (mark, total if sim else 0.0, s.dwell if sim else 0.0, self._now())
        r = res.result
        if res.status != _SUCCEEDED or r.error_code != 0:
            return FollowResult(False, r.error_code, r.error_string or f'status {res.status}')
        return FollowResult(True)

    def set_vacuum(self, on: bool) -> FollowResult:
        s = self.s
        if not self.set_io.wait_for_service(timeout_sec=s.server_timeout):
            return FollowResult(False, 0, f'no SetIO service {s.io_service}')
        req = SetIO.Request(fun=s.vac_fun, pin=s.vac_pin, state=1.0 if on else 0.0)
        res = wait_future(self.set_io.call_async(req), s.server_timeout)
        if res is None or not res.success:
            return FollowResult(False, 0, f'SetIO fun {s.vac_fun} pin {s.vac_pin} failed')
        self.vac_on = on
        return FollowResult(True)

    def wrench_after_motion(self) -> ForceReading | None:
        mark, motion_s, window_s, answered = self._last
        return self.window.reading_after(mark, motion_s, self.s.wrench_timeout, window_s, answered)

    def vacuum_holding(self) -> bool | None:
        """Whether the vacuum level read since the last motion was sent holds a carton; None
        when no reading came within the server timeout. The cell streams the level with the
        joint states and once more at the end of each goal; the seal changes only when the
        vacuum is switched, before the motion."""
        return self.vacuum.holding(self.s.server_timeout)
