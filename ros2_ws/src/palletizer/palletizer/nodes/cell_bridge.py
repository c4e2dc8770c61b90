"""Cell bridge node: the MuJoCo cell behind the UR driver's interfaces, plus the cell services.

Two profiles (docs/real-cell.md): lockstep, where the world advances only inside goals and the
cell's own services (reset, present, release, settle, capture, ground truth, stability), and
hardware, where it runs on and offers only a real cell's interfaces (nodes/cell_hardware.py).

The node is the one owner of the simulated cell: its parameters, the cell, its lock and GL
thread, and the wiring of the parts that serve it, each under that lock: the streams
(nodes/cell_streams.py), the UR driver's trajectory action and SetIO (nodes/cell_control.py)
and the rest of its interfaces (nodes/ur_driver.py), the lockstep profile's own services
(nodes/cell_services.py) and the hardware profile's running world (nodes/cell_hardware.py).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import rclpy
from control_msgs.action import FollowJointTrajectory
from palletizer_msgs.srv import (
    Capture,
    GroundTruth,
    PresentCarton,
    ReleaseCarton,
    ResetCell,
    RunStability,
    Settle,
)
from rcl_interfaces.msg import SetParametersResult
from rclpy.action import ActionServer, CancelResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from ur_msgs.srv import SetIO

from palletizer.bridge import FjtRunner, camera_frames, steps_per_sample
from palletizer.bridge.scenario import Scenario
from palletizer.bridge.ur_status import UrStatus
from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry
from palletizer.core.errors import PalletizerError
from palletizer.core.loads import draw_load
from palletizer.nodes.cell_control import CellControl
from palletizer.nodes.cell_hardware import CameraPublisher, HardwareWorld
from palletizer.nodes.cell_params import declare_params, label_only_cameras
from palletizer.nodes.cell_services import LockstepServices, refusal
from palletizer.nodes.cell_streams import BURST, CellStreams, stamp
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

__all__ = ['CellBridgeNode', 'main']


class CellBridgeNode(Node):
    """Owns one Cell; physics advances only inside goals and the cell services (lockstep)."""

    driver: UrDriverInterfaces
    world_hw: HardwareWorld | None  # the hardware profile's running world

    def __init__(self) -> None:
        super().__init__('cell_bridge')
        self.cfg = load_config()
        cell_cfg = self.cfg.cell
        p = declare_params(self, self.cfg)
        level, seed, rtf, rate = p.level, p.seed, p.real_time_factor, p.camera_rate_hz
        self.speed, self.defaults, self.truth = p.speed, p.defaults, p.truth
        self.vac_fun, self.vac_pin = p.vac_fun, p.vac_pin
        self.profile, self.hardware, self.faults = p.profile, p.hardware, p.faults
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
        # A camera only the label reading uses streams on a level with labels only.
        quiet = () if self.cfg.level(level).labels else label_only_cameras(self.cfg)
        self.pallet_cams = [n for n, c in self.cameras.items() if c.role == 'pallet']
        self.options = CellOptions.from_config(cell_cfg)

        # Every world-touching callback is in one mutually exclusive group so two never
        # interleave; the lock also covers the FJT execute task, which rclpy runs outside any
        # group. Goal/cancel requests use a reentrant group so a cancel lands while a goal runs.
        self.world = MutuallyExclusiveCallbackGroup()
        self.control_group = ReentrantCallbackGroup()
        self.lock = threading.Lock()
        self.active_goal: ServerGoalHandle | None = None  # the FJT goal executing
        self.control = CellControl(self)  # the trajectory action, SetIO and the driver's I/O

        # MuJoCo's EGL contexts belong to the thread that made them current; executor threads
        # vary, so every render and every release of the renderers runs on this one thread
        # (else eglMakeCurrent fails with EGL_BAD_ACCESS on the second capture or reset).
        self._gl = ThreadPoolExecutor(max_workers=1, thread_name_prefix='cell_gl')
        self.cell = Cell(options=self.options)
        self.streams = CellStreams(
            self,
            self.cell,
            self.joints,
            p.wrench_topic,
            self.truth,
            self.hardware,
            steps_per_sample(float(cell_cfg.wrench.rate_hz), float(cell_cfg.physics.timestep)),
            publish_io=lambda: self.driver.publish_io(),
        )
        # Lockstep renders on request (~/capture), 32FC1 in metres; hardware streams the pallet
        # and pick cameras as realsense2_camera does, 16UC1 in millimetres.
        self.images = CameraPublisher(
            self,
            [
                n
                for n, c in self.cameras.items()
                if not self.hardware or (c.role != 'photo' and n not in quiet)
            ],
            p.topics,
            '16UC1' if self.hardware else '32FC1',
        )

        # The rest of the UR driver: status, I/O states, triggers and the dashboard.
        self.ur = UrStatus()
        self.ur.speed_scaling = p.speed_scaling
        self.driver = UrDriverInterfaces(
            self,
            self.ur,
            now=lambda: self.cell.time,
            zero_ft=self.control.zero_ft,
            outputs=self.control.outputs,
            inputs=lambda: set() if self.world_hw is None else self.world_hw.line.inputs(),
            vacuum_v=self.control.vacuum_volts,
            callback_group=self.world,
        )

        self.world_hw = (
            HardwareWorld(
                self,
                cell_cfg.hardware,
                lock=self.lock,
                stepping_goal=lambda: self.active_goal is not None,
                render=self.render,
                stamp=lambda: stamp(self.cell.time),
                cameras=self.images,
                rtf=rtf,
                camera_rate_hz=rate,
                scenario=Scenario(
                    int(level),
                    int(seed),
                    PalletGeometry.from_config(cell_cfg.pallet),
                    cell_cfg.episode.tolerance.xy,
                    cell_cfg.episode.tolerance.yaw,
                    Path(p.scenario_file) if p.scenario_file else None,
                ),
                reset_world=self._scenario_reset,
            )
            if self.hardware
            else None
        )
        err = self.reset_cell(int(level), int(seed))
        if err:
            raise PalletizerError(f'cell_bridge: level:={level}: {err}')

        ws = self.world
        self.lockstep = LockstepServices(self)
        sim = self.lockstep
        for kind, name, handler in (
            (ResetCell, '~/reset', sim.on_reset),
            (PresentCarton, '~/present', sim.on_present),
            (ReleaseCarton, '~/release', sim.on_release),
            (Settle, '~/settle', sim.on_settle),
            (Capture, '~/capture', sim.on_capture),
            (RunStability, '~/run_stability', sim.on_stability),
            (GroundTruth, '~/ground_truth', sim.on_ground_truth),
        ):
            # The hardware profile serves them only to refuse, by name, and be counted.
            serve = handler if self.world_hw is None else refusal(self.world_hw, name)
            self.create_service(kind, name, serve, callback_group=ws)
        self.create_service(SetIO, p.io_service, self.control.on_set_io, callback_group=ws)
        if self.world_hw is None:
            # A robot driver streams its joint states whether or not anything moves; so does
            # the cell while idle (fast-forward steps only on calls), so a late subscriber such
            # as the trajectory executor gets one before its first goal. Sim time stands still.
            self.create_timer(0.2, self._idle_state, callback_group=ws)
        self.action = ActionServer(
            self,
            FollowJointTrajectory,
            p.action,
            execute_callback=quiet_at_stop(
                self,
                self.control.execute,
                lambda: FollowJointTrajectory.Result(error_string='the cell bridge stopped'),
            ),
            goal_callback=self.control.on_goal,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT,
            callback_group=self.control_group,
            # A goal's feedback comes in bursts (every 20 ms tick of sim time, faster than real
            # time): keep enough history that a reliable reader gets every tick.
            feedback_pub_qos_profile=BURST,
        )
        if self.world_hw is not None:
            self.world_hw.start()
        self.get_logger().info(
            f'cell_bridge ready: level {level} seed {seed} speed {self.speed} '
            f'({"fast-forward" if self.speed == 0 else "servo-tracked"}), action {p.action}, '
            f'profile {self.profile}, speed scaling {100 * self.ur.speed_scaling:.0f} %'
            + (f' (real-time factor {rtf}, cameras at {rate} Hz)' if self.hardware else '')
        )

    def _scenario_reset(self, seed: int) -> None:
        """The scenario lays out the next load (called in the world thread, lock held)."""
        err = self.reset_cell(self.level.id, seed)
        if err:
            raise PalletizerError(f'scenario reset to seed {seed}: {err}')

    def render(self, names: list[str]) -> dict[str, Frame]:
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
    def reset_cell(self, level: int, seed: int) -> str:
        """Lay out (level, seed) with the arm home and the vacuum off; '' or why not."""
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
        self.streams.attach()
        if self.world_hw is not None:
            self.world_hw.attach(self.cell)
        self.vac_on = False
        self.streams.publish_static(camera_frames(self.cell, self.cameras))
        self.streams.publish_state()
        return ''

    def _idle_state(self) -> None:
        """Clock, joint states and TF again when no call or goal is using the world."""
        if self.active_goal is not None or not self.lock.acquire(blocking=False):
            return
        try:
            self.streams.publish_kinematics()
        finally:
            self.lock.release()


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
