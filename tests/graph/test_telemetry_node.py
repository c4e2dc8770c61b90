"""The telemetry node records episodes, binds one run, and survives SIGTERM, SIGKILL and ENOSPC."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


@pytest.fixture(scope='module')
def got() -> dict:
    """One graph run's report, shared by the tests below (a graph run is costly)."""
    # unshare -m: the run mounts a tmpfs that it fills (a real ENOSPC), in its own namespace
    argv = ['unshare', '-m', '--propagation', 'private', sys.executable]
    proc = run_isolated([*argv, str(HERE / 'telemetry_run.py')], timeout=180)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split(' ', 1)[1])
    got['log_tail'] = proc.stdout[-3000:] + proc.stderr[-3000:]  # the nodes' own output
    return got


def test_telemetry_node_writes_confirms_counts_and_aborts_on_sigterm(got):
    assert got['ok'] == {'code': 0, 'msg': '', 'written': 10}
    assert got['mismatch']['code'] == 601 and got['mismatch']['written'] == 3
    assert '3 events written, the director published 4' in got['mismatch']['msg']
    assert got['wrong_seed']['code'] == 602
    assert got['off']['code'] == 604 and got['off_files'] == []
    # the node that cannot write and the one whose disk filled both stayed up
    assert got['exit'] == {
        'telemetry': 0,
        'telemetry_off': 0,
        'telemetry_ro': 0,
        'telemetry_full': -9,  # SIGKILLed on purpose
    }, got['log_tail']
    eps = got['episodes']
    assert [e['seed'] for e in eps] == [5, 6, 7]
    assert eps[0]['success'] and eps[0]['metrics']['mean_planner_score'] == 0.7
    # SIGTERM (from outside a launcher) closed seed 7 as aborted, saying so, with no invented
    # failure.
    assert eps[2]['metrics'] == {
        'aborted': True,
        'abort_reason': 'the run was stopped by a signal from outside its launcher (SIGINT or '
        'SIGTERM)',
    }
    assert eps[2]['failure'] is None
    assert not eps[2]['success'] and (eps[2]['level'], eps[2]['task']) == (11, 'table')
    # ... and with the run info given to begin_episode (it used to say oracle false)
    assert (eps[2]['oracle'], eps[2]['n_objects']) == (True, 3)
    assert [(e['seed'], e['seq']) for e in got['events']] == (
        [(5, s) for s in range(10)] + [(6, s) for s in range(3)] + [(7, s) for s in range(2)]
    )
    place = next(e for e in got['events'] if e['kind'] == 'place')
    assert place['payload'] == {'error_xy_mm': 3.0, 'error_yaw_deg': 1.15, 'overhang_mm': 0.0}
    assert got['placements'] == 2
    # Foxglove's mcap reader reads the same bag: ros2msg schemas and the same messages, as many
    # events as the telemetry wrote to events.jsonl.
    assert got['bag_mcap'] == got['bag'] and got['bag_mcap_schemas'] == ['ros2msg']
    assert got['bag_mcap']['/palletizer/episode_events'] == len(got['events'])
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


def test_telemetry_node_begin_episode_binds_one_run_and_survives_a_full_disk(got):
    run_dir = got['begin']['run_dir']
    assert got['begin'] == {'code': 0, 'msg': '', 'run_dir': run_dir}
    assert run_dir.startswith('/') and run_dir.endswith('/telemetry/20260509-120000-graph')
    # a second director on the domain is refused, and its events (seed 9) were dropped
    assert got['wrong_run']['code'] == 606
    assert 'serves run 20260509-120000, not 20260509-120001' in got['wrong_run']['msg']
    assert got['again']['code'] == 607
    assert {e['seed'] for e in got['events']} == {5, 6, 7}
    assert got['off_begin']['code'] == 604
    # runs folder that cannot be made: the node is up and answers with codes
    assert got['ro_begin']['code'] == 605 and got['ro_begin']['run_dir'] == ''
    assert got['ro_begin']['msg'].endswith('blocked/runs: cannot create it (Not a directory)')
    assert got['ro_end']['code'] == 609
    # the disk filled during episode 1: a clear error, no crash, and the node goes on
    assert got['full_begin']['code'] == 0
    assert got['full_end']['code'] == 609
    assert got['full_end']['msg'].endswith('episodes.jsonl: No space left on device')
    assert got['full_begin_2']['code'] == 605
    assert 'not writable (No space left on device)' in got['full_begin_2']['msg']
    assert got['full_begin_3']['code'] == 0 and got['full_end_2']['code'] == 0
    assert [e['seed'] for e in got['full_episodes']] == [2]
    # SIGKILLed after episode 2's end: the bag opens and holds what came before that end
    assert got['full_bag_files'] == ['bag.mcap', 'metadata.yaml']
    assert got['full_bag']['events'] == [[1, 0], [1, 1], [1, 2]]
    assert got['full_bag']['counts']['/palletizer/episode_events'] == 3
