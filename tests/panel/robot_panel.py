"""Run inside a network namespace: the panel server, its live view observing this ROS domain, and
a publisher of a small URDF with visuals (FIXTURE_URDF), its root link's pose on /tf_static and
/joint_states (20 Hz, the positions of the last JSON object read from stdin).

Usage: robot_panel.py PORT TOKEN WORKDIR; prints 'palletizer panel on ...' once it serves.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import rclpy
import uvicorn
from geometry_msgs.msg import TransformStamped
from palletizer.nodes.qos import LATCHED, SENSORS, STATIC_TF
from palletizer.panel.observer import LiveState, Observer
from palletizer.panel.runner import RunManager
from palletizer.panel.server import PanelConfig, create_app
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

# A turret on a base: j1 turns the column about z, a fixed joint carries the arm along x and j3
# tilts the tip about y; `tool` (no visual) sits 0.1 m beyond the tip. Four visuals, in red, one
# of each primitive and one through a named top-level material.
FIXTURE_URDF = """<?xml version="1.0"?>
<robot name="turret">
  <material name="red"><color rgba="0.9 0.05 0.05 1"/></material>
  <link name="base_link">
    <visual><origin xyz="0 0 0.05"/><geometry><box size="0.3 0.3 0.1"/></geometry>
      <material name="red"/></visual>
  </link>
  <link name="column">
    <visual><origin xyz="0 0 0.3"/><geometry><cylinder radius="0.06" length="0.6"/></geometry>
      <material name="inline"><color rgba="0.9 0.05 0.05 1"/></material></visual>
  </link>
  <link name="arm">
    <visual><origin xyz="0.25 0 0" rpy="0 0 0"/><geometry><box size="0.5 0.08 0.08"/></geometry>
      <material name="red"/></visual>
  </link>
  <link name="tip">
    <visual><geometry><sphere radius="0.05"/></geometry><material name="red"/></visual>
  </link>
  <link name="tool"/>
  <joint name="j1" type="revolute"><parent link="base_link"/><child link="column"/>
    <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/>
    <limit lower="-3.14" upper="3.14" velocity="1" effort="1"/></joint>
  <joint name="j2" type="fixed"><parent link="column"/><child link="arm"/>
    <origin xyz="0 0 0.6"/></joint>
  <joint name="j3" type="revolute"><parent link="arm"/><child link="tip"/>
    <origin xyz="0.5 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-3.14" upper="3.14" velocity="1" effort="1"/></joint>
  <joint name="j4" type="fixed"><parent link="tip"/><child link="tool"/>
    <origin xyz="0.1 0 0"/></joint>
</robot>
"""
N_VISUALS = 4
N_LINKS = 5
BASE_IN_WORLD = (0.6, -0.72, 0.48)  # [m] where /tf_static puts base_link, as the cell's arm


def main() -> None:
    port, token, work = int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    domain = int(os.environ['ROS_DOMAIN_ID'])
    rclpy.init(domain_id=domain)
    node = rclpy.create_node('robot_fixture')
    node.create_publisher(String, '/robot_description', LATCHED).publish(String(data=FIXTURE_URDF))
    tf = TransformStamped()
    tf.header.frame_id, tf.child_frame_id = 'world', 'base_link'
    tf.transform.translation.x, tf.transform.translation.y, tf.transform.translation.z = (
        BASE_IN_WORLD
    )
    tf.transform.rotation.w = 1.0
    node.create_publisher(TFMessage, '/tf_static', STATIC_TF).publish(TFMessage(transforms=[tf]))
    joints_pub = node.create_publisher(JointState, '/joint_states', SENSORS)
    positions = {'j1': 0.0, 'j3': 0.0}

    def publish() -> None:
        joints_pub.publish(JointState(name=list(positions), position=list(positions.values())))

    node.create_timer(0.05, publish)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    threading.Thread(target=ex.spin, daemon=True).start()

    def read_stdin() -> None:
        for line in sys.stdin:
            positions.update({k: float(v) for k, v in json.loads(line).items()})

    threading.Thread(target=read_stdin, daemon=True).start()

    live = LiveState()
    observer = Observer(domain, 11, live)
    cfg = PanelConfig(token=token, root=work, runs_dir=work / 'runs', live=False)
    app = create_app(cfg, RunManager(work), live=live)
    server = uvicorn.Server(uvicorn.Config(app, host='127.0.0.1', port=port, log_level='warning'))

    def announce() -> None:
        while not server.started:
            time.sleep(0.05)
        print(f'palletizer panel on http://127.0.0.1:{port}/', flush=True)

    threading.Thread(target=announce, daemon=True).start()
    try:
        server.run()
    finally:
        observer.close()
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
