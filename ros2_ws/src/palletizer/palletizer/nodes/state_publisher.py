"""State publisher node: /robot_description and the arm's link TFs from /joint_states.

A small stand-in for robot_state_publisher (not installable from pip); on a ROS install the
real one can take its place with the same URDF.
"""

from __future__ import annotations

import dataclasses
import math
import time

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_ros import StaticTransformBroadcaster, TransformBroadcaster

from palletizer.core.config import load_config
from palletizer.core.description import (
    JOINTS,
    LINKS,
    link_transforms,
    robot_description,
    static_transforms,
)
from palletizer.core.motion import UR10eKinematics
from palletizer.nodes.params import declare
from palletizer.nodes.qos import LATCHED, SENSORS
from palletizer.nodes.spin import run_node
from palletizer.nodes.tf_util import transform_msg

__all__ = ['StatePublisherNode', 'main']


class StatePublisherNode(Node):
    def __init__(self) -> None:
        super().__init__('state_publisher')
        robot = load_config().cell.robot
        gripper = load_config().cell.gripper
        self.dh = dataclasses.asdict(robot.dh)
        text = robot_description(robot, gripper)
        self.create_publisher(String, '/robot_description', LATCHED).publish(String(data=text))
        self.tf = TransformBroadcaster(self)
        self.tf_static = StaticTransformBroadcaster(self)
        stamp = self.get_clock().now().to_msg()
        fixed = static_transforms(
            UR10eKinematics().T_world_base, gripper.tcp_offset, robot.pedestal.height
        )
        self.tf_static.sendTransform([transform_msg(stamp, *f) for f in fixed])
        # As robot_state_publisher's publish_frequency: joint states may come at 500 Hz (a UR
        # driver's); the link TFs go out at most this often, in the states' own time.
        rate = declare(
            self, 'publish_frequency', 50.0, 'link TFs at most this often [Hz, stamp time]'
        )
        self.min_dt = 1.0 / float(rate) if rate > 0 else 0.0
        self.last = -math.inf
        self.last_wall = -math.inf
        self.create_subscription(JointState, 'joint_states', self.on_joints, SENSORS)

    def on_joints(self, msg: JointState) -> None:
        pos = dict(zip(msg.name, msg.position, strict=False))
        if not all(j in pos for j in JOINTS):
            return
        t = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        now = time.monotonic()
        # Due when the states' time moved on by a period, when it went back (a new episode),
        # or when a period of wall time passed: a standing clock (a lockstep cell between
        # goals) still brings its TFs to a listener that joins late.
        due = not (self.last <= t < self.last + self.min_dt - 1e-9)
        if not due and now - self.last_wall < self.min_dt:
            return
        self.last, self.last_wall = t, now
        q = [pos[j] for j in JOINTS]
        tfs = [
            transform_msg(msg.header.stamp, LINKS[i], LINKS[i + 1], T)
            for i, T in enumerate(link_transforms(self.dh, q))
        ]
        self.tf.sendTransform(tfs)


def main(args: list[str] | None = None) -> None:
    run_node(StatePublisherNode, args)


if __name__ == '__main__':
    main()
