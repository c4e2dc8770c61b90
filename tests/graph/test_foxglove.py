"""viz:=foxglove: a Foxglove WebSocket client sees the cell's topics with their ROS 2 schemas."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


def test_foxglove_bridge_advertises_ros2msg_channels_and_forwards_the_cdr():
    proc = run_isolated([sys.executable, str(HERE / 'foxglove_run.py')], timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split(' ', 1)[1])
    assert got['subprotocol'] == 'foxglove.sdk.v1'  # the protocol the Foxglove app speaks
    adv = got['advertised']
    types = {
        '/robot_description': 'std_msgs/msg/String',
        '/palletizer/heightmap': 'palletizer_msgs/msg/HeightMap',
        '/palletizer/episode_events': 'palletizer_msgs/msg/EpisodeEvent',
    }
    assert {t: adv[t]['schemaName'] for t in types} == types, adv.keys()
    for t in types:
        assert (adv[t]['encoding'], adv[t]['schemaEncoding']) == ('cdr', 'ros2msg')
    assert 'bool[] observed' in adv['/palletizer/heightmap']['schema']
    assert 'string payload_json' in adv['/palletizer/episode_events']['schema']
    # Topics nobody publishes are not advertised.
    assert '/palletizer/points' not in adv
    # The latched height map, published before any client connected, reaches the late client.
    assert got['payload_ok'], 'the height map did not arrive (as its CDR) on the subscription'
    assert got['bridge_exit'] == 0
