"""`scripts/bench graph` pieces without a graph: comparison, option checks and the summary."""

from __future__ import annotations

import json

import pytest
from palletizer.cli import bench_graph as bg
from palletizer.core.errors import ConfigError

EPISODE = {
    'seed': 2,
    'level': 11,
    'n_objects': 4,
    'n_placed': 4,
    'n_misrouted': 0,
    'success': True,
    'duration_s': 61.25,
    'failure': None,
    'oracle': True,
    'git_sha': 'abc1234',
    'task': 'table',
    'metrics': {'fill_ratio': 0.31, 'min_margin_m': 0.2, 'aborted': False},
}


def _row(seq: int, x: float = 0.1, layer: int = 1) -> dict:
    """A placements.jsonl row as the telemetry node writes it."""
    return {
        'seed': 2,
        'seq': seq,
        'package_id': f'std_m-{seq:03d}',
        'package_type': 'std_m',
        'layer': layer,
        'placed': True,
        'actual_pose': {'x': x, 'y': -0.2, 'z': 0.15, 'yaw': 1.5707963267948966},
    }


def _local(seq: int, x: float = 0.1, layer: int = 1) -> dict:
    """The same placement from the in-process MemorySink (pose as a list)."""
    return {
        'seq': seq,
        'package_id': f'std_m-{seq:03d}',
        'layer': layer,
        'placed': True,
        'actual_pose': [x, -0.2, 0.15, 1.5707963267948966],
    }


def test_equal_episodes_and_placements_compare_equal():
    assert bg.compare_episode(EPISODE, json.loads(json.dumps(EPISODE))) == []
    assert bg.compare_placements([_row(0), _row(1)], [_local(0), _local(1)]) == []


def test_comparison_names_the_differing_fields():
    other = json.loads(json.dumps(EPISODE))
    other['metrics']['fill_ratio'] = 0.3100000000000001  # exact: one ulp is a difference
    other['n_placed'] = 3
    assert bg.compare_episode(EPISODE, other) == ['metrics.fill_ratio', 'n_placed']
    assert bg.compare_episode(EPISODE, {**EPISODE, 'success': 1}) == ['success']
    got = bg.compare_placements([_row(0), _row(1, x=0.1000001)], [_local(0), _local(1, layer=2)])
    assert got == ['placements[1].actual_pose.x', 'placements[1].layer']
    assert bg.compare_placements([_row(0)], [_local(0), _local(1)]) == ['placements']
    assert bg.compare_outcome(EPISODE, {**EPISODE, 'duration_s': 70.0}) == []
    assert bg.compare_outcome(EPISODE, {**EPISODE, 'success': False, 'failure': 'drop'}) == [
        'success',
        'failure',
    ]


def _run(level, mode, seeds=(1, 2, 3), rc=0, wall=30.0, bad_seed=None, tail='') -> bg.GraphRun:
    eps = [{**EPISODE, 'seed': s, 'level': level} for s in seeds]
    rows = [{**_row(k), 'seed': s} for s in seeds for k in range(2)]
    if bad_seed is not None:
        rows[2 * seeds.index(bad_seed) + 1]['layer'] = 2
    return bg.GraphRun(level, mode, tuple(seeds), rc, wall, eps, rows, tail)


def _refs(level, seeds=(1, 2, 3)) -> dict:
    return {
        s: {
            'episode': {**EPISODE, 'seed': s, 'level': level},
            'placements': [_local(0), _local(1)],
        }
        for s in seeds
    }


