"""Client for the executor graph test: present, pick and place one carton through the actions,
then the MoveArm services (~/ready, ~/park).

Ground truth is read here only to build the observation and to referee the result.
"""

from __future__ import annotations

import json
import math
import sys
import time

import rclpy
from moveit_msgs.msg import DisplayTrajectory, PlanningScene
from palletizer.core.contracts import HeightMap
from palletizer.nodes.convert import heightmap_to_msg
from palletizer_msgs.action import Pick, Place
from palletizer_msgs.srv import GroundTruth, MoveArm, PresentCarton, Settle
from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

TARGET_XY = (0.3, -0.2)  # [m] a pallet slot in the world frame
DECK_Z = 0.144  # [m] pallet deck top (cell.yaml pallet.size)


def _yaw(q) -> float:
    return math.atan2(2 * (q.w * q.z + q.x * q.y), 1 - 2 * (q.y * q.y + q.z * q.z))


def _wrap_half_turn(a: float) -> float:
    # A carton is symmetric under a half turn.
    return (a + math.pi / 2) % math.pi - math.pi / 2


def _scene(m: PlanningScene) -> dict[str, object]:
    """MoveIt's scene as plain data: each collision box's centre, yaw and size, the held one."""

    def box(o):
        p = o.primitive_poses[0]
        return {
            'frame': o.header.frame_id,
            'centre': [p.position.x, p.position.y, p.position.z],
            'yaw': _yaw(p.orientation),
            'dims': list(o.primitives[0].dimensions),
        }

    return {
        'model': m.robot_model_name,
        'diff': m.is_diff,
        'boxes': {o.id: box(o) for o in m.world.collision_objects},
        'attached': [
            {'link': a.link_name, **box(a.object)}
            for a in m.robot_state.attached_collision_objects
        ],
        'joints': list(m.robot_state.joint_state.name),
    }


