"""Foxglove bridge node: the cell's topics on a Foxglove WebSocket server (foxglove-sdk).

`viz:=foxglove` starts it. Every topic in `topics` that appears on the graph (a 1 s discovery
timer) is advertised as a Foxglove channel of the same name, with the message's full `ros2msg`
definition as its schema, so Foxglove decodes it as it would a ROS 2 bag. The ROS topic is
subscribed (as serialized CDR, logged unchanged) while some Foxglove client subscribes to the
channel, and subscribed afresh when a client joins, so latched topics (the robot description,
static TF, the last height map) reach clients that connect late. Open `ws://127.0.0.1:8765` in
Foxglove and load `foxglove/palletizer.json` for the layout.
"""

from __future__ import annotations

import collections
import importlib
import threading
from collections.abc import Callable
from typing import Any

from rclpy.node import Node
from rclpy.qos import QoSProfile

import foxglove
from palletizer.nodes.qos import EVENTS, LATCHED, MARKERS, SENSORS
from palletizer.nodes.spin import run_node
from palletizer.telemetry import load_typestore

__all__ = ['DEFAULT_TOPICS', 'FoxgloveBridgeNode', 'main']

# What RViz users look at, plus the episode's own records.
DEFAULT_TOPICS = (
    '/robot_description',
    '/tf',
    '/tf_static',
    '/joint_states',
    '/palletizer/heightmap',
    '/palletizer/points',
    '/palletizer/markers',
    '/palletizer/plan_markers',
    '/palletizer/cycle_time_s',
    '/palletizer/episode_events',
    '/palletizer/placements',
    '/palletizer/pallet_states',
    '/cameras/station/color/image_raw',
    '/cameras/top/depth/image_raw',
)
# Latched publishers (their last value reaches a late subscriber) and sensor streams (best
# effort); everything else is reliable and volatile.
_LATCHED = {
    '/robot_description',
    '/tf_static',
    '/palletizer/heightmap',
    '/palletizer/points',
}
_MARKERS = {'/palletizer/markers', '/palletizer/plan_markers'}
_EVENT_TOPICS = {'/palletizer/episode_events'}


def _message_class(msgtype: str) -> Any:
    """The rclpy message class of 'pkg/msg/Type'."""
    pkg, kind, name = msgtype.split('/')
    return getattr(importlib.import_module(f'{pkg}.{kind}'), name)


def _qos(topic: str) -> QoSProfile:
    if topic in _LATCHED:
        return LATCHED
    if topic in _MARKERS:
        return MARKERS
    if topic in _EVENT_TOPICS:
        return EVENTS
    if topic.startswith('/cameras/') or topic == '/joint_states':
        return SENSORS
    return QoSProfile(depth=50)


class _Listener(foxglove.ServerListener):
    """Client (un)subscriptions, queued for the node's executor (the server calls from its own
    thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.queue: collections.deque[tuple[int, str, int]] = collections.deque()

    def on_subscribe(self, client: Any, channel: Any) -> None:
        with self.lock:
            self.queue.append((+1, channel.topic, client.id))

    def on_unsubscribe(self, client: Any, channel: Any) -> None:
        with self.lock:
            self.queue.append((-1, channel.topic, client.id))

    def take(self) -> list[tuple[int, str, int]]:
        with self.lock:
            out = list(self.queue)
            self.queue.clear()
        return out


class FoxgloveBridgeNode(Node):
    def __init__(self) -> None:
        super().__init__('foxglove_bridge')
        host = str(self.declare_parameter('host', '127.0.0.1').value)
        port = int(self.declare_parameter('port', 8765).value)
        self.wanted = tuple(self.declare_parameter('topics', list(DEFAULT_TOPICS)).value)
        self.types = load_typestore()
        self.listener = _Listener()
        self.server = foxglove.start_server(
            name='palletizer', host=host, port=port, server_listener=self.listener
        )
        self.channels: dict[str, tuple[foxglove.Channel, str] | None] = {}
        self.watchers: dict[str, set[int]] = collections.defaultdict(set)
        self.subs: dict[str, Any] = {}
        self.get_logger().info(
            f'Foxglove WebSocket server on ws://{host}:{self.server.port}; '
            f'bridging {len(self.wanted)} topics as they appear'
        )
        self.discover()
        self.create_timer(1.0, self.discover)
        self.create_timer(0.05, self.follow_clients)

    def discover(self) -> None:
        """Advertise each wanted topic once it is on the graph with a type."""
        present = dict(self.get_topic_names_and_types())
        for topic in self.wanted:
            if topic in self.channels or not present.get(topic):
                continue
            msgtype = present[topic][0]
            try:
                text, _ = self.types.generate_msgdef(msgtype, ros_version=2)
            except Exception as exc:  # a type the typestore does not know: say so, skip it
                self.get_logger().warning(f'{topic}: no definition of {msgtype} ({exc})')
                self.channels[topic] = None
                continue
            schema = foxglove.Schema(name=msgtype, encoding='ros2msg', data=text.encode())
            channel = foxglove.Channel(topic, message_encoding='cdr', schema=schema)
            self.channels[topic] = (channel, msgtype)
            self.get_logger().info(f'advertising {topic} ({msgtype})')

    def follow_clients(self) -> None:
        """Subscribe a ROS topic while Foxglove clients want it; afresh when one joins."""
        for delta, topic, client in self.listener.take():
            entry = self.channels.get(topic)
            if entry is None:
                continue
            if delta > 0:
                self.watchers[topic].add(client)
                self._unsubscribe(topic)  # a joining client gets the latched sample again
                channel, msgtype = entry
                self.subs[topic] = self.create_subscription(
                    _message_class(msgtype), topic, self._forward(channel), _qos(topic), raw=True
                )
            else:
                self.watchers[topic].discard(client)
                if not self.watchers[topic]:
                    self._unsubscribe(topic)

    def _unsubscribe(self, topic: str) -> None:
        sub = self.subs.pop(topic, None)
        if sub is not None:
            self.destroy_subscription(sub)

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _forward(self, channel: foxglove.Channel) -> Callable[[bytes], None]:
        """The raw subscription callback that logs each message to `channel` unchanged."""

        def log(raw: bytes) -> None:
            channel.log(bytes(raw), log_time=self._now_ns())

        return log

    def destroy_node(self) -> None:
        self.server.stop()
        super().destroy_node()


def main(args=None) -> None:
    run_node(FoxgloveBridgeNode, args)


if __name__ == '__main__':
    main()