def test_check_run_reports_field_seed_and_mode_and_a_bad_exit():
    assert bg.check_run(_run(11, 'fast_forward'), _refs(11)) == []
    (d,) = bg.check_run(_run(11, 'fast_forward', bad_seed=2), _refs(11))
    assert (d['level'], d['seed'], d['mode'], d['field']) == (
        11,
        2,
        'fast_forward',
        'placements[1].layer',
    )
    assert (d['graph'], d['in_process']) == (2, 1)
    # Interpolated runs compare the outcome only: a different placement is not a mismatch.
    assert bg.check_run(_run(21, 'interpolated', bad_seed=2), _refs(21)) == []
    crashed = _run(11, 'fast_forward', rc=None, tail='a\nTraceback (most recent call last)\nb')
    crashed.episodes = crashed.episodes[:1]
    got = bg.check_run(crashed, _refs(11))
    assert [(d['seed'], d['field']) for d in got] == [
        (2, 'episode.missing'),
        (3, 'episode.missing'),
        (None, 'exit_code'),
    ]
    assert got[-1]['why'] == 'timed out, Traceback in its output'
    assert got[-1]['last_lines'][-1] == 'b'
    # Exit 1 is right when an episode fails in both wirings.
    failing = _refs(31)
    failing[3]['episode'] = {**failing[3]['episode'], 'success': False, 'failure': 'drop'}
    run = _run(31, 'interpolated', rc=1)
    run.episodes[2] = {**run.episodes[2], 'success': False, 'failure': 'drop'}
    assert bg.check_run(run, failing) == []


def test_options_are_checked_before_anything_runs():
    levels, seeds, interp = bg.check_options()
    assert levels == bg.PROTOCOL_LEVELS and seeds == (1, 2, 3) and interp == (11, 21, 31)
    assert bg.check_options([11, 21])[2] == (11, 21)
    assert bg.check_options([12, 11], skip_interpolated=True)[2] == ()
    assert bg.check_options([11], interpolated_levels=[32])[2] == (32,)
    with pytest.raises(ConfigError, match=r'--levels 19: no such level; valid levels: .*11'):
        bg.check_options([11, 19])
    with pytest.raises(ConfigError, match=r'--interpolated-levels 99: no such level'):
        bg.check_options([11], interpolated_levels=[99])
    with pytest.raises(ConfigError, match=r'--seeds 101: .*above 100 are refused'):
        bg.check_options(seeds=[99, 100, 101])
    with pytest.raises(ConfigError, match=r'--seeds 1 3: expected consecutive'):
        bg.check_options(seeds=[1, 3])
    with pytest.raises(ConfigError, match=r"--planner 'bean'.*did you mean 'beam'"):
        bg.check_options(planner='bean')
    with pytest.raises(SystemExit) as exc:  # refused before any graph starts
        bg.parse_options(['--levels', '11', '--seeds', '101'], prog='scripts/bench graph')
    assert exc.value.code == 2
    assert bg.parse_options(['--levels', '11', '21', '--skip-interpolated']) == {
        'levels': [11, 21],
        'seeds': [1, 2, 3],
        'planner': 'beam',
        'interpolated_levels': None,
        'skip_interpolated': True,
        'keep': False,
    }


def test_summary_counts_episodes_mismatches_and_median_wall_per_episode():
    runs = [
        _run(11, 'fast_forward', wall=30.0),
        _run(12, 'fast_forward', wall=45.0, bad_seed=3),
        _run(13, 'fast_forward', wall=60.0),
        _run(11, 'interpolated', wall=450.0),
    ]
    runs[1].episodes[0] = {**runs[1].episodes[0], 'success': False}
    for r in runs:
        r.mismatches = bg.check_run(r, _refs(r.level))
    out = bg.summarise(runs, 'beam', (1, 2, 3), 'abc1234')
    json.dumps(out)  # JSON-safe
    assert out['graph_episodes'] == 12 and out['graph_episodes_ok'] == 11
    assert out['mismatches'] == len(out['mismatch_details']) == 2
    assert {(d['level'], d['seed'], d['field']) for d in out['mismatch_details']} == {
        (12, 1, 'success'),
        (12, 3, 'placements[1].layer'),
    }
    assert out['graph_equals_loop'] is False
    assert out['wall_s_per_episode_median'] == 17.5  # median of 10, 15, 20, 150
    ff, ip = out['modes']['fast_forward'], out['modes']['interpolated']
    assert (ff['runs'], ff['graph_episodes'], ff['mismatches'], ff['episodes_mismatched']) == (
        3,
        9,
        2,
        2,
    )
    assert ff['wall_s_per_episode_median'] == 15.0
    assert (ip['graph_episodes_ok'], ip['mismatches'], ip['wall_s_per_episode_median']) == (
        3,
        0,
        150.0,
    )
    assert [r['level'] for r in out['runs']] == [11, 12, 13, 11]
