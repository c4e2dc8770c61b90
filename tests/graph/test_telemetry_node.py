"""The telemetry node records episodes across processes, confirms counts and survives SIGTERM."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


def test_telemetry_node_writes_confirms_counts_and_aborts_on_sigterm():
    proc = run_isolated([sys.executable, str(HERE / 'telemetry_run.py')], timeout=180)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split(' ', 1)[1])
    assert got['ok'] == {'code': 0, 'msg': '', 'written': 10}
    assert got['mismatch']['code'] == 601 and got['mismatch']['written'] == 3
    assert '3 events written, the director published 4' in got['mismatch']['msg']
    assert got['wrong_seed']['code'] == 602
    assert got['off']['code'] == 604 and got['off_files'] == []
    assert got['exit'] == {'telemetry': 0, 'telemetry_off': 0}
    eps = got['episodes']
    assert [e['seed'] for e in eps] == [5, 6, 7]
    assert eps[0]['success'] and eps[0]['metrics']['mean_planner_score'] == 0.7
    # SIGTERM closed seed 7 as aborted, with no invented failure.
    assert eps[2]['metrics'] == {'aborted': True} and eps[2]['failure'] is None
    assert not eps[2]['success'] and (eps[2]['level'], eps[2]['task']) == (11, 'table')
    assert [(e['seed'], e['seq']) for e in got['events']] == (
        [(5, s) for s in range(10)] + [(6, s) for s in range(3)] + [(7, s) for s in range(2)]
    )
    place = next(e for e in got['events'] if e['kind'] == 'place')
    assert place['payload'] == {'error_xy_mm': 3.0, 'error_yaw_deg': 1.15, 'overhang_mm': 0.0}
    assert got['placements'] == 2
    # joint states are best effort (sensor QoS): under load some may be dropped
    assert 1 <= got['bag'].pop('/joint_states') <= 5
    assert got['bag'] == {
        '/tf': 1,
        '/tf_static': 0,
        '/palletizer/episode_events': 15,
        '/palletizer/placements': 2,
        '/palletizer/pallet_states': 2,
        '/palletizer/heightmap': 1,
    }
    # the bag stores the payloads as written to disk: mm and degrees
    assert got['bag_events'][3] == place['payload']
