"""Cell bridge node: the MuJoCo cell behind the UR driver's interfaces, plus the cell services.

Two profiles (docs/real-cell.md): lockstep, where the world advances only inside goals and the
cell's own services (reset, present, release, settle, capture, ground truth, stability), and
hardware, where it runs on and offers only a real cell's interfaces (nodes/cell_hardware.py).

Why a node of this length (the style guide asks about 300 lines): it is the one owner of the
simulated cell, so it serves the UR driver's action, SetIO and streams and the cell's own
services under one lock; each handler only converts messages and calls sim/ or bridge/.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import rclpy
from builtin_interfaces.msg import Time
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from geometry_msgs.msg import Pose, TransformStamped, WrenchStamped
from palletizer_msgs.msg import CartonTruth, SourceState
from palletizer_msgs.srv import (
    Capture,
    GroundTruth,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
)
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from tf2_ros import StaticTransformBroadcaster, TransformBroadcaster
from trajectory_msgs.msg import JointTrajectoryPoint
from ur_msgs.srv import SetIO

from palletizer.bridge import (
    FjtDefaults,
    FjtRunner,
    FjtStatus,
    FramePose,
    StepStream,
    Tick,
    camera_frames,
    carton_records,
    cell_frames,
    steps_per_sample,
)
from palletizer.bridge.faults import FaultPlan, parse_faults
from palletizer.bridge.scenario import Scenario
from palletizer.bridge.ur_status import UrStatus
from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry
from palletizer.core.errors import PalletizerError
from palletizer.core.jtc import INVALID_GOAL, PATH_TOLERANCE_VIOLATED, GoalError
from palletizer.core.loads import draw_load
from palletizer.nodes.cell_hardware import PROFILES, CameraPublisher, HardwareWorld
from palletizer.nodes.spin import (
    destroy_within,
    exit_now,
    init,
    quiet_at_stop,
    spin_until_shutdown,
    start,
)
from palletizer.nodes.ur_driver import UrDriverInterfaces
from palletizer.sim.cameras import Frame
from palletizer.sim.cell import Cell, CellOptions
from palletizer.sim.stability import StabilityProtocol

__all__ = ['CellBridgeNode', 'main']

# Reliable, like the UR driver's broadcasters: a reliable writer matches reliable and
# best-effort readers alike, and a 1.2 MB image survives fragmentation.
STREAM = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# The world advances in bursts (0.7 s of sim time can take 20 ms of wall time): the writer keeps
# enough history that a reliable reader gets every sample of a burst: the wrist gauge averages
# the last 600 wrench samples of a 1.5 s hold at 500 Hz; 1000 keeps 2 s.
BURST = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
TF = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)


def _stamp(t: float) -> Time:
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _tol(items: Iterable[JointTolerance]) -> list[tuple[str, float, float, float]]:
    return [(j.name, j.position, j.velocity, j.acceleration) for j in items]


def _point(q: np.ndarray, qd: np.ndarray) -> JointTrajectoryPoint:
    return JointTrajectoryPoint(positions=[float(v) for v in q], velocities=[float(v) for v in qd])


class CellBridgeNode(Node):
    """Owns one Cell; physics advances only inside goals and the cell services (lockstep)."""

    def __init__(self) -> None:
        super().__init__('cell_bridge')
        self.cfg = load_config()
        cell_cfg = self.cfg.cell
        vac = cell_cfg.gripper.vacuum_io

        def param(name: str, default: Any, text: str) -> Any:
            return self.declare_parameter(
                name, default, ParameterDescriptor(description=text)
            ).value

        level = param('level', self.cfg.default_level, 'level id at start (see levels.yaml)')
        seed = param('seed', 0, 'load seed at start')
        self.speed = float(param('speed', 0.0, '0 = fast-forward goals, > 0 = servo-tracked'))
        action = param('trajectory_action', 'follow_joint_trajectory', 'FJT action name')
        io_srv = param('set_io_service', 'set_io', 'ur_msgs/SetIO service name')
        wrench = param('wrench_topic', 'wrench', 'WrenchStamped topic, flange frame [N, N m]')
        self.vac_fun = param('vacuum_fun', vac.fun, 'SetIO fun that switches the vacuum')
        self.vac_pin = param('vacuum_pin', vac.pin, 'SetIO pin that switches the vacuum')
        d = FjtDefaults()
        self.defaults = FjtDefaults(
            param('path_tolerance', d.path_position, 'default path tolerance [rad]'),
            param('goal_tolerance', d.goal_position, 'default goal tolerance [rad]'),
            param('goal_time_tolerance', d.goal_time, 'default goal time tolerance [s]'),
            param('stopped_velocity_tolerance', d.stopped_velocity, 'end at rest [rad/s]'),
        )
        self.truth = param('publish_truth', True, 'truth/<id> carton TFs (visualisation only)')
        self.profile = param('profile', 'lockstep', 'lockstep | hardware (docs/real-cell.md)')
        hw = cell_cfg.hardware
        rtf = float(param('real_time_factor', hw.real_time_factor, 'hardware: sim s per wall s'))
        rate = float(param('camera_rate_hz', hw.camera_rate_hz, 'hardware: frames per sim s'))
        topics = {
            k: param(f'{k}_topic', f'/cameras/{{camera}}/{v}', f'{k} topic of camera {{camera}}')
            for k, v in (('depth', 'depth/image_raw'), ('color', 'color/image_raw'))
        }
        topics['info'] = param('info_topic', '/cameras/{camera}/camera_info', 'CameraInfo topic')
        scenario_file = param(
            'scenario_file', '', "hardware: append the scenario referee's episode lines here"
        )
        if self.profile not in PROFILES:
            raise PalletizerError(
                f'cell_bridge: profile:={self.profile!r}; expected one of {", ".join(PROFILES)}'
            )
        self.hardware = self.profile == 'hardware'
        if self.hardware and self.speed == 0:
            raise PalletizerError(
                'cell_bridge: profile:=hardware runs the world on in real time, so goals are '
                'servo-tracked: speed:=0 (fast-forward) is for the lockstep profile; use speed > 0'
            )
        slider = float(
            param('speed_scaling', 1.0, "the pendant's speed slider, 0.01-1: goals run slower")
        )
        if not 0.01 <= slider <= 1.0:
            raise PalletizerError(
                f'cell_bridge: speed_scaling:={slider}; expected 0.01 to 1 (1 = full speed)'
            )
        fault_specs = str(
            param('faults', '', 'hardware: injected faults, kind@goal[:share],... (bridge/faults)')
        )
        self.faults = FaultPlan(parse_faults(fault_specs.split(',')))
        if self.faults.faults and not self.hardware:
            raise PalletizerError(
                f'cell_bridge: faults:={fault_specs!r} are injected in profile:=hardware only '
                '(the lockstep profile is the deterministic one)'
            )
        # Parameters are declared above: from here on a change is refused (read at start).
        self.add_on_set_parameters_callback(self._on_set_parameters)

        robot = cell_cfg.robot
        self.joints = robot.joint_names
        self.limits = (robot.joint_lower, robot.joint_upper)
        self.speed_limits = [float(v) for v in np.deg2rad(robot.joint_speed_limits_deg_s)]
        cams = cell_cfg.cameras
        # 'photo' cameras (the side view) render only on request, for the per-layer snapshots.
        roles = ('pallet', 'pick', 'photo')
        self.cameras = {n: c for n, c in cams.items() if c.role in roles}
        self.pallet_cams = [n for n, c in self.cameras.items() if c.role == 'pallet']
        self.options = CellOptions.from_config(cell_cfg)

        # Every world-touching callback is in one mutually exclusive group so two never
        # interleave; the lock also covers the FJT execute task, which rclpy runs outside any
        # group. Goal/cancel requests use a reentrant group so a cancel lands while a goal runs.
        self.world = MutuallyExclusiveCallbackGroup()
        self.control = ReentrantCallbackGroup()
        self.lock = threading.Lock()
        self.active_goal: ServerGoalHandle | None = None  # the FJT goal executing

        self.clock_pub = self.create_publisher(Clock, '/clock', STREAM)
        self.js_pub = self.create_publisher(JointState, 'joint_states', BURST)
        self.wrench_pub = self.create_publisher(WrenchStamped, wrench, BURST)
        self.tf_pub = TransformBroadcaster(self, qos=TF)
        self.tf_static_pub = StaticTransformBroadcaster(self)
        # Lockstep renders on request (~/capture), 32FC1 in metres; hardware streams the pallet
        # and pick cameras as realsense2_camera does, 16UC1 in millimetres.
        self.images = CameraPublisher(
            self,
            [n for n, c in self.cameras.items() if not self.hardware or c.role != 'photo'],
            topics,
            '16UC1' if self.hardware else '32FC1',
        )
        self.stream = StepStream(self._publish_kinematics, every=10)  # 50 Hz of sim time at 2 ms
        # A UR driver's joint_state_broadcaster runs at 500 Hz: every step in the hardware profile.
        self.joint_stream = StepStream(self._publish_joints, every=1)
        # The wrench streams faster (cell.yaml wrench.rate_hz), as a UR driver's does: a
        # reading held still averages more samples in less time.
        self.wrench_stream = StepStream(
            self._publish_wrench,
            every=steps_per_sample(
                float(cell_cfg.wrench.rate_hz), float(cell_cfg.physics.timestep)
            ),
        )

        # The rest of the UR driver: status, I/O states, triggers and the dashboard.
        self.ur = UrStatus()
        self.ur.speed_scaling = slider
        self.driver = UrDriverInterfaces(
            self,
            self.ur,
            now=lambda: self.cell.time,
            zero_ft=self._zero_ft,
            outputs=lambda: ({self.vac_pin} if self.vac_on else set()) | self._line_outputs(),
            inputs=lambda: set() if self.world_hw is None else self.world_hw.line.inputs(),
            vacuum_v=self._vacuum_volts,
            callback_group=self.world,
        )

        # MuJoCo's EGL contexts belong to the thread that made them current; executor threads
        # vary, so every render and every release of the renderers runs on this one thread
        # (else eglMakeCurrent fails with EGL_BAD_ACCESS on the second capture or reset).
        self._gl = ThreadPoolExecutor(max_workers=1, thread_name_prefix='cell_gl')
        self.cell = Cell(options=self.options)
        self.world_hw = (
            HardwareWorld(
                self,
                hw,
                lock=self.lock,
                stepping_goal=lambda: self.active_goal is not None,
                render=self._render,
                stamp=lambda: _stamp(self.cell.time),
                cameras=self.images,
                rtf=rtf,
                camera_rate_hz=rate,
                scenario=Scenario(
                    int(level),
                    int(seed),
                    PalletGeometry.from_config(cell_cfg.pallet),
                    cell_cfg.episode.tolerance.xy,
                    cell_cfg.episode.tolerance.yaw,
                    Path(scenario_file) if scenario_file else None,
                ),
                reset_world=self._scenario_reset,
            )
            if self.hardware
            else None
        )
        err = self._reset(int(level), int(seed))
        if err:
            raise PalletizerError(f'cell_bridge: level:={level}: {err}')

        ws = self.world
        for kind, name, handler in (
            (ResetCell, '~/reset', self.on_reset),
            (PresentCarton, '~/present', self.on_present),
            (ReleaseCarton, '~/release', self.on_release),
            (Settle, '~/settle', self.on_settle),
            (Capture, '~/capture', self.on_capture),
            (RunStability, '~/run_stability', self.on_stability),
            (GroundTruth, '~/ground_truth', self.on_ground_truth),
        ):
            # The hardware profile serves them only to refuse, by name, and be counted.
            serve = handler if self.world_hw is None else self._refusal(name)
            self.create_service(kind, name, serve, callback_group=ws)
        self.create_service(SetIO, io_srv, self.on_set_io, callback_group=ws)
        if self.world_hw is None:
            # A robot driver streams its joint states whether or not anything moves; so does
            # the cell while idle (fast-forward steps only on calls), so a late subscriber such
            # as the trajectory executor gets one before its first goal. Sim time stands still.
            self.create_timer(0.2, self._idle_state, callback_group=ws)
        self.action = ActionServer(
            self,
            FollowJointTrajectory,
            action,
            execute_callback=quiet_at_stop(
                self,
                self._execute,
                lambda: FollowJointTrajectory.Result(error_string='the cell bridge stopped'),
            ),
            goal_callback=self.on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self.control,
            # A goal's feedback comes in bursts (every 20 ms tick of sim time, faster than real
            # time): keep enough history that a reliable reader gets every tick.
            feedback_pub_qos_profile=BURST,
        )
        if self.world_hw is not None:
            self.world_hw.start()
        self.get_logger().info(
            f'cell_bridge ready: level {level} seed {seed} speed {self.speed} '
            f'({"fast-forward" if self.speed == 0 else "servo-tracked"}), action {action}, '
            f'profile {self.profile}, speed scaling {100 * self.ur.speed_scaling:.0f} %'
            + (f' (real-time factor {rtf}, cameras at {rate} Hz)' if self.hardware else '')
        )

    def _refusal(self, name: str) -> Callable[[Any, Any], Any]:
        world = self.world_hw
        assert world is not None
        return lambda _req, res: world.refuse(f'/cell_bridge/{name[2:]}', res)

    def _scenario_reset(self, seed: int) -> None:
        """The scenario lays out the next load (called in the world thread, lock held)."""
        err = self._reset(self.level.id, seed)
        if err:
            raise PalletizerError(f'scenario reset to seed {seed}: {err}')

    def _line_outputs(self) -> set[int]:
        return set() if self.world_hw is None else self.world_hw.line.outputs()

    def _render(self, names: list[str]) -> dict[str, Frame]:
        """Frames of the named cameras now, rendered on the GL thread."""
        frames: dict[str, Frame] = {}
        for n in names:
            w, h = self.cameras[n].size
            frames.update(self._gl.submit(self.cell.capture, [n], w, h).result())
        return frames

    def _on_set_parameters(self, params: list[Parameter]) -> SetParametersResult:
        for p in params:
            if p.name != 'use_sim_time':
                return SetParametersResult(
                    successful=False,
                    reason=f'{p.name} is read once at start; use ~/reset or restart the node',
                )
        return SetParametersResult(successful=True)

    def destroy_node(self) -> None:
        if self.world_hw is not None:
            self.world_hw.stop()
        self._gl.submit(self.cell.close).result()
        self._gl.shutdown()
        super().destroy_node()

    # World -----------------------------------------------------------------------------------
    def _reset(self, level: int, seed: int) -> str:
        if level not in self.cfg.levels:
            return f'level {level} does not exist; valid levels: {sorted(self.cfg.levels)}'
        self.level = self.cfg.level(level)
        self._gl.submit(self.cell.close).result()  # the renderers, on their own thread
        self.cell.reset(self.level, seed)
        self.draws = {d.package_id: d for d in draw_load(level, seed, self.cfg)}
        self.presented: str | None = None
        self.fjt = FjtRunner(
            self.cell,
            self.joints,
            *self.limits,
            self.speed_limits,
            self.defaults,
            self.speed,
            scaling=lambda: self.ur.speed_scaling,
        )
        self.stream.attach(self.cell)
        self.wrench_stream.attach(self.cell)
        if self.world_hw is not None:
            self.joint_stream.attach(self.cell)
            self.world_hw.attach(self.cell)
        self.vac_on = False
        self.tf_static_pub.sendTransform(self._transforms(camera_frames(self.cell, self.cameras)))
        self.publish_state()
        return ''

    def _transforms(self, frames: Iterable[FramePose]) -> list[TransformStamped]:
        stamp = _stamp(self.cell.time)
        out = []
        for f in frames:
            t = TransformStamped()
            t.header.stamp, t.header.frame_id, t.child_frame_id = stamp, f.parent, f.child
            tr, r = t.transform.translation, t.transform.rotation
            tr.x, tr.y, tr.z = (float(v) for v in f.pos)
            r.w, r.x, r.y, r.z = (float(v) for v in f.quat)
            out.append(t)
        return out

    def publish_state(self) -> None:
        """Clock, joint states, wrench and TF at the current sim time."""
        self._publish_kinematics()
        self._publish_wrench()

    def _idle_state(self) -> None:
        """Clock, joint states and TF again when no call or goal is using the world."""
        if self.active_goal is not None or not self.lock.acquire(blocking=False):
            return
        try:
            self._publish_kinematics()
        finally:
            self.lock.release()

    def _publish_kinematics(self) -> None:
        """Clock, joint states (unless they stream on their own) and TF at the current sim time."""
        cell = self.cell
        self.clock_pub.publish(Clock(clock=_stamp(cell.time)))
        if self.world_hw is None:
            self._publish_joints()
        self.tf_pub.sendTransform(self._transforms(cell_frames(cell, self.truth)))
        self.driver.publish_io()

    def _publish_joints(self) -> None:
        q, qd, tau = self.cell.joint_state()
        js = JointState(name=list(self.joints))
        js.header.stamp = _stamp(self.cell.time)
        js.position, js.velocity, js.effort = q.tolist(), qd.tolist(), tau.tolist()
        self.js_pub.publish(js)

    def _publish_wrench(self) -> None:
        """The wrist wrench at the current sim time, in tool0 (as the UR driver publishes it)."""
        w = self.cell.wrench()
        msg = WrenchStamped()
        msg.header.stamp, msg.header.frame_id = _stamp(self.cell.time), 'tool0'
        f, t = msg.wrench.force, msg.wrench.torque
        f.x, f.y, f.z = (float(v) for v in w.force)
        t.x, t.y, t.z = (float(v) for v in w.torque)
        self.wrench_pub.publish(msg)

    # Control interfaces ----------------------------------------------------------------------
    def on_goal(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        # One goal at a time; a second is refused rather than silently queued behind the first.
        if self.active_goal is not None:
            return GoalResponse.REJECT
        # As the driver's controller: no motion while stopped or without the program.
        refused = self.ur.motion_refused()
        if refused:
            self.get_logger().warning(f'trajectory goal refused: {refused}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _vacuum_volts(self) -> float:
        """The vacuum level on the tool analog input 2 [V] (cell.yaml gripper.vacuum_level)."""
        sealed = self.cell.suction.held is not None
        return self.cfg.cell.gripper.vacuum_level.volts_sealed if sealed else 0.0

    def _zero_ft(self) -> None:
        with self.lock:
            self.cell.zero_wrench()

    def _execute(self, handle: ServerGoalHandle) -> FollowJointTrajectory.Result:
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
        fb = FollowJointTrajectory.Feedback(joint_names=list(self.joints))

        def on_tick(tick: Tick) -> None:
            fb.header.stamp = _stamp(self.cell.time)
            fb.desired = _point(tick.desired_q, tick.desired_qd)
            fb.actual = _point(tick.actual_q, tick.actual_qd)
            fb.error = _point(tick.error_q, tick.error_qd)
            handle.publish_feedback(fb)

        with self.lock:
            self.active_goal = handle
            try:
                prepared = self.fjt.prepare(
                    goal.trajectory.joint_names,
                    points,
                    _tol(goal.path_tolerance),
                    _tol(goal.goal_tolerance),
                    gt.sec + gt.nanosec * 1e-9,
                )
                self.faults.begin_goal(self.cell.suction.held is not None)
                out = self.fjt.execute(
                    prepared, on_tick, lambda: handle.is_cancel_requested, self._fault
                )
                if self.hardware and out.error_code == PATH_TOLERANCE_VIOLATED:
                    # Held back on its path: the arm struck something, and a UR's controller
                    # stops it with a protective stop.
                    self.ur.protective_stop(self.cell.time)
                    self.driver.publish_status()
                    out = dataclasses.replace(
                        out, error_string=f'protective stop: {out.error_string}'
                    )
            except GoalError as exc:
                res.error_code, res.error_string = exc.code, str(exc)
                handle.abort()
                return res
            finally:
                self.active_goal = None
                self.publish_state()
        res.error_code, res.error_string = out.error_code, out.error_string
        {FjtStatus.succeeded: handle.succeed, FjtStatus.aborted: handle.abort}.get(
            out.status, handle.canceled
        )()
        return res

    def _fault(self, share: float) -> tuple[int, str] | None:
        """The injected fault due at this share of the running goal (bridge/faults.py): the
        controller's stops abort the goal as the driver's controller does; a lost vacuum
        drops the carton and the arm moves on."""
        f = self.faults.due(share)
        if f is None:
            return None
        self.get_logger().warning(f'injected fault: {f.kind} at {share:.0%} of goal {f.goal}')
        if f.kind == 'vacuum_loss':
            self.cell.set_vacuum(False)  # the output stays on; the seal is gone
            return None
        if f.kind == 'protective_stop':
            self.ur.protective_stop(self.cell.time)
        else:
            self.ur.stop()
        self.driver.publish_status()
        return INVALID_GOAL, f'goal aborted: {self.ur.motion_refused()}'

    def on_set_io(self, req: SetIO.Request, res: SetIO.Response) -> SetIO.Response:
        line = None if self.world_hw is None else self.world_hw.line
        if line is not None and req.fun == SetIO.Request.FUN_SET_DIGITAL_OUT:
            with self.lock:
                if line.set_output(req.pin, req.state >= 0.5):
                    self.driver.publish_io()
                    res.success = True
                    return res
        if req.fun != self.vac_fun or req.pin != self.vac_pin:
            wired = f'fun={self.vac_fun} pin={self.vac_pin} (the vacuum)'
            if line is not None:
                wired += f" and fun=1 pin={line.io.request_out} (the line's request)"
            self.get_logger().warn(f'SetIO fun={req.fun} pin={req.pin} refused; only {wired}')
            res.success = False
            return res
        with self.lock:
            self.vac_on = req.state >= 0.5
            self.cell.set_vacuum(self.vac_on)
            self.publish_state()
        res.success = True
        return res

    # Cell services ---------------------------------------------------------------------------
    def on_reset(self, req: ResetCell.Request, res: ResetCell.Response) -> ResetCell.Response:
        with self.lock:
            err = self._reset(req.level, req.seed)
        if err:
            res.error_code, res.error_msg = ResetCell.Response.UNKNOWN_LEVEL, err
            res.stamp = _stamp(self.cell.time)
            return res
        res.n_cartons, res.source = len(self.cell.carton_indices()), self.level.source
        res.stamp = _stamp(self.cell.time)
        return res

    def on_present(
        self, req: PresentCarton.Request, res: PresentCarton.Response
    ) -> PresentCarton.Response:
        with self.lock:
            got = self.cell.present()
            st = self.cell.source.state()
            res.forecast = list(self.cell.source.forecast())
            self.publish_state()
        res.state = SourceState(
            source=st.kind,
            pending=st.pending,
            exhausted=st.exhausted,
            jammed=st.jammed,
            extras_json=json.dumps(dict(st.extras)),
        )
        if got is None:
            R = PresentCarton.Response
            res.error_code = R.JAMMED if st.jammed else R.EXHAUSTED
            res.error_msg = 'a carton never came to rest' if st.jammed else 'nothing left'
            res.stamp = _stamp(self.cell.time)
            return res
        self.presented = res.package_id = got.package_id
        res.stamp = _stamp(self.cell.time)
        return res

    def on_release(
        self, req: ReleaseCarton.Request, res: ReleaseCarton.Response
    ) -> ReleaseCarton.Response:
        if req.package_id != self.presented:
            res.error_code = ReleaseCarton.Response.NOT_PRESENTED
            res.error_msg = f'package_id {req.package_id!r}; presented: {self.presented!r}'
            res.stamp = _stamp(self.cell.time)
            return res
        with self.lock:
            self.cell.release(req.package_id)
            self.presented = None
        res.stamp = _stamp(self.cell.time)
        return res

    def on_settle(self, req: Settle.Request, res: Settle.Response) -> Settle.Response:
        if not (0.0 <= req.duration <= 600.0):  # NaN fails the comparison too
            res.error_code = Settle.Response.INVALID_REQUEST
            res.error_msg = f'duration = {req.duration} s; expected 0 to 600 s of sim time'
            res.stamp = _stamp(self.cell.time)
            return res
        with self.lock:
            self.cell.settle(req.duration)
            self.publish_state()
            speeds = [
                float(np.linalg.norm(self.cell.data.qvel[a : a + 3]))
                for a in (
                    self.cell.model.joint(f'package_joint_{i}').dofadr[0]
                    for i in self.cell.carton_indices()
                )
            ]
        res.max_speed = max(speeds, default=0.0)
        res.stamp = _stamp(self.cell.time)
        return res

    def on_capture(self, req: Capture.Request, res: Capture.Response) -> Capture.Response:
        names = list(req.cameras) or self.pallet_cams
        bad = [n for n in names if n not in self.cameras]
        if bad:
            res.error_code = Capture.Response.UNKNOWN_CAMERA
            res.error_msg = f'camera {bad[0]!r}; valid cameras: {", ".join(self.cameras)}'
            return res
        with self.lock:
            # The joint state of the capture instant: depth fusion filters the arm out with it.
            self._publish_kinematics()
            frames = self._render(names)
            res.stamp = _stamp(self.cell.time)
            q, _, _ = self.cell.joint_state()
            res.joint_names, res.joint_positions = list(self.joints), q.tolist()
        self.images.publish(frames, res.stamp)
        return res

    def on_stability(
        self, req: RunStability.Request, res: RunStability.Response
    ) -> RunStability.Response:
        R = RunStability.Response
        if not (req.jolts or req.beam or req.eumos):
            res.error_code = R.INVALID_REQUEST
            res.error_msg = 'no trial selected: set jolts, beam or eumos'
            return res
        proto = StabilityProtocol.from_config(
            self.cfg.stability, jolts=req.jolts, beam=req.beam, eumos=req.eumos
        )
        try:
            with self.lock:
                held = self.cell.suction.held
                if held is None:
                    report = self.cell.stability_trials(proto)
                    self.publish_state()
        except PalletizerError as exc:
            res.error_code, res.error_msg = R.TRIALS_FAILED, str(exc)
            return res
        if held is not None:
            res.error_code = R.CARTON_HELD
            res.error_msg = (
                f'carton {self.cell.package_id(held)!r} is on the cups; place or release it '
                'before the stability trials'
            )
            return res
        res.held_all = all(t.held for t in report.trials)
        res.summary_json = json.dumps(report.summary, default=float)
        res.detail_json = json.dumps([dataclasses.asdict(t) for t in report.trials], default=float)
        return res

    def on_ground_truth(
        self, req: GroundTruth.Request, res: GroundTruth.Response
    ) -> GroundTruth.Response:
        with self.lock:
            gt = self.cell.ground_truth()
        res.stamp = _stamp(gt.time)
        for c in carton_records(gt, self.draws):
            pose = Pose()
            pose.position.x, pose.position.y, pose.position.z = (float(v) for v in c.pos)
            o = pose.orientation
            o.w, o.x, o.y, o.z = (float(v) for v in c.quat)
            res.cartons.append(
                CartonTruth(
                    package_id=c.package_id,
                    type_name=c.type_name,
                    pose=pose,
                    dims_m=list(c.dims),
                    mass_kg=c.mass,
                    cog_offset_m=list(c.cog_offset),
                )
            )
        p = res.pallet
        p.position.x, p.position.y, p.position.z = (float(v) for v in gt.pallet_pos)
        p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z = (
            float(v) for v in gt.pallet_quat
        )
        res.held_package_id = gt.held or ''
        return res


def main(args: list[str] | None = None) -> None:
    init(args)  # Ctrl-C stops the node like SIGTERM: no KeyboardInterrupt
    node = None
    try:
        node = start(CellBridgeNode)
        # Multi-threaded so a cancel request is served while a goal's execute task runs.
        executor = start(lambda: MultiThreadedExecutor(num_threads=4))
        executor.add_node(node)
        spin_until_shutdown(executor)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            destroy_within(node)  # closes the renderers on their own GL thread
        rclpy.try_shutdown()
    exit_now(0)  # a stop: skip the interpreter's finalization (nodes/spin.py)


if __name__ == '__main__':
    main()
