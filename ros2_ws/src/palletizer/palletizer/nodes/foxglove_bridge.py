"""Foxglove bridge node: the cell's topics on a Foxglove WebSocket server (foxglove-sdk).

`viz:=foxglove` starts it. Every topic in `topics` that appears on the graph (a 1 s discovery
timer) is advertised as a Foxglove channel of the same name, with the message's full `ros2msg`
definition as its schema, so Foxglove decodes it as it would a ROS 2 bag. The ROS topic is
subscribed (as serialized CDR, logged unchanged) while some Foxglove client subscribes to the
channel, and subscribed afresh when a client joins, so latched topics (the robot description,
static TF, the last height map) reach clients that connect late. Open `ws://127.0.0.1:8765` in
Foxglove and load `foxglove/palletizer.json` for the layout.

foxglove-sdk accepts only the `foxglove.sdk.v1` WebSocket subprotocol, the same protocol that
older clients (Lichtblick, Foxglove Studio, roslibjs-foxglove) offer as `foxglove.websocket.v1`.
So the SDK server listens on a loopback port of its own and `_SubprotocolRelay` serves `port`:
it names `foxglove.sdk.v1` upstream for a client that offers only the old name, answers with
the name the client offered, and then relays the bytes unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
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


SDK_SUBPROTOCOL = 'foxglove.sdk.v1'
OLD_SUBPROTOCOL = 'foxglove.websocket.v1'
_PROTOCOL_HEADER = b'sec-websocket-protocol'
_MAX_HEAD = 64 * 1024  # [bytes] an HTTP head longer than this is refused


def _header_values(head: bytes, name: bytes) -> list[str]:
    """The comma-separated values of every `name` header line of an HTTP head."""
    values: list[str] = []
    for line in head.split(b'\r\n')[1:]:
        key, _, value = line.partition(b':')
        if key.strip().lower() == name:
            values += [v.strip() for v in value.decode('latin-1').split(',') if v.strip()]
    return values


def _with_protocol(head: bytes, protocol: str) -> bytes:
    """`head` with its Sec-WebSocket-Protocol lines replaced by one naming `protocol`."""
    lines = [
        ln
        for ln in head.split(b'\r\n')
        if ln.partition(b':')[0].strip().lower() != _PROTOCOL_HEADER
    ]
    lines.insert(1, b'Sec-WebSocket-Protocol: ' + protocol.encode())
    return b'\r\n'.join(lines)


class _SubprotocolRelay:
    """A loopback TCP relay in front of the SDK server that lets clients offering only
    `foxglove.websocket.v1` in: their upgrade request names `foxglove.sdk.v1` upstream and the
    101 answer names `foxglove.websocket.v1` back. Other handshakes pass unchanged (the SDK
    refuses those that offer neither name, as before). Runs its own asyncio loop in a thread."""

    def __init__(self, host: str, port: int, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(asyncio.start_server(self._client, host, port))
        self.port = int(self.server.sockets[0].getsockname()[1])
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer = None
        try:
            head, rest = await self._head(reader)
            offered = _header_values(head, _PROTOCOL_HEADER)
            old = OLD_SUBPROTOCOL in offered and SDK_SUBPROTOCOL not in offered
            if old:
                head = _with_protocol(head, SDK_SUBPROTOCOL)
            up_reader, up_writer = await asyncio.open_connection('127.0.0.1', self.upstream_port)
            up_writer.write(head + b'\r\n\r\n' + rest)
            answer, rest = await self._head(up_reader)
            if old and _header_values(answer, _PROTOCOL_HEADER) == [SDK_SUBPROTOCOL]:
                answer = _with_protocol(answer, OLD_SUBPROTOCOL)
            writer.write(answer + b'\r\n\r\n' + rest)
            await asyncio.gather(_pump(reader, up_writer), _pump(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a client or the server hung up mid-handshake
        finally:
            for w in (writer, up_writer):
                if w is not None:
                    w.close()

    @staticmethod
    async def _head(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
        """The HTTP head (without its blank line) and whatever already followed it."""
        data = b''
        while b'\r\n\r\n' not in data:
            chunk = await reader.read(4096)
            if not chunk or len(data) > _MAX_HEAD:
                raise asyncio.IncompleteReadError(data, None)
            data += chunk
        head, _, rest = data.partition(b'\r\n\r\n')
        return head, rest

    def stop(self) -> None:
        def close() -> None:
            self.server.close()
            self.loop.stop()

        self.loop.call_soon_threadsafe(close)
        self.thread.join(timeout=5)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until either side closes."""
    with contextlib.suppress(OSError):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(OSError):
        if writer.can_write_eof():
            writer.write_eof()


class FoxgloveBridgeNode(Node):
    def __init__(self) -> None:
        super().__init__('foxglove_bridge')
        host = str(self.declare_parameter('host', '127.0.0.1').value)
        port = int(self.declare_parameter('port', 8765).value)
        self.wanted = tuple(self.declare_parameter('topics', list(DEFAULT_TOPICS)).value)
        self.types = load_typestore()
        self.listener = _Listener()
        self.server = foxglove.start_server(
            name='palletizer', host='127.0.0.1', port=0, server_listener=self.listener
        )
        self.relay = _SubprotocolRelay(host, port, self.server.port)
        self.channels: dict[str, tuple[foxglove.Channel, str] | None] = {}
        self.watchers: dict[str, set[int]] = collections.defaultdict(set)
        self.subs: dict[str, Any] = {}
        self.get_logger().info(
            f'Foxglove WebSocket server on ws://{host}:{self.relay.port}; '
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
        self.relay.stop()
        self.server.stop()
        super().destroy_node()


def main(args: list[str] | None = None) -> None:
    run_node(FoxgloveBridgeNode, args)


if __name__ == '__main__':
    main()
