"""viz:=foxglove: a Foxglove WebSocket client sees the cell's topics with their ROS 2 schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


@pytest.fixture(scope='module')
def run() -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One bridge, its publisher and its clients (foxglove_run.py), shared by the tests."""
    proc = run_isolated([sys.executable, str(HERE / 'foxglove_run.py')], timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, json.loads(lines[0].split(' ', 1)[1])


def test_foxglove_bridge_advertises_ros2msg_channels_and_forwards_the_cdr(run):
    proc, got = run
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


def test_foxglove_bridge_accepts_a_client_offering_only_foxglove_websocket_v1(run):
    proc, got = run
    # Lichtblick and Foxglove Studio offer the protocol under its old name only.
    assert got['old_refused'] is None, f'HTTP {got["old_refused"]} to foxglove.websocket.v1'
    assert got['old_subprotocol'] == 'foxglove.websocket.v1', proc.stderr[-3000:]
    assert got['old_description'] == '<robot/>'
