"""Run inside a network namespace: one fast-forward episode of level 11, through the real
`ros2 launch` (argv[1]: the ros2-launch checking tool's run script) or else the standalone
launcher (name:=value arguments replace the default launch arguments), left to end by itself; a probe records, while the graph is up, the topics with their
types, the TF frames, the markers, the cycle times and the settle events' payloads; then the launch's exit code, its log and
any process left in its session. Prints RESULT {json}."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import rclpy
from palletizer.nodes.qos import EVENTS, LATCHED, MARKERS, STATIC_TF
from palletizer_msgs.msg import EpisodeEvent
from rclpy.action.graph import (
    get_action_client_names_and_types_by_node,
    get_action_server_names_and_types_by_node,
)
from rclpy.executors import SingleThreadedExecutor
from rclpy.qos import QoSProfile
from sensor_msgs.msg import Image, PointCloud2
from std_msgs.msg import Float64
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import MarkerArray

# Every node has these: parameters, rosout, parameter events, type descriptions.
_HOUSEKEEPING = ('/rosout', '/parameter_events')


def _own(name: str) -> bool:
    """An interface the node has for being a node (not for its job), or the hidden topics and
    services an action is made of (listed as the action)."""
    return (
        name in _HOUSEKEEPING
        or '/_action/' in name
        or name.rsplit('/', 1)[-1]
        in (
            'describe_parameters',
            'get_parameter_types',
            'get_parameters',
            'get_type_description',
            'list_parameters',
            'set_parameters',
            'set_parameters_atomically',
        )
    )


def node_interfaces(node) -> dict:
    """Per node of the graph: the topics it publishes and subscribes, the services it serves and
    calls, the actions it serves and sends goals to, each as {name: [types]}."""
    out = {}
    for name, ns in node.get_node_names_and_namespaces():
        if name == node.get_name():
            continue
        lists = {
            'publishes': node.get_publisher_names_and_types_by_node(name, ns),
            'subscribes': node.get_subscriber_names_and_types_by_node(name, ns),
            'serves': node.get_service_names_and_types_by_node(name, ns),
            'calls': node.get_client_names_and_types_by_node(name, ns),
            'action_serves': get_action_server_names_and_types_by_node(node, name, ns),
            'action_calls': get_action_client_names_and_types_by_node(node, name, ns),
        }
        out[name] = {k: {n: sorted(t) for n, t in v if not _own(n)} for k, v in lists.items()}
    return out


def main() -> None:
    defaults = {'level': '11', 'seed': '1', 'episodes': '1', 'speed': '0', 'telemetry': 'off'}
    given = dict(a.split(':=', 1) for a in sys.argv[1:] if ':=' in a)  # launch args to change
    args = [f'{k}:={v}' for k, v in {**defaults, **given}.items()]
    tools = [a for a in sys.argv[1:] if ':=' not in a]
    if tools:
        via, cmd = 'ros2 launch', [tools[0], 'palletizer', 'level.launch.py', *args]
    else:
        via, cmd = 'launcher', [sys.executable, '-m', 'palletizer.launcher', 'level', *args]
    launcher = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    log: list[str] = []
    reader = threading.Thread(target=lambda: log.extend(launcher.stdout), daemon=True)
    reader.start()
    rclpy.init()
    node = rclpy.create_node('rviz_probe')
    frames: set[str] = set()
    seen = {'image': 0, 'points': 0}
    cycles: list[float] = []
    markers: dict = {}

    def on_tf(msg: TFMessage) -> None:
        for t in msg.transforms:
            frames.update((t.header.frame_id, t.child_frame_id))

    plan: dict = {}

    def on_markers(msg: MarkerArray) -> None:
        markers['frames'] = sorted({m.header.frame_id for m in msg.markers if m.action == 0})
        markers['ns'] = sorted({m.ns for m in msg.markers if m.action == 0})
        held = [m.header.frame_id for m in msg.markers if m.ns == 'held' and m.action == 0]
        markers['held_frames'] = sorted(set(markers.get('held_frames', [])) | set(held))

    def on_plan(msg: MarkerArray) -> None:
        live = [m for m in msg.markers if m.action == 0]
        plan['frames'] = sorted(set(plan.get('frames', [])) | {m.header.frame_id for m in live})
        plan['ns'] = sorted(set(plan.get('ns', [])) | {m.ns for m in live})

    node.create_subscription(TFMessage, '/tf', on_tf, QoSProfile(depth=100))
    node.create_subscription(TFMessage, '/tf_static', on_tf, STATIC_TF)
    node.create_subscription(MarkerArray, '/palletizer/markers', on_markers, MARKERS)
    node.create_subscription(MarkerArray, '/palletizer/plan_markers', on_plan, MARKERS)
    # With the QoS the RViz displays ask for (rviz/palletizer.rviz).
    node.create_subscription(
        Image,
        '/cameras/station/color/image_raw',
        lambda _: seen.__setitem__('image', 1),
        QoSProfile(depth=1),
    )
    node.create_subscription(
        PointCloud2, '/palletizer/points', lambda _: seen.__setitem__('points', 1), LATCHED
    )
    node.create_subscription(
        Float64, '/palletizer/cycle_time_s', lambda m: cycles.append(m.data), QoSProfile(depth=10)
    )
    settles: list[dict] = []  # the settle events' payloads, each with its carton's cycle

    def on_event(msg: EpisodeEvent) -> None:
        if msg.kind == 'settle':
            settles.append(json.loads(msg.payload_json))

    node.create_subscription(EpisodeEvent, '/palletizer/episode_events', on_event, EVENTS)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    out: dict = {}
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and launcher.poll() is None:  # sample while it is up
            done = {'actual', 'cog', 'heightmap'} <= set(markers.get('ns', []))
            done &= {'cog_measured', 'support'} <= set(plan.get('ns', []))
            if done and markers.get('held_frames') and all(seen.values()) and cycles:
                break
            time.sleep(0.2)
        out['topics'] = {name: types for name, types in node.get_topic_names_and_types()}
        out['nodes'] = node_interfaces(node)
        out['frames'] = sorted(frames)
        out['markers'] = markers
        out['plan'] = plan
        out['cycles'] = cycles
        out['seen'] = seen
    finally:
        try:  # the launch ends by itself once the director is done
            out['returncode'] = launcher.wait(timeout=float(os.environ.get('PROBE_WAIT_S', '120')))
        except subprocess.TimeoutExpired:
            out['returncode'] = 'hung'
            os.killpg(launcher.pid, signal.SIGINT)
            try:
                launcher.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)
                launcher.wait()
        reader.join(timeout=10)
        ps = subprocess.run(['ps', '-eo', 'sid=,pid=,args='], capture_output=True, text=True)
        out['left'] = [ln for ln in ps.stdout.splitlines() if ln.split()[0] == str(launcher.pid)]
        ex.shutdown()
        spin.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown()
    out['settles'] = settles  # read once the launch has ended: every event is in
    out['via'] = via
    out['log'] = ''.join(log)
    print('RESULT ' + json.dumps(out), flush=True)


if __name__ == '__main__':
    main()
