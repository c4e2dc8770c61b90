"""Client for the cell-bridge graph test: drives the real node through the UR driver interfaces."""

from __future__ import annotations

import json
import sys
import time

import rclpy
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTolerance
from palletizer.core.description import JOINTS as UR_JOINTS
from palletizer.launcher.graph import UR_SET_IO_SERVICE, UR_TRAJECTORY_ACTION
from palletizer_msgs.srv import GroundTruth, PresentCarton, ResetCell
from rclpy.action import ActionClient
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectoryPoint
from ur_msgs.srv import SetIO

JOINTS = list(UR_JOINTS)


def _dur(t: float) -> Duration:
    return Duration(sec=int(t), nanosec=int(round((t - int(t)) * 1e9)))


def main() -> int:
    rclpy.init()
    node = rclpy.create_node('bridge_client')
    latest: dict[str, object] = {}
    node.create_subscription(
        JointState,
        '/joint_states',
        lambda m: latest.__setitem__('js', m),
        QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE),
    )
    # Deep feedback history: the bridge publishes every tick in bursts (see cell_bridge).
    fjt = ActionClient(
        node,
        FollowJointTrajectory,
        UR_TRAJECTORY_ACTION,
        feedback_sub_qos_profile=QoSProfile(depth=500),
    )
    assert fjt.wait_for_server(timeout_sec=30.0), 'FJT action server never appeared'
    clients = {
        n: node.create_client(t, f'/cell_bridge/{n}')
        for n, t in (
            ('reset', ResetCell),
            ('present', PresentCarton),
            ('ground_truth', GroundTruth),
        )
    }
    clients['set_io'] = node.create_client(SetIO, UR_SET_IO_SERVICE)
    for n, c in clients.items():
        assert c.wait_for_service(timeout_sec=30.0), f'{n} never appeared'
    out: dict[str, object] = {}

    def wait(fut, timeout=60.0):
        rclpy.spin_until_future_complete(node, fut, timeout_sec=timeout)
        assert fut.done(), 'no answer'
        return fut.result()

    def call(name, req):
        t0 = time.perf_counter()
        res = wait(clients[name].call_async(req))
        out.setdefault('latency_s', {})[name] = round(time.perf_counter() - t0, 4)
        return res

    def joints_now():
        # The bridge publishes once after every call; spin a while so that sample is the latest.
        end = time.monotonic() + 0.3
        while time.monotonic() < end or ('js' not in latest and time.monotonic() < end + 10):
            rclpy.spin_once(node, timeout_sec=0.05)
        return list(latest['js'].position)

    res = call('reset', ResetCell.Request(level=21, seed=1))
    out['reset'] = {'code': res.error_code, 'n': res.n_cartons, 'source': res.source}
    bad = call('reset', ResetCell.Request(level=99, seed=1))
    out['bad_level'] = {'code': bad.error_code, 'msg': bad.error_msg}
    res = call('reset', ResetCell.Request(level=21, seed=1))
    pres = call('present', PresentCarton.Request())
    out['present'] = {
        'code': pres.error_code,
        'id': pres.package_id,
        'pending': pres.state.pending,
        'exhausted': pres.state.exhausted,
        'source': pres.state.source,
    }
    gt = call('ground_truth', GroundTruth.Request())
    out['truth_ids'] = [c.package_id for c in gt.cartons]
    out['truth_mass'] = {c.package_id: c.mass_kg for c in gt.cartons}

    def goal(names, q0, dq, duration, path_tol=()):
        g = FollowJointTrajectory.Goal()
        g.trajectory.joint_names = list(names)
        z = [0.0] * 6
        g.trajectory.points = [
            JointTrajectoryPoint(positions=q0, velocities=z, time_from_start=_dur(0.0)),
            JointTrajectoryPoint(
                positions=[a + b for a, b in zip(q0, dq, strict=True)],
                velocities=z,
                time_from_start=_dur(duration),
            ),
        ]
        g.path_tolerance = [JointTolerance(name=n, position=p) for n, p in path_tol]
        return g

    def run(g, cancel_after=None):
        feedback = []
        t0 = time.perf_counter()
        send = wait(fjt.send_goal_async(g, feedback_callback=feedback.append))
        assert send.accepted, 'goal not accepted'
        fut = send.get_result_async()
        if cancel_after is not None:
            while len(feedback) < cancel_after and not fut.done():
                rclpy.spin_once(node, timeout_sec=0.01)
            wait(send.cancel_goal_async())
        res = wait(fut)
        # Feedback sent before the result may still sit in the reader's queue when the result
        # arrives (the client takes one message per wake-up): drain it before counting.
        quiet_until = time.perf_counter() + 0.5
        seen = len(feedback)
        while time.perf_counter() < quiet_until:
            rclpy.spin_once(node, timeout_sec=0.05)
            if len(feedback) != seen:
                seen, quiet_until = len(feedback), time.perf_counter() + 0.5
        return {
            'status': res.status,
            'code': res.result.error_code,
            'msg': res.result.error_string,
            'feedback': len(feedback),
            'wall_s': round(time.perf_counter() - t0, 3),
        }

    q0 = joints_now()
    dq = [0.3, -0.2, 0.2, 0.1, 0.1, 0.3]
    out['success'] = run(goal(JOINTS, q0, dq, 1.5))
    q1 = joints_now()
    out['success']['final_err'] = max(abs(a - (b + c)) for a, b, c in zip(q1, q0, dq, strict=True))
    out['path'] = run(goal(JOINTS, q1, [0.4, 0, 0, 0, 0, 0], 2.0, [(JOINTS[0], 1e-5)]))
    out['invalid'] = run(goal(JOINTS[:5] + ['gripper_joint'], q1, [0.0] * 6, 1.0))
    q2 = joints_now()
    out['cancel'] = run(goal(JOINTS, q2, [1.5, 0, 0, 0, 0, 0], 8.0), cancel_after=20)
    q3 = joints_now()
    out['cancel']['moved'] = q3[0] - q2[0]
    out['cancel']['target'] = 1.5
    out['cancel']['canceled'] = out['cancel']['status'] == GoalStatus.STATUS_CANCELED

    on = call('set_io', SetIO.Request(fun=1, pin=0, state=1.0))
    off = call('set_io', SetIO.Request(fun=1, pin=0, state=0.0))
    other = call('set_io', SetIO.Request(fun=1, pin=3, state=1.0))
    rclpy.spin_once(node, timeout_sec=0.2)
    out['set_io'] = {
        'on': on.success,
        'off': off.success,
        'other_pin': other.success,
    }
    print('BRIDGE ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
