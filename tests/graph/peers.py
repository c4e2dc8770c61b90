"""Two real rclpy nodes for the cross-process exchange test: `server` and `client` roles.

The server offers, under the names the project uses, a palletizer_msgs topic, a palletizer_msgs
service, a palletizer_msgs action with feedback, the UR driver's FollowJointTrajectory action and
its SetIO service. The client uses each once and prints one JSON line with what it received.
"""

from __future__ import annotations

import json
import sys
import time

import rclpy
from control_msgs.action import FollowJointTrajectory
from palletizer_msgs.action import Pick
from palletizer_msgs.msg import EpisodeEvent
from palletizer_msgs.srv import PlanPlacement
from rclpy.action import ActionClient, ActionServer
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from ur_msgs.srv import SetIO

EVENTS_QOS = QoSProfile(
    depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
FJT = '/scaled_joint_trajectory_controller/follow_joint_trajectory'
SET_IO = '/io_and_status_controller/set_io'


class ServerNode(Node):
    def __init__(self) -> None:
        super().__init__('exchange_server')
        group = ReentrantCallbackGroup()
        self.pub = self.create_publisher(EpisodeEvent, '/palletizer/episode_events', EVENTS_QOS)
        self.create_service(PlanPlacement, '/planner/plan', self.on_plan, callback_group=group)
        self.create_service(SetIO, SET_IO, self.on_set_io, callback_group=group)
        ActionServer(self, Pick, '/trajectory_executor/pick', self.on_pick, callback_group=group)
        ActionServer(self, FollowJointTrajectory, FJT, self.on_fjt, callback_group=group)
        self.vacuum = 0.0
        self.create_timer(0.1, self.publish_event, callback_group=group)
        self.seq = 0

    def publish_event(self) -> None:
        self.pub.publish(
            EpisodeEvent(
                run_id='x',
                seed=1,
                seq=self.seq,
                ts=0.5,
                kind='perceive',
                payload_json='{"seen": 1}',
            )
        )
        self.seq += 1

    def on_plan(self, req: PlanPlacement.Request, res: PlanPlacement.Response):
        res.has_plan = True
        res.plan.slot = f'score-L1-{req.spec.package_id}'
        res.plan.position.z = req.spec.dims_m[2] / 2
        res.plan.breakdown_names = ['support_ratio']
        res.plan.breakdown_values = [1.0]
        res.error_code = PlanPlacement.Response.OK
        return res

    def on_set_io(self, req: SetIO.Request, res: SetIO.Response):
        res.success = req.fun == SetIO.Request.FUN_SET_DIGITAL_OUT and req.pin == 0
        if res.success:
            self.vacuum = req.state
        return res

    def on_pick(self, goal):
        for i in range(3):
            fb = Pick.Feedback(phase='descend', progress=(i + 1) / 3)
            goal.publish_feedback(fb)
            time.sleep(0.05)
        goal.succeed()
        return Pick.Result(error_code=Pick.Result.OK, active_cups=9, grip_capacity_ratio=17.8)

    def on_fjt(self, goal):
        traj = goal.request.trajectory
        fb = FollowJointTrajectory.Feedback(joint_names=list(traj.joint_names))
        fb.desired = traj.points[-1]
        goal.publish_feedback(fb)
        goal.succeed()
        return FollowJointTrajectory.Result(
            error_code=FollowJointTrajectory.Result.SUCCESSFUL, error_string=''
        )


class ClientNode(Node):
    def __init__(self) -> None:
        super().__init__('exchange_client')
        self.events: list[int] = []
        self.create_subscription(
            EpisodeEvent,
            '/palletizer/episode_events',
            lambda m: self.events.append(m.seq),
            EVENTS_QOS,
        )

    def wait(self, future, timeout: float = 20.0):
        rclpy.spin_until_future_complete(self, future, timeout_sec=timeout)
        if not future.done():
            raise TimeoutError('no answer')
        return future.result()

    def run(self) -> dict:
        out: dict = {}
        plan = self.create_client(PlanPlacement, '/planner/plan')
        set_io = self.create_client(SetIO, SET_IO)
        pick = ActionClient(self, Pick, '/trajectory_executor/pick')
        fjt = ActionClient(self, FollowJointTrajectory, FJT)
        for c in (plan, set_io):
            assert c.wait_for_service(timeout_sec=20.0), f'service {c.srv_name} never appeared'
        for a in (pick, fjt):
            assert a.wait_for_server(timeout_sec=20.0), 'action server never appeared'
        deadline = time.monotonic() + 20.0
        while len(self.events) < 3 and time.monotonic() < deadline:
            rclpy.spin_once(self, timeout_sec=0.1)
        out['events'] = self.events[:3]

        req = PlanPlacement.Request()
        req.spec.package_id = 'std_m-00'
        req.spec.dims_m = [0.42, 0.30, 0.18]
        res = self.wait(plan.call_async(req))
        out['plan'] = {'slot': res.plan.slot, 'z': res.plan.position.z, 'code': res.error_code}

        res = self.wait(set_io.call_async(SetIO.Request(fun=1, pin=0, state=1.0)))
        out['set_io'] = res.success

        feedback: list[float] = []
        gh = self.wait(
            pick.send_goal_async(
                Pick.Goal(), feedback_callback=lambda f: feedback.append(f.feedback.progress)
            )
        )
        result = self.wait(gh.get_result_async()).result
        out['pick'] = {'accepted': gh.accepted, 'cups': result.active_cups, 'feedback': feedback}

        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = [f'j{i}' for i in range(6)]
        from trajectory_msgs.msg import JointTrajectoryPoint

        goal.trajectory.points = [JointTrajectoryPoint(positions=[0.1 * i for i in range(6)])]
        fjt_feedback: list[list[str]] = []
        gh = self.wait(
            fjt.send_goal_async(
                goal, feedback_callback=lambda f: fjt_feedback.append(list(f.feedback.joint_names))
            )
        )
        result = self.wait(gh.get_result_async()).result
        out['fjt'] = {'error_code': result.error_code, 'feedback_joints': fjt_feedback[:1]}
        return out


def main() -> int:
    role = sys.argv[1]
    rclpy.init(args=sys.argv)
    node = ServerNode() if role == 'server' else ClientNode()
    try:
        if role == 'server':
            executor = MultiThreadedExecutor()  # action callbacks sleep between feedbacks
            executor.add_node(node)
            executor.spin()
        else:
            print('EXCHANGE ' + json.dumps(node.run()), flush=True)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
