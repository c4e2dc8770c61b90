"""Trajectory executor node: the pick and place actions through FollowJointTrajectory and SetIO."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from geometry_msgs.msg import WrenchStamped
from moveit_msgs.msg import DisplayTrajectory, PlanningScene
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.msg import HeightMap as HeightMapMsg
from palletizer_msgs.srv import MoveArm
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.client import Client
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from ur_dashboard_msgs.srv import GetRobotMode, GetSafetyMode, IsProgramRunning
from ur_msgs.msg import ToolDataMsg
from ur_msgs.srv import SetIO

from palletizer.core.config import load_config
from palletizer.core.contracts import HeightMap, PalletGeometry, floats3
from palletizer.core.errors import PalletizerError
from palletizer.core.motion import JointTrajectory, MotionParams, MotionPlanner
from palletizer.core.streams import rewound
from palletizer.core.ur_modes import UNLOCK_AFTER_S
from palletizer.execution import (
    ExecResult,
    FollowResult,
    ForceReading,
    Outcome,
    ParkPose,
    PickPlaceSequencer,
    VerifyParams,
    WrenchWindow,
    controller_cause,
    exec_result_to_msg,
    trajectory_to_msg,
)
from palletizer.execution.layout import arm_boxes, pick_rise, ready_pose, static_boxes
from palletizer.execution.maps import CurrentMap
from palletizer.execution.recovery import ControllerState, Recovery, resume_path
from palletizer.execution.sequencer import Feedback
from palletizer.nodes.action_client import OrderedActionClient
from palletizer.nodes.convert import (
    heightmap_from_msg,
    observation_from_msg,
    plan_from_msg,
    spec_from_msg,
)
from palletizer.nodes.moveit_view import CellScene, display_trajectory
from palletizer.nodes.qos import LATCHED, SENSORS
from palletizer.nodes.spin import quiet_at_stop, run_node

__all__ = ['TrajectoryExecutorNode', 'main']

_SUCCEEDED = 4  # action_msgs/GoalStatus.STATUS_SUCCEEDED
# FollowResult.error_code of a goal never sent (no server): nothing to recover from.
_NO_SERVER = -100
# The UR driver's dashboard client (ur_robot_driver's dashboard_client node).
DASHBOARD = '/dashboard_client'
# Refusals before anything moved: what the gripper holds is unchanged.
_NOTHING_MOVED = (Outcome.IK_UNREACHABLE, Outcome.COLLISION, Outcome.INVALID_REQUEST)


def _wait(future: Future, timeout_s: float, stop: threading.Event | None = None) -> Any:
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


class VacuumWatch:
    """Watches the vacuum level during one goal: once a reading says a carton is held
    (>= held_min), a later one below it means the cups let go; `lost` is then set."""

    def __init__(self, held_min: float) -> None:
        self.held_min = held_min
        self.held_v = 0.0  # [V] the last level that held
        self.level = 0.0  # [V] the level that did not
        self.lost = threading.Event()

    def see(self, v: float) -> None:
        if v >= self.held_min:
            self.held_v = v
        elif self.held_v > 0.0 and not self.lost.is_set():
            self.level = v
            self.lost.set()


def _s(stamp: Time) -> float:
    return float(stamp.sec + stamp.nanosec * 1e-9)


class TrajectoryExecutorNode(Node):
    """Serves ~/pick and ~/place, and ~/park and ~/ready (MoveArm); the arm is reached only
    through the UR driver's interfaces."""

    def __init__(self) -> None:
        super().__init__('trajectory_executor')
        cfg = load_config()
        cell = cfg.cell

        def param(name: str, default: Any, text: str) -> Any:
            return self.declare_parameter(
                name, default, ParameterDescriptor(description=text)
            ).value

        action = param('trajectory_action', 'follow_joint_trajectory', 'FJT action to drive')
        io_srv = param('set_io_service', 'set_io', 'ur_msgs/SetIO service of the vacuum')
        wrench = param('wrench_topic', 'wrench', 'WrenchStamped at the flange [N, N m]')
        hm_topic = param('heightmap_topic', '/palletizer/heightmap', 'latched pallet height map')
        vac_topic = param(
            'vacuum_level_topic',
            '/io_and_status_controller/tool_data',
            'ur_msgs/ToolDataMsg: the vacuum level on the tool analog input 2 [V]',
        )
        self.vac_held_min = float(
            param(
                'vacuum_held_min_v',
                cell.gripper.vacuum_level.volts_held_min,
                'least vacuum level that counts as holding [V]',
            )
        )
        self.vac_fun = param('vacuum_fun', cell.gripper.vacuum_io.fun, 'SetIO fun')
        self.vac_pin = param('vacuum_pin', cell.gripper.vacuum_io.pin, 'SetIO pin')
        self.speed = float(param('speed', 0.0, 'cell speed: 0 = fast-forward (no sim time)'))
        level = param('level', cfg.default_level, 'level id: its source sets the static boxes')
        verify = VerifyParams(
            min_payload_kg=param('min_payload_kg', 0.2, 'smallest |F| change of a carton [kg]'),
            noise_force_n=param(
                'wrench_noise_n', cell.wrench.noise_force_n, 'F noise per axis [N]'
            ),
        )
        self.dwell = param('still_dwell_s', 0.1, 'hold at the end of each goal, averaged [s]')
        self.wrench_timeout = param('wrench_timeout_s', 2.0, 'wait for the end sample [s]')
        self.margin = param('goal_timeout_margin_s', 60.0, 'FJT result wait beyond duration [s]')
        self.server_timeout = param('server_timeout_s', 10.0, 'wait for FJT/SetIO servers [s]')
        self.max_recoveries = int(
            param('max_recoveries', 2, 'protective stops or program stops recovered per goal')
        )
        park = ParkPose()
        xyz = param('park_xyz', [park.x, park.y, park.z], 'photo park TCP position, world [m]')
        self.park_pose = ParkPose(
            *floats3(xyz), param('park_yaw', park.yaw, 'photo park tool yaw [rad]')
        )
        ready = ready_pose(cfg, cfg.level(level).source) if level in cfg.levels else None
        use_ready = param(
            'ready', ready is not None, 'after each place, wait above the source (~/ready)'
        )
        ready_param = param(
            'ready_pose',
            list(ready) if ready is not None else [0.0, 0.0, 0.0, 0.0],
            'x, y, z [m], yaw [rad] where the empty arm waits above the source',
        )
        if len(ready_param) != 4:
            raise PalletizerError(
                f'trajectory_executor: ready_pose:={list(ready_param)}; expected [x, y, z, yaw]'
            )
        self.ready_pose: tuple[float, float, float, float] | None = None
        if use_ready:
            rx, ry, rz, ryaw = (float(v) for v in ready_param)
            self.ready_pose = (rx, ry, rz, ryaw)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if level not in cfg.levels:
            raise PalletizerError(
                f'trajectory_executor: level:={level}; expected one of {sorted(cfg.levels)}'
            )
        self.joints = cell.robot.joint_names
        self.action_name, self.io_name = action, io_srv

        # The action callbacks block on the FJT action and the SetIO service: their clients and
        # the streams sit in a reentrant group so other executor threads deliver the answers.
        # The lock keeps one motion at a time (rclpy runs action execution outside the groups).
        self.io = ReentrantCallbackGroup()
        self.actions = MutuallyExclusiveCallbackGroup()
        self.busy = threading.Lock()
        self._q_lock = threading.Lock()
        self._q: np.ndarray | None = None
        self._q_stamp = -np.inf  # [s] sim time of the newest joint state
        self._epoch = 0  # sim-time rewinds seen on the joint states (cell resets)
        self._goal_epoch = 0  # the epoch of the last pick or place
        self._hm_epoch = 0  # the epoch in which the height map arrived
        self._map = CurrentMap()  # the newest fused map
        # The vacuum level: the newest reading and how many have arrived, and how many had
        # when the last motion was sent (a reading after that is of the motion or later).
        self._vac = threading.Condition()
        self._vac_n = 0
        self._vac_v = 0.0
        self._vac_mark = 0
        self._watch: VacuumWatch | None = None  # of the goal in progress
        self._vac_on = False  # as last switched: a goal is watched only with the vacuum on
        self.window = WrenchWindow()
        self._last: tuple = (self.window.mark(), 0.0, 0.0, -np.inf)
        self.fjt = OrderedActionClient(self, FollowJointTrajectory, action, callback_group=self.io)
        self.set_io = self.create_client(SetIO, io_srv, callback_group=self.io)
        # The UR dashboard: what stopped a goal, and the way back (execution/recovery.py).
        self.dash = {
            key: self.create_client(kind, f'{DASHBOARD}/{name}', callback_group=self.io)
            for key, kind, name in (
                ('robot_mode', GetRobotMode, 'get_robot_mode'),
                ('safety_mode', GetSafetyMode, 'get_safety_mode'),
                ('program_running', IsProgramRunning, 'program_running'),
                ('unlock', Trigger, 'unlock_protective_stop'),
                ('play', Trigger, 'play'),
            )
        }
        self.create_subscription(
            JointState, 'joint_states', self.on_joints, SENSORS, callback_group=self.io
        )
        self.create_subscription(
            WrenchStamped, wrench, self.on_wrench, SENSORS, callback_group=self.io
        )
        self.create_subscription(
            HeightMapMsg, hm_topic, self.on_heightmap, LATCHED, callback_group=self.io
        )
        self.create_subscription(
            ToolDataMsg, vac_topic, self.on_tool_data, SENSORS, callback_group=self.io
        )
        # MoveIt's view of the cell (nodes/moveit_view.py): what these moves clear and carry.
        self.scene = CellScene(
            arm_boxes(cfg, cfg.level(level).source), PalletGeometry.from_config(cell.pallet)
        )
        self.scene_pub = self.create_publisher(PlanningScene, '/monitored_planning_scene', LATCHED)
        self.path_pub = self.create_publisher(DisplayTrajectory, '/display_planned_path', 10)
        self.publish_scene()
        # A fast-forward cell jumps the arm without physics: its wrench after a jump is not a
        # static reading, so the gripper's vacuum sensor judges the hold and the release.
        self.motion = MotionParams.from_config(cell)
        self.seq = PickPlaceSequencer(
            self,
            planner=MotionPlanner(params=self.motion),
            static_boxes=static_boxes(cfg, cfg.level(level).source),
            arm_boxes=arm_boxes(cfg, cfg.level(level).source),
            pick_rise=pick_rise(cfg, cfg.level(level).source),
            verify=verify,
            use_wrench=self.speed > 0,
        )
        self.servers = [
            ActionServer(
                self,
                kind,
                f'~/{kind.__name__.lower()}',
                execute_callback=quiet_at_stop(self, cb, functools.partial(self._stopped, kind)),
                goal_callback=self.on_goal,
                callback_group=self.actions,
            )
            for kind, cb in ((Pick, self.on_pick), (Place, self.on_place))
        ]
        # The busy lock (not the group: rclpy runs action execution outside the groups) keeps
        # a park from running alongside a pick or a place.
        self.create_service(MoveArm, '~/park', self.on_park, callback_group=self.actions)
        self.create_service(MoveArm, '~/ready', self.on_ready, callback_group=self.actions)
        self.get_logger().info(
            f'trajectory_executor ready: action {action}, SetIO {io_srv} fun {self.vac_fun} '
            f'pin {self.vac_pin}, wrench {wrench}, speed {self.speed}'
        )

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name != 'use_sim_time':
                return SetParametersResult(
                    successful=False, reason=f'{p.name} is read once at start; restart the node'
                )
        return SetParametersResult(successful=True)

    # Streams ----------------------------------------------------------------------------------
    def on_joints(self, msg: JointState) -> None:
        names = list(msg.name)
        try:
            q = np.array([msg.position[names.index(j)] for j in self.joints])
        except (ValueError, IndexError):
            return  # another robot's or a partial joint state
        stamp = _s(msg.header.stamp)
        with self._q_lock:
            if rewound(self._q_stamp, stamp):
                self._epoch += 1
            self._q, self._q_stamp = q, stamp

    def on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self.window.add(_s(msg.header.stamp), (f.x, f.y, f.z))

    def on_tool_data(self, msg: ToolDataMsg) -> None:
        with self._vac:
            self._vac_n += 1
            self._vac_v = float(msg.analog_input2)
            if self._watch is not None:
                self._watch.see(self._vac_v)
            self._vac.notify_all()

    def on_heightmap(self, msg: HeightMapMsg) -> None:
        try:
            hm = heightmap_from_msg(msg)
        except (PalletizerError, ValueError) as exc:
            self.get_logger().warn(f'height map ignored: {exc}')
            return
        self._adopt(hm)

    def _adopt(self, hm: HeightMap) -> None:
        """Make `hm` the current map, unless it is the current one already.

        The fused map reaches this node twice, on the latched topic and in the place goal, in
        either order. Only a new map shows the cartons placed since the last one, so only a new
        map clears them from the sequencer's obstacles; the second copy changes nothing (the
        copy on the topic used to clear the carton the place had just put down, when it came
        late: the next pick then planned in another world than the in-process loop's).
        """
        with self._q_lock:
            if not self._map.offer(hm):
                return
            self._hm_epoch = self._epoch
            self.seq.heightmap_updated()

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _joint_state(self) -> JointState:
        """The newest arm joint state (empty before the first one)."""
        with self._q_lock:
            q = None if self._q is None else self._q.copy()
        msg = JointState(name=list(self.joints) if q is not None else [])
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.position = [] if q is None else [float(v) for v in q]
        return msg

    def publish_scene(self) -> None:
        self.scene_pub.publish(self.scene.message(self._joint_state()))

    # ArmPort ----------------------------------------------------------------------------------
    def joint_positions(self) -> np.ndarray | None:
        """The latest joint state; before the first one, waits up to server_timeout_s."""
        end = time.monotonic() + self.server_timeout
        while True:
            with self._q_lock:
                if self._q is not None:
                    q: np.ndarray = self._q.copy()
                    return q
            if time.monotonic() >= end:
                return None
            time.sleep(0.02)

    def follow(self, traj: JointTrajectory, progress: Callable[[float], None]) -> FollowResult:
        """One trajectory goal; when the controller stopped it on its own (a protective stop,
        the program stopped), said in one line and recovered as a real cell would, then the
        rest of the path resumed from where the arm stands, `max_recoveries` times at most."""
        out = self._follow_once(traj, progress)
        done = 0
        while not out.ok and out.error_code != _NO_SERVER:
            state = self._controller_state()
            how = Recovery.NONE if state is None else state.recovery()
            if state is None or how is Recovery.NONE:
                return out
            seen = f'{state.describe()} (the goal: {out.message})'
            if how is Recovery.OPERATOR or done >= self.max_recoveries:
                why = (
                    'an operator must clear it'
                    if how is Recovery.OPERATOR
                    else f'still so after {done} recover{"y" if done == 1 else "ies"}'
                )
                self.get_logger().error(
                    f'controller stopped: {seen}; not commanding the arm: {why}'
                )
                return FollowResult(False, out.error_code, f'controller stopped: {seen}; {why}')
            self.get_logger().warning(
                f'controller stopped: {seen}; recovering: '
                + ('unlock the protective stop, ' if how is Recovery.UNLOCK else '')
                + 'play the program, resume the path from where the arm stands'
            )
            err = self._recover(how)
            q = self.joint_positions()
            if err or q is None:
                err = err or 'no joint state'
                self.get_logger().error(f'recovery failed: {err}; not commanding the arm')
                return FollowResult(False, out.error_code, f'controller stopped: {seen}; {err}')
            rest, joined = resume_path(traj, q, self.motion.limits, self.motion.rate_hz)
            done += 1
            self.get_logger().info(
                f'resuming at {joined:.2f} s of {traj.duration:.2f} s, from where the arm stands'
            )

            def resumed(t: float, j: float = joined) -> None:
                progress(j + t)  # time along the whole path: the rest starts at `joined`

            out = self._follow_once(rest, resumed)
        return out

    def _follow_once(
        self, traj: JointTrajectory, progress: Callable[[float], None]
    ) -> FollowResult:
        if not self.fjt.wait_for_server(timeout_sec=self.server_timeout):
            return FollowResult(
                False, _NO_SERVER, f'no FollowJointTrajectory server {self.action_name}'
            )
        goal = FollowJointTrajectory.Goal(
            trajectory=trajectory_to_msg(traj, self.joints, self.dwell)
        )
        self.path_pub.publish(display_trajectory(goal.trajectory, self._joint_state()))
        mark = self.window.mark(self._now())
        with self._vac:
            self._vac_mark = self._vac_n

        def on_feedback(fb: FollowJointTrajectory.Impl.FeedbackMessage) -> None:
            m = fb.feedback
            progress(max(_s(m.desired.time_from_start), _s(m.header.stamp) - mark.stamp))

        handle = _wait(self.fjt.send_goal_async(goal, on_feedback), self.server_timeout)
        if handle is None or not handle.accepted:
            return FollowResult(False, 0, 'the trajectory controller did not accept the goal')
        total = traj.duration + self.dwell
        wall = total / self.speed if self.speed > 0 else 0.0
        timeout = self.margin + 2.0 * wall
        watch = VacuumWatch(self.vac_held_min)
        with self._vac:
            # With the vacuum off (an approach, the retreat after a release) a level that was
            # high is the seal letting go as asked, or a reading from before it: not watched.
            self._watch = watch if self._vac_on else None
        try:
            res = _wait(handle.get_result_async(), timeout, watch.lost)
        finally:
            with self._vac:
                self._watch = None
        if watch.lost.is_set():
            # The cups let go mid-move: stop commanding the arm before it carries on empty.
            _wait(handle.cancel_goal_async(), self.server_timeout)
            msg = (
                f'vacuum lost during the move: level {watch.level:.2f} V below '
                f'{self.vac_held_min:.2f} V after {watch.held_v:.2f} V held; goal canceled, '
                'arm stopped'
            )
            self.get_logger().error(msg)
            return FollowResult(False, 0, msg, 'grasp_slip')
        if res is None:
            handle.cancel_goal_async()
            return FollowResult(False, 0, f'no result within {timeout:.0f} s; goal canceled')
        # Fast-forward jumps to the end: no sim time passes, the one sample after it is the
        # reading. Otherwise the still dwell at the end is averaged.
        sim = self.speed > 0
        self._last = (mark, total if sim else 0.0, self.dwell if sim else 0.0, self._now())
        r = res.result
        if res.status != _SUCCEEDED or r.error_code != 0:
            return FollowResult(False, r.error_code, r.error_string or f'status {res.status}')
        return FollowResult(True)

    def _call(self, client: Client, request: Any, what: str) -> Any:
        """A dashboard call's response, or None (logged) when there is no answer."""
        if not client.wait_for_service(timeout_sec=self.server_timeout):
            self.get_logger().error(f'no {what} service {client.srv_name}')
            return None
        res = _wait(client.call_async(request), self.server_timeout)
        if res is None:
            self.get_logger().error(f'{client.srv_name}: no answer in {self.server_timeout} s')
        return res

    def _controller_state(self) -> ControllerState | None:
        """The controller's modes and the program's state from the dashboard, or None."""
        robot = self._call(self.dash['robot_mode'], GetRobotMode.Request(), 'dashboard')
        safety = self._call(self.dash['safety_mode'], GetSafetyMode.Request(), 'dashboard')
        running = self._call(self.dash['program_running'], IsProgramRunning.Request(), 'dashboard')
        if robot is None or safety is None or running is None:
            return None
        return ControllerState(
            int(robot.robot_mode.mode), int(safety.safety_mode.mode), bool(running.program_running)
        )

    def _recover(self, how: Recovery) -> str:
        """Unlock the protective stop (UNLOCK), then play the program; '' or what failed."""
        if how is Recovery.UNLOCK:
            # The controller refuses an unlock within UNLOCK_AFTER_S of the stop (of its time:
            # the joint states' stamps); asked again until it agrees or the wait runs out.
            with self._q_lock:
                since = self._q_stamp
            end = time.monotonic() + self.server_timeout + 4.0 * UNLOCK_AFTER_S
            while True:
                with self._q_lock:
                    waited = self._q_stamp - since
                if waited >= UNLOCK_AFTER_S:
                    res = self._call(self.dash['unlock'], Trigger.Request(), 'dashboard')
                    if res is None:
                        return 'no answer to unlock_protective_stop'
                    if res.success:
                        self.get_logger().info(f'unlock_protective_stop: {res.message}')
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
        self.get_logger().info(f'play: {res.message}')
        state = self._controller_state()
        if state is None or state.recovery() is not Recovery.NONE:
            return f'after play: {state.describe() if state is not None else "no state"}'
        return ''

    def set_vacuum(self, on: bool) -> FollowResult:
        if not self.set_io.wait_for_service(timeout_sec=self.server_timeout):
            return FollowResult(False, 0, f'no SetIO service {self.io_name}')
        req = SetIO.Request(fun=self.vac_fun, pin=self.vac_pin, state=1.0 if on else 0.0)
        res = _wait(self.set_io.call_async(req), self.server_timeout)
        if res is None or not res.success:
            return FollowResult(False, 0, f'SetIO fun {self.vac_fun} pin {self.vac_pin} failed')
        self._vac_on = on
        return FollowResult(True)

    def wrench_after_motion(self) -> ForceReading | None:
        mark, motion_s, window_s, answered = self._last
        return self.window.reading_after(mark, motion_s, self.wrench_timeout, window_s, answered)

    def vacuum_holding(self) -> bool | None:
        """Whether the vacuum level read since the last motion was sent holds a carton; None
        when no reading came within the server timeout. The cell streams the level with the
        joint states and once more at the end of each goal; the seal changes only when the
        vacuum is switched, before the motion."""
        with self._vac:
            fresh = self._vac.wait_for(
                lambda: self._vac_n > self._vac_mark, timeout=self.server_timeout
            )
            return self._vac_v >= self.vac_held_min if fresh else None

    # Actions ----------------------------------------------------------------------------------
    def on_goal(self, _goal: Pick.Goal | Place.Goal) -> GoalResponse:
        # One motion at a time: a second goal is refused rather than queued behind the first.
        return GoalResponse.REJECT if self.busy.locked() else GoalResponse.ACCEPT

    def _run(
        self,
        handle: ServerGoalHandle,
        kind: type[Pick] | type[Place],
        work: Callable[[Feedback], ExecResult],
    ) -> tuple[Pick.Result | Place.Result, ExecResult]:
        def feedback(phase: str, progress: float) -> None:
            handle.publish_feedback(kind.Feedback(phase=phase, progress=float(progress)))

        t0 = time.monotonic()
        with self.busy:
            stale = self._wait_state(_s(handle.request.min_stamp))
            if stale:
                out: ExecResult = ExecResult(
                    Outcome.CONTROLLER_FAILED, stale, controller_cause(None)
                )
            else:
                self._episode_boundary()
                out = work(feedback)
        res = exec_result_to_msg(out, kind.Result())
        (handle.succeed if out.ok else handle.abort)()
        self.get_logger().info(
            f'{kind.__name__.lower()}: {out.outcome.value} ({out.message}); '
            f'{time.monotonic() - t0:.2f} s wall, {out.motion_s:.2f} s of motion'
        )
        return res, out

    # A joint state stamped this far past the goal's min_stamp is from another epoch (the
    # previous episode, whose rewind has not arrived): in lockstep the newest joint state is at
    # the director's last cell call, so a goal's min_stamp is the newest stamp, not older.
    STALE_S = 1.0

    def _wait_state(self, want: float) -> str:
        """Wait for a joint state of the goal's epoch at or after `want` [s] of sim time (zero:
        no wait), so that a first goal after a reset plans from the reset arm and the episode
        boundary is seen; an error message on timeout, else ''."""
        if want <= 0.0:
            return ''
        end = time.monotonic() + self.server_timeout
        while True:
            with self._q_lock:
                newest = self._q_stamp
            if want - 1e-6 <= newest <= want + self.STALE_S:
                return ''
            if time.monotonic() >= end:
                return (
                    f'no joint state at sim time {want:.3f} s within {self.server_timeout:.0f} s '
                    f'(newest {newest:.3f} s)'
                )
            time.sleep(0.005)

    def _episode_boundary(self) -> None:
        """Forget the previous episode's grasp, park and placed cartons once the cell's clock
        has rewound (a reset) since the last pick or place."""
        with self._q_lock:
            epoch = self._epoch
        if epoch != self._goal_epoch:
            self._goal_epoch = epoch
            if self._hm_epoch != epoch:
                self._map.clear()  # the previous episode's stack
            self.seq.new_episode()
            self._vac_on = False  # the reset cell's vacuum is off
            self.scene.reset()
            self.publish_scene()
            self.get_logger().info('sim time rewound: new episode, held state cleared')

    def _invalid(
        self, handle: ServerGoalHandle, kind: type[Pick] | type[Place], exc: Exception
    ) -> Pick.Result | Place.Result:
        """A goal that does not convert: INVALID_REQUEST, no cause (not a failure of the cell),
        and nothing moves."""
        handle.abort()
        out = ExecResult(Outcome.INVALID_REQUEST, f'invalid {kind.__name__} request: {exc}')
        self.get_logger().warning(f'{kind.__name__.lower()}: {out.message}')
        return exec_result_to_msg(out, kind.Result())

    def _stopped(self, kind: type[Pick] | type[Place]) -> Pick.Result | Place.Result:
        """The result of a goal that a stop (Ctrl-C) cut short: the controller's motion ended
        with the node."""
        out = ExecResult(Outcome.CONTROLLER_FAILED, 'the trajectory executor stopped')
        return exec_result_to_msg(out, kind.Result())

    def on_pick(self, handle: ServerGoalHandle) -> Pick.Result:
        try:
            obs = observation_from_msg(handle.request.observation)
        except (PalletizerError, ValueError) as exc:
            return self._invalid(handle, Pick, exc)
        res, out = self._run(handle, Pick, lambda fb: self.seq.pick(obs, self._map.map, fb))
        if out.ok:
            self.scene.picked(obs.dims_guess)
        elif out.outcome not in _NOTHING_MOVED:
            self.scene.dropped()
        self.publish_scene()
        return res

    def on_place(self, handle: ServerGoalHandle) -> Place.Result:
        req = handle.request
        try:
            plan, spec = plan_from_msg(req.plan), spec_from_msg(req.spec)
            hm = heightmap_from_msg(req.heightmap)
        except (PalletizerError, ValueError) as exc:
            return self._invalid(handle, Place, exc)

        def place(fb: Feedback) -> ExecResult:
            self._adopt(hm)
            return self.seq.place(plan, spec, hm, fb)

        res, out = self._run(handle, Place, place)
        if out.ok:
            self.scene.placed(plan, spec)
        elif out.outcome not in _NOTHING_MOVED:
            self.scene.dropped()  # whether the carton is still held is not known
        self.publish_scene()
        return res

    def on_park(self, _req: MoveArm.Request, res: MoveArm.Response) -> MoveArm.Response:
        """Tool-down Cartesian move to the photo park pose; a refusal carries code and cause."""
        return self._service_move(
            res, 'park', lambda: self.seq.park(self._map.map, self.park_pose)
        )

    def on_ready(self, _req: MoveArm.Request, res: MoveArm.Response) -> MoveArm.Response:
        """Empty arm to wait above the source (ready_pose); a refusal carries code and cause.
        OK without moving when this source has no ready pose."""
        pose = self.ready_pose
        if pose is None:
            return exec_result_to_msg(ExecResult(Outcome.OK), res)
        return self._service_move(res, 'ready', lambda: self.seq.hover(self._map.map, pose))

    def _service_move(
        self, res: MoveArm.Response, what: str, move: Callable[[], ExecResult]
    ) -> MoveArm.Response:
        """Run a MoveArm service's move unless a pick or place holds the arm; log it."""
        t0 = time.monotonic()
        if not self.busy.acquire(blocking=False):
            # The arm is not free to take the goal: the controller's part, as in _run.
            busy = 'a pick or place is running'
            return exec_result_to_msg(
                ExecResult(Outcome.CONTROLLER_FAILED, busy, controller_cause(None)), res
            )
        try:
            self._episode_boundary()
            out = move()
        finally:
            self.busy.release()
        exec_result_to_msg(out, res)
        self.get_logger().info(
            f'{what}: {out.outcome.value} ({out.message}); {time.monotonic() - t0:.2f} s wall, '
            f'{out.motion_s:.2f} s of motion'
        )
        return res


def main(args: list[str] | None = None) -> None:
    run_node(TrajectoryExecutorNode, args, threads=4)


if __name__ == '__main__':
    main()
