"""Client for the UR driver graph test: the status topics, I/O states, speed scaling, the
dashboard and zero_ftsensor of the cell bridge, and a trajectory goal refused while the program
is stopped. Prints DRIVER {json}."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import rclpy
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from geometry_msgs.msg import WrenchStamped
from palletizer.core.description import JOINTS
from palletizer.launcher.graph import UR_SET_IO_SERVICE, UR_TRAJECTORY_ACTION, UR_WRENCH_TOPIC
from palletizer.nodes.qos import LATCHED
from rclpy.action import ActionClient
from rclpy.qos import QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectoryPoint
from ur_dashboard_msgs.msg import RobotMode, SafetyMode
from ur_dashboard_msgs.srv import GetProgramState, GetRobotMode, GetSafetyMode, IsProgramRunning
from ur_msgs.msg import IOStates, ToolDataMsg
from ur_msgs.srv import SetIO

IO = '/io_and_status_controller'
DASH = '/dashboard_client'


def main() -> int:
    rclpy.init()
    node = rclpy.create_node('driver_client')
    got: dict[str, list] = {}

    def keep(key):
        return lambda m: got.setdefault(key, []).append(m)

    for kind, topic, key in (
        (RobotMode, f'{IO}/robot_mode', 'robot_mode'),
        (SafetyMode, f'{IO}/safety_mode', 'safety_mode'),
        (Bool, f'{IO}/robot_program_running', 'running'),
    ):
        node.create_subscription(kind, topic, keep(key), LATCHED)
    depth = QoSProfile(depth=1000)
    node.create_subscription(IOStates, f'{IO}/io_states', keep('io'), depth)
    node.create_subscription(ToolDataMsg, f'{IO}/tool_data', keep('tool'), depth)
    node.create_subscription(
        Float64, '/speed_scaling_state_broadcaster/speed_scaling', keep('scaling'), depth
    )
    node.create_subscription(WrenchStamped, UR_WRENCH_TOPIC, keep('wrench'), depth)
    node.create_subscription(JointState, '/joint_states', keep('js'), depth)
    services = {
        'robot_mode': (GetRobotMode, f'{DASH}/get_robot_mode'),
        'safety_mode': (GetSafetyMode, f'{DASH}/get_safety_mode'),
        'program_running': (IsProgramRunning, f'{DASH}/program_running'),
        'program_state': (GetProgramState, f'{DASH}/program_state'),
        'play': (Trigger, f'{DASH}/play'),
        'stop': (Trigger, f'{DASH}/stop'),
        'unlock': (Trigger, f'{DASH}/unlock_protective_stop'),
        'zero': (Trigger, f'{IO}/zero_ftsensor'),
        'set_io': (SetIO, UR_SET_IO_SERVICE),
    }
    clients = {k: node.create_client(t, n) for k, (t, n) in services.items()}
    for k, c in clients.items():
        assert c.wait_for_service(timeout_sec=30.0), f'{services[k][1]} never appeared'
    fjt = ActionClient(node, FollowJointTrajectory, UR_TRAJECTORY_ACTION)
    assert fjt.wait_for_server(timeout_sec=30.0), 'FJT action server never appeared'

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)

    def wait(fut):
        rclpy.spin_until_future_complete(node, fut, timeout_sec=60.0)
        assert fut.done(), 'no answer'
        return fut.result()

    def call(name, req=None):
        return wait(clients[name].call_async(req or services[name][0].Request()))

    def accepted(step: float = 0.05) -> bool:
        """A 1 s goal `step` [rad] on every joint from where the arm stands: accepted or
        refused."""
        q = list(got['js'][-1].position)
        g = FollowJointTrajectory.Goal()
        g.trajectory.joint_names = list(JOINTS)
        g.trajectory.points = [
            JointTrajectoryPoint(
                positions=[v + step for v in q],
                velocities=[0.0] * 6,
                time_from_start=Duration(sec=1),
            )
        ]
        send = wait(fjt.send_goal_async(g))
        if send.accepted:
            wait(send.get_result_async())
        return bool(send.accepted)

    def latest(key, field='mode'):
        return getattr(got[key][-1], field)

    out: dict = {}
    spin(1.0)
    out['start'] = {
        'robot_mode': latest('robot_mode'),
        'safety_mode': latest('safety_mode'),
        'running': latest('running', 'data'),
        'scaling': got['scaling'][-1].data,
        'n_digital': len(got['io'][-1].digital_out_states),
        'robot_mode_srv': [call('robot_mode').robot_mode.mode, call('robot_mode').answer],
        'safety_mode_srv': call('safety_mode').answer,
        'program_running_srv': call('program_running').program_running,
        'program_state_srv': call('program_state').state.state,
        'accepted': accepted(),
    }
    stop = call('stop')
    spin(0.5)
    out['stopped'] = {
        'stop': [stop.success, stop.message],
        'running': latest('running', 'data'),
        'program_state_srv': call('program_state').state.state,
        'accepted': accepted(),
    }
    unlock = call('unlock')
    play = call('play')
    spin(0.5)
    out['played'] = {
        'unlock': [unlock.success, unlock.message],
        'play': [play.success, play.message],
        'running': latest('running', 'data'),
        'accepted': accepted(),
    }
    # The vacuum's digital output in io_states follows SetIO.
    call('set_io', SetIO.Request(fun=1, pin=0, state=1.0))
    spin(0.5)
    out['vacuum_out_on'] = got['io'][-1].digital_out_states[0].state
    call('set_io', SetIO.Request(fun=1, pin=0, state=0.0))
    spin(0.5)
    out['vacuum_out_off'] = got['io'][-1].digital_out_states[0].state
    out['vacuum_v'] = got['tool'][-1].analog_input2
    # zero_ftsensor: the empty tool reads its weight and the sensor's error before, ~0 after.
    # The bridge streams the wrench only while the world advances: a goal that holds the arm
    # where it stands moves it on, at the pose the sensor is zeroed in.
    spin(0.5)
    got['wrench'] = []
    accepted(0.0)
    before = np.array([[w.wrench.force.z for w in got['wrench']]])
    zero = call('zero')
    spin(0.5)  # samples of the goal before, still queued
    got['wrench'] = []
    accepted(0.0)
    spin(0.5)
    after = np.array([[w.wrench.force.z for w in got['wrench']]])
    out['zero'] = {
        'success': zero.success,
        'fz_before': float(np.mean(before)),
        'fz_after': float(np.mean(after)),
        'n_after': int(after.size),
    }
    print('DRIVER ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
