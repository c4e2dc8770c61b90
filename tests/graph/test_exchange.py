"""Two nodes in separate processes exchange every kind of interface the project relies on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


def test_two_processes_exchange_topic_service_actions_and_set_io():
    proc = run_isolated([sys.executable, str(HERE / 'run_pair.py')], timeout=120)
    lines = [ln for ln in proc.stdout.splitlines() if 'EXCHANGE ' in ln]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert lines, proc.stdout[-3000:]
    assert lines[0].startswith('[exchange_client] '), 'log lines carry the node name'
    got = json.loads(lines[0].split('EXCHANGE ', 1)[1])
    # A palletizer_msgs message on a topic (reliable, transient local): three in order.
    assert got['events'] == sorted(got['events']) and len(got['events']) == 3
    # A palletizer_msgs service call: the server saw our request.
    assert got['plan'] == {'slot': 'score-L1-std_m-00', 'z': 0.09, 'code': 0}
    # The UR driver's SetIO: digital out 0 accepted.
    assert got['set_io'] is True
    # A palletizer_msgs action with feedback.
    assert got['pick']['accepted'] and got['pick']['cups'] == 9
    assert got['pick']['feedback'] and got['pick']['feedback'][-1] == 1.0
    # A FollowJointTrajectory goal under the UR driver's action name, with feedback.
    assert got['fjt']['error_code'] == 0
    assert got['fjt']['feedback_joints'] == [[f'j{i}' for i in range(6)]]
    # The required client exited, so the launcher stopped the server.
    assert 'required node exchange_client exited with code 0' in proc.stdout
