"""Starts the cell_bridge and state_publisher executables and looks frames up through a tf2_ros
Buffer fed by a TransformListener, as any ROS node would. Prints TF {json}."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import qos_profile_sensor_data
from rclpy.time import Time
from sensor_msgs.msg import JointState
from tf2_ros import Buffer, TransformListener

LIB = Path(os.environ['PALLETIZER_ROOT']) / 'ros2_ws' / 'install' / 'palletizer' / 'lib'


def main() -> int:
    cameras = sys.argv[1].split(',')
    procs = [
        subprocess.Popen(
            [str(LIB / 'palletizer' / exe), '--ros-args', '-p', 'level:=11'],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for exe in ('cell_bridge', 'state_publisher')
    ]
    rclpy.init()
    node = rclpy.create_node('tf_probe')
    buf = Buffer(node=node)
    TransformListener(buf, node)
    joints: dict[str, float] = {}
    node.create_subscription(
        JointState,
        'joint_states',
        lambda m: joints.update(zip(m.name, m.position, strict=False)),
        qos_profile_sensor_data,
    )
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    wanted = [('world', 'tool0'), ('world', 'base_link')] + [
        ('world', f'{c}_optical') for c in cameras
    ]
    out: dict[str, object] = {}
    end = time.monotonic() + 60.0
    while time.monotonic() < end and (len(out) < len(wanted) or not joints):
        ex.spin_once(timeout_sec=0.1)
        for parent, child in wanted:
            if child not in out and buf.can_transform(parent, child, Time()):
                t = buf.lookup_transform(parent, child, Time()).transform
                out[child] = [
                    [t.translation.x, t.translation.y, t.translation.z],
                    [t.rotation.x, t.rotation.y, t.rotation.z, t.rotation.w],
                ]
    out['_joints'] = joints
    yaml = buf.all_frames_as_yaml()
    out['_frames'] = sorted(
        line.split(':')[0].strip() for line in yaml.splitlines() if line and line[0] != ' '
    )
    for p in procs:
        p.send_signal(signal.SIGINT)
    out['_exit'] = [p.wait(timeout=20) for p in procs]
    out['_stderr'] = [p.stderr.read()[-2000:] for p in procs if p.stderr]
    print('TF ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
