"""Run inside a network namespace: the foxglove_bridge node of `viz:=foxglove`, a publisher of
three of its topics, and a Foxglove WebSocket client; prints RESULT {json}."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import rclpy
from palletizer.launcher.graph import describe, parse_launch_args
from palletizer.launcher.process import node_argv
from palletizer.nodes.qos import EVENTS, LATCHED
from palletizer_msgs.msg import EpisodeEvent, HeightMap
from rclpy.executors import SingleThreadedExecutor
from rclpy.serialization import deserialize_message
from std_msgs.msg import String
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Subprotocol

WANT = ('/robot_description', '/palletizer/heightmap', '/palletizer/episode_events')


def old_client(port: int, deadline: float) -> dict:
    """A client that offers only `foxglove.websocket.v1` (Lichtblick, Foxglove Studio): the
    subprotocol it got and the robot description it received on subscribing."""
    got: dict = {'old_subprotocol': None, 'old_description': None, 'old_refused': None}
    try:
        ws = connect(
            f'ws://127.0.0.1:{port}',
            subprotocols=[Subprotocol('foxglove.websocket.v1')],
            open_timeout=5,
        )
    except InvalidStatus as exc:
        got['old_refused'] = exc.response.status_code
        return got
    with ws:
        got['old_subprotocol'] = ws.subprotocol
        subscribed = False
        while time.monotonic() < deadline and got['old_description'] is None:
            try:
                frame = ws.recv(timeout=1.0)
            except TimeoutError:
                continue
            if isinstance(frame, str):
                msg = json.loads(frame)
                for c in msg.get('channels', []) if msg.get('op') == 'advertise' else []:
                    if c['topic'] == '/robot_description' and not subscribed:
                        sub = {'id': 3, 'channelId': c['id']}
                        ws.send(json.dumps({'op': 'subscribe', 'subscriptions': [sub]}))
                        subscribed = True
            elif frame[0] == 0x01 and struct.unpack_from('<I', frame, 1)[0] == 3:
                got['old_description'] = deserialize_message(frame[13:], String).data
    return got


def main() -> None:
    spec = next(
        n for n in describe(parse_launch_args(['viz:=foxglove'])) if n.name == 'foxglove_bridge'
    )
    spec = replace(spec, parameters={**spec.parameters, 'use_sim_time': False})
    work = Path(tempfile.mkdtemp())
    bridge = subprocess.Popen(node_argv(spec, work), stdout=sys.stdout, stderr=sys.stderr)
    rclpy.init()
    node = rclpy.create_node('foxglove_test_publisher')
    hm = HeightMap(ny=2, nx=3, cell_size=0.01, cells=[0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    hm.observed = [True] * 6
    node.create_publisher(String, '/robot_description', LATCHED).publish(String(data='<robot/>'))
    node.create_publisher(HeightMap, '/palletizer/heightmap', LATCHED).publish(hm)
    ev = EpisodeEvent(run_id='r', seed=1, seq=0, kind='plan', payload_json='{}')
    node.create_publisher(EpisodeEvent, '/palletizer/episode_events', EVENTS).publish(ev)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    spin = threading.Thread(target=ex.spin, daemon=True)
    spin.start()
    out: dict = {'advertised': {}, 'payload_ok': False}
    try:
        ws = None
        deadline = time.monotonic() + 40
        while ws is None and time.monotonic() < deadline:
            try:
                ws = connect(
                    f'ws://127.0.0.1:{spec.parameters["port"]}',
                    subprotocols=[Subprotocol('foxglove.sdk.v1')],
                    open_timeout=2,
                )
            except OSError:
                time.sleep(0.3)
        assert ws is not None, 'no Foxglove server on the port'
        with ws:
            out['subprotocol'] = ws.subprotocol
            channels: dict[str, dict] = {}
            while not set(WANT) <= set(channels) and time.monotonic() < deadline:
                try:
                    frame = ws.recv(timeout=1.0)
                except TimeoutError:
                    continue
                if isinstance(frame, str):
                    msg = json.loads(frame)
                    if msg.get('op') == 'advertise':
                        for c in msg['channels']:
                            channels[c['topic']] = c
            out['advertised'] = {
                t: {k: c[k] for k in ('encoding', 'schemaName', 'schemaEncoding', 'schema')}
                for t, c in channels.items()
            }
            # Subscribe to the height map: the latched message arrives as the published CDR.
            cid = channels['/palletizer/heightmap']['id']
            ws.send(
                json.dumps({'op': 'subscribe', 'subscriptions': [{'id': 7, 'channelId': cid}]})
            )
            while time.monotonic() < deadline and not out['payload_ok']:
                try:
                    frame = ws.recv(timeout=1.0)
                except TimeoutError:
                    continue
                if isinstance(frame, bytes) and frame[0] == 0x01:
                    sub_id = struct.unpack_from('<I', frame, 1)[0]
                    # The published CDR, decoded (padding bytes are not specified, so the
                    # bytes are compared through the message).
                    got = deserialize_message(frame[13:], HeightMap)
                    out['payload_ok'] = sub_id == 7 and (
                        (got.ny, got.nx, list(got.cells), list(got.observed))
                        == (hm.ny, hm.nx, list(hm.cells), list(hm.observed))
                    )
        out.update(old_client(spec.parameters['port'], time.monotonic() + 20))
    finally:
        bridge.send_signal(2)
        try:
            out['bridge_exit'] = bridge.wait(timeout=20)
        except subprocess.TimeoutExpired:
            bridge.kill()
            out['bridge_exit'] = 'hung'
        ex.shutdown()
        spin.join(timeout=5)
        node.destroy_node()
        rclpy.try_shutdown()
    print('RESULT ' + json.dumps(out), flush=True)


if __name__ == '__main__':
    main()