def main() -> int:
    rclpy.init()
    node = rclpy.create_node('executor_client')
    latest: dict[str, object] = {}
    reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(Clock, '/clock', lambda m: latest.__setitem__('clock', m), reliable)
    node.create_subscription(
        JointState, '/joint_states', lambda m: latest.__setitem__('js', m), reliable
    )
    latched = QoSProfile(
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )
    node.create_subscription(
        PlanningScene,
        '/monitored_planning_scene',
        lambda m: latest.__setitem__('scene', m),
        latched,
    )
    paths: list[DisplayTrajectory] = []
    node.create_subscription(DisplayTrajectory, '/display_planned_path', paths.append, reliable)
    clients = {
        n: node.create_client(t, f'/cell_bridge/{n}')
        for n, t in (('present', PresentCarton), ('ground_truth', GroundTruth), ('settle', Settle))
    }
    pick = ActionClient(node, Pick, '/trajectory_executor/pick')
    place = ActionClient(node, Place, '/trajectory_executor/place')
    for n, c in clients.items():
        assert c.wait_for_service(timeout_sec=30.0), f'{n} never appeared'
    for n, a in (('pick', pick), ('place', place)):
        assert a.wait_for_server(timeout_sec=30.0), f'{n} action never appeared'
    out: dict[str, object] = {}

    def wait(fut, timeout=120.0):
        rclpy.spin_until_future_complete(node, fut, timeout_sec=timeout)
        assert fut.done(), 'no answer'
        return fut.result()

    def settle_streams() -> tuple[float, list[float]]:
        # The bridge publishes once after every call; spin a while so that is the latest.
        end = time.monotonic() + 0.3
        while time.monotonic() < end or ('js' not in latest and time.monotonic() < end + 10):
            rclpy.spin_once(node, timeout_sec=0.05)
        c = latest['clock'].clock
        return c.sec + c.nanosec * 1e-9, list(latest['js'].position)

    def act(client, goal):
        phases: list[str] = []

        def on_fb(m):
            if not phases or phases[-1] != m.feedback.phase:
                phases.append(m.feedback.phase)

        t0 = time.perf_counter()
        handle = wait(client.send_goal_async(goal, feedback_callback=on_fb))
        assert handle.accepted, 'goal refused'
        res = wait(handle.get_result_async()).result
        dt = round(time.perf_counter() - t0, 3)
        # Feedback and the result travel apart (a topic and a service): the last phase, sent
        # just before the result, can arrive after it on a loaded machine. Take it in.
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        return res, phases, dt

    pres = wait(clients['present'].call_async(PresentCarton.Request()))
    assert pres.error_code == 0, pres.error_msg
    gt = wait(clients['ground_truth'].call_async(GroundTruth.Request()))
    carton = next(c for c in gt.cartons if c.package_id == pres.package_id)
    p = carton.pose.position
    L, W, H = carton.dims_m

    # Out of reach: refused before anything moves (no sim time passes, joints unchanged).
    t_a, q_a = settle_streams()
    far = Pick.Goal()
    far.observation.package_id = carton.package_id
    far.observation.position.x, far.observation.position.y, far.observation.position.z = (
        2.5,
        -0.8,
        p.z,
    )
    far.observation.dims_guess = [L, W, H]
    res, _, _ = act(pick, far)
    t_b, q_b = settle_streams()
    out['far'] = {
        'code': res.error_code,
        'cause': res.cause,
        'msg': res.error_msg,
        'sim_dt': t_b - t_a,
        'dq': max(abs(a - b) for a, b in zip(q_a, q_b, strict=True)),
    }

    # A malformed goal (a position that is not finite): INVALID_REQUEST with no cause; nothing
    # moves.
    bad = Pick.Goal()
    bad.observation.package_id = carton.package_id
    bad.observation.position.x = math.nan
    bad.observation.dims_guess = [L, W, H]
    res, _, _ = act(pick, bad)
    t_c, q_c = settle_streams()
    out['invalid'] = {
        'code': res.error_code,
        'cause': res.cause,
        'msg': res.error_msg,
        'sim_dt': t_c - t_b,
        'dq': max(abs(a - b) for a, b in zip(q_b, q_c, strict=True)),
    }

    goal = Pick.Goal()
    o = goal.observation
    o.package_id, o.yaw, o.dims_guess, o.confidence = (
        carton.package_id,
        _yaw(carton.pose.orientation),
        [L, W, H],
        1.0,
    )
    o.position.x, o.position.y, o.position.z = p.x, p.y, p.z
    res, phases, wall = act(pick, goal)
    gt = wait(clients['ground_truth'].call_async(GroundTruth.Request()))
    settle_streams()
    out['scene_held'] = _scene(latest['scene'])
    out['pallet'] = [gt.pallet.position.x, gt.pallet.position.y, gt.pallet.position.z]
    out['pick'] = {
        'code': res.error_code,
        'cause': res.cause,
        'msg': res.error_msg,
        'cups': res.active_cups,
        'ratio': res.grip_capacity_ratio,
        'phases': phases,
        'wall_s': wall,
        'held': gt.held_package_id,
        'id': carton.package_id,
    }

    goal = Place.Goal()
    goal.plan.position.x, goal.plan.position.y = TARGET_XY
    goal.plan.position.z = DECK_Z + H / 2
    goal.plan.yaw, goal.plan.layer, goal.plan.slot = 0.0, 1, 'test-slot'
    s = goal.spec
    s.package_id, s.type_name, s.dims_m = carton.package_id, carton.type_name, [L, W, H]
    s.mass_kg = carton.mass_kg
    goal.heightmap = heightmap_to_msg(HeightMap.flat())
    res, phases, wall = act(place, goal)
    settle = wait(clients['settle'].call_async(Settle.Request(duration=1.25)))
    t_c, _ = settle_streams()
    gt = wait(clients['ground_truth'].call_async(GroundTruth.Request()))
    c = next(c for c in gt.cartons if c.package_id == carton.package_id)
    q = c.pose.position
    out['scene_placed'] = _scene(latest['scene'])
    out['carton'] = {'centre': [q.x, q.y, q.z], 'dims': [L, W, H], 'id': carton.package_id}
    out['place'] = {
        'code': res.error_code,
        'cause': res.cause,
        'msg': res.error_msg,
        'failing_waypoint': res.failing_waypoint,
        'phases': phases,
        'wall_s': wall,
        'held': gt.held_package_id,
        'settle_code': settle.error_code,
        'err_xy_m': math.hypot(q.x - TARGET_XY[0], q.y - TARGET_XY[1]),
        'err_z_m': q.z - (DECK_Z + H / 2),
        'err_yaw': _wrap_half_turn(_yaw(c.pose.orientation)),
        'cycle_sim_s': t_c - t_b,
        'mass_kg': carton.mass_kg,
    }

    # The empty arm waits above the source, then parks for the photos, as an episode does.
    for name in ('ready', 'park'):
        client = node.create_client(MoveArm, f'/trajectory_executor/{name}')
        assert client.wait_for_service(timeout_sec=30.0), f'{name} never appeared'
        r = wait(client.call_async(MoveArm.Request()))
        out[name] = {
            'code': r.error_code,
            'cause': r.cause,
            'msg': r.error_msg,
            'motion_s': r.motion_s,
        }
    settle_streams()
    js = latest['js']
    at = dict(zip(js.name, js.position, strict=True))
    last = paths[-1]
    pts = last.trajectory[0].joint_trajectory.points
    out['paths'] = {
        'n': len(paths),
        'model': last.model_id,
        'names': list(last.trajectory[0].joint_trajectory.joint_names),
        'start_names': list(last.trajectory_start.joint_state.name),
        # The park's path: where it starts against its start state, where it ends against
        # where the arm stands now.
        'start_gap': max(
            abs(a - b)
            for a, b in zip(
                pts[0].positions, last.trajectory_start.joint_state.position, strict=True
            )
        ),
        'end_gap': max(
            abs(a - at[n])
            for n, a in zip(
                last.trajectory[0].joint_trajectory.joint_names, pts[-1].positions, strict=True
            )
        ),
    }
    print('EXECUTOR ' + json.dumps(out), flush=True)
    node.destroy_node()
    rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
