"""Trajectory executor node: the pick and place actions through FollowJointTrajectory and SetIO.

The node wires its parts: the arm over the UR driver's interfaces (nodes/executor_arm.py, with
the dashboard's recovery in nodes/executor_recovery.py), the goals and MoveArm services
(nodes/executor_goals.py), the streams it reads and MoveIt's view of the cell.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import WrenchStamped
from moveit_msgs.msg import DisplayTrajectory, PlanningScene
from palletizer_msgs.msg import HeightMap as HeightMapMsg
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from ur_msgs.msg import ToolDataMsg

from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry, floats3
from palletizer.core.errors import PalletizerError
from palletizer.core.motion import MotionParams, MotionPlanner
from palletizer.execution import ParkPose, PickPlaceSequencer, VerifyParams
from palletizer.execution.layout import arm_boxes, pick_rise, ready_pose, static_boxes
from palletizer.nodes.convert import heightmap_from_msg, stamp_s
from palletizer.nodes.executor_arm import ArmSettings, DriverArm, JointFeed
from palletizer.nodes.executor_goals import ExecutorGoals
from palletizer.nodes.executor_recovery import DashboardClient
from palletizer.nodes.moveit_view import CellScene, display_trajectory
from palletizer.nodes.params import declare
from palletizer.nodes.qos import LATCHED, SENSORS
from palletizer.nodes.spin import run_node

__all__ = ['TrajectoryExecutorNode', 'main']


class TrajectoryExecutorNode(Node):
    """Serves ~/pick and ~/place, and ~/park and ~/ready (MoveArm); the arm is reached only
    through the UR driver's interfaces."""

    def __init__(self) -> None:
        super().__init__('trajectory_executor')
        cfg = load_config()
        cell = cfg.cell

        action = declare(
            self, 'trajectory_action', 'follow_joint_trajectory', 'FJT action to drive'
        )
        io_srv = declare(self, 'set_io_service', 'set_io', 'ur_msgs/SetIO service of the vacuum')
        wrench = declare(self, 'wrench_topic', 'wrench', 'WrenchStamped at the flange [N, N m]')
        hm_topic = declare(
            self, 'heightmap_topic', '/palletizer/heightmap', 'latched pallet height map'
        )
        vac_topic = declare(
            self,
            'vacuum_level_topic',
            '/io_and_status_controller/tool_data',
            'ur_msgs/ToolDataMsg: the vacuum level on the tool analog input 2 [V]',
        )
        vac_held_min = float(
            declare(
                self,
                'vacuum_held_min_v',
                cell.gripper.vacuum_level.volts_held_min,
                'least vacuum level that counts as holding [V]',
            )
        )
        vac_fun = declare(self, 'vacuum_fun', cell.gripper.vacuum_io.fun, 'SetIO fun')
        vac_pin = declare(self, 'vacuum_pin', cell.gripper.vacuum_io.pin, 'SetIO pin')
        speed = float(declare(self, 'speed', 0.0, 'cell speed: 0 = fast-forward (no sim time)'))
        level = declare(
            self, 'level', cfg.default_level, 'level id: its source sets the static boxes'
        )
        verify = VerifyParams(
            min_payload_kg=declare(
                self, 'min_payload_kg', 0.2, 'smallest |F| change of a carton [kg]'
            ),
            noise_force_n=declare(
                self, 'wrench_noise_n', cell.wrench.noise_force_n, 'F noise per axis [N]'
            ),
        )
        dwell = declare(self, 'still_dwell_s', 0.1, 'hold at the end of each goal, averaged [s]')
        wrench_timeout = declare(self, 'wrench_timeout_s', 2.0, 'wait for the end sample [s]')
        margin = declare(
            self, 'goal_timeout_margin_s', 60.0, 'FJT result wait beyond duration [s]'
        )
        server_timeout = declare(self, 'server_timeout_s', 10.0, 'wait for FJT/SetIO servers [s]')
        max_recoveries = int(
            declare(
                self, 'max_recoveries', 2, 'protective stops or program stops recovered per goal'
            )
        )
        park = ParkPose()
        xyz = declare(
            self, 'park_xyz', [park.x, park.y, park.z], 'photo park TCP position, world [m]'
        )
        park_pose = ParkPose(
            *floats3(xyz), declare(self, 'park_yaw', park.yaw, 'photo park tool yaw [rad]')
        )
        ready = ready_pose(cfg, cfg.level(level).source) if level in cfg.levels else None
        use_ready = declare(
            self, 'ready', ready is not None, 'after each place, wait above the source (~/ready)'
        )
        ready_param = declare(
            self,
            'ready_pose',
            list(ready) if ready is not None else [0.0, 0.0, 0.0, 0.0],
            'x, y, z [m], yaw [rad] where the empty arm waits above the source',
        )
        if len(ready_param) != 4:
            raise PalletizerError(
                f'trajectory_executor: ready_pose:={list(ready_param)}; expected [x, y, z, yaw]'
            )
        waits: tuple[float, float, float, float] | None = None
        if use_ready:
            rx, ry, rz, ryaw = (float(v) for v in ready_param)
            waits = (rx, ry, rz, ryaw)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        if level not in cfg.levels:
            raise PalletizerError(
                f'trajectory_executor: level:={level}; expected one of {sorted(cfg.levels)}'
            )
        self.joints = cell.robot.joint_names
        self.settings = ArmSettings(
            joints=self.joints,
            action=action,
            io_service=io_srv,
            vac_fun=vac_fun,
            vac_pin=vac_pin,
            vac_held_min=vac_held_min,
            speed=speed,
            dwell=dwell,
            wrench_timeout=wrench_timeout,
            margin=margin,
            server_timeout=server_timeout,
            max_recoveries=max_recoveries,
            motion=MotionParams.from_config(cell),
        )

        # The action callbacks block on the FJT action and the SetIO service: their clients and
        # the streams sit in a reentrant group so other executor threads deliver the answers.
        # Goals keep one motion at a time with a lock (rclpy runs action execution outside the
        # groups).
        self.io = ReentrantCallbackGroup()
        self.actions = MutuallyExclusiveCallbackGroup()
        self.feed = JointFeed()
        # The arm through the UR driver's interfaces; the dashboard: what stopped a goal, and
        # the way back (execution/recovery.py).
        self.arm = DriverArm(
            self,
            self.settings,
            self.feed,
            DashboardClient(self, self.feed, server_timeout, self.io),
            lambda traj: self.path_pub.publish(display_trajectory(traj, self._joint_state())),
            self.io,
        )
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
        self.seq = PickPlaceSequencer(
            self.arm,
            planner=MotionPlanner(params=self.settings.motion),
            static_boxes=static_boxes(cfg, cfg.level(level).source),
            arm_boxes=arm_boxes(cfg, cfg.level(level).source),
            pick_rise=pick_rise(cfg, cfg.level(level).source),
            verify=verify,
            use_wrench=speed > 0,
        )
        self.goals = ExecutorGoals(
            self,
            self.seq,
            self.arm,
            self.feed,
            self.scene,
            self.publish_scene,
            server_timeout,
            park_pose,
            waits,
            self.actions,
        )
        self.get_logger().info(
            f'trajectory_executor ready: action {action}, SetIO {io_srv} fun {vac_fun} '
            f'pin {vac_pin}, wrench {wrench}, speed {speed}'
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
        self.feed.update(q, stamp_s(msg.header.stamp))

    def on_wrench(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self.arm.window.add(stamp_s(msg.header.stamp), (f.x, f.y, f.z))

    def on_tool_data(self, msg: ToolDataMsg) -> None:
        self.arm.vacuum.see(float(msg.analog_input2))

    def on_heightmap(self, msg: HeightMapMsg) -> None:
        try:
            hm = heightmap_from_msg(msg)
        except (PalletizerError, ValueError) as exc:
            self.get_logger().warn(f'height map ignored: {exc}')
            return
        self.goals.adopt(hm)

    def _joint_state(self) -> JointState:
        """The newest arm joint state (empty before the first one)."""
        q = self.feed.positions()
        msg = JointState(name=list(self.joints) if q is not None else [])
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.position = [] if q is None else [float(v) for v in q]
        return msg

    def publish_scene(self) -> None:
        self.scene_pub.publish(self.scene.message(self._joint_state()))


def main(args: list[str] | None = None) -> None:
    run_node(TrajectoryExecutorNode, args, threads=4)


if __name__ == '__main__':
    main()
