"""The panel's episode scene: rows, carton states, centres of mass, support polygon, charts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from palletizer.panel.scene import EpisodeScene, list_runs, read_run


def _placement(seq, pid, x, y, z, dims=(0.4, 0.3, 0.2), placed=True, yaw=0.0):
    pose = {'x': x, 'y': y, 'z': z, 'yaw': yaw}
    return {
        'seed': 1,
        'seq': seq,
        'package_id': pid,
        'package_type': pid.split('-')[0],
        'dims_m': list(dims),
        'layer': 1 if z < 0.15 else 2,
        'planned_pose': dict(pose),
        'actual_pose': dict(pose),
        'error_xy_m': 0.0012,
        'support_ratio': 1.0,
        'placed': placed,
    }


def _event(seq, kind, pid='', ts=0.0, **payload):
    return {'seed': 1, 'seq': seq, 'ts': ts, 'kind': kind, 'package_id': pid, 'payload': payload}


def _state(after, cog, margin):
    return {
        'seed': 1,
        'after_seq': after,
        'cog_x': cog[0],
        'cog_y': cog[1],
        'cog_z': cog[2],
        'stability_margin_m': margin,
    }


def _two_cartons() -> EpisodeScene:
    sc = EpisodeScene(seed=1)
    sc.on_event(_event(0, 'perceive', ts=1.0))
    sc.on_event(_event(1, 'pick', 'a-00', 2.0, mass_kg=2.0, cog_offset_mm=[10.0, 0.0, 0.0]))
    sc.on_event(_event(2, 'place', 'a-00', 5.0))
    sc.on_placement(_placement(2, 'a-00', -0.2, 0.0, 0.1))
    sc.on_state(_state(2, (-0.2, 0.0, 0.1), 0.15))
    sc.on_event(_event(3, 'pick', 'b-00', 7.0, mass_kg=6.0, cog_offset_mm=[0.0, 0.0, 0.0]))
    sc.on_event(_event(4, 'place', 'b-00', 11.5))
    sc.on_placement(_placement(4, 'b-00', 0.2, 0.0, 0.1, placed=False, yaw=math.pi / 2))
    sc.on_state(_state(4, (0.1, 0.0, 0.1), -0.01))
    return sc


def test_rows_read_like_the_console_line():
    rows = _two_cartons().rows()
    assert [r['package_id'] for r in rows] == ['a-00', 'b-00']
    assert rows[0] == {
        'seq': 2,
        'package_id': 'a-00',
        'type': 'a',
        'layer': 1,
        'error_mm': 1.2,
        'support_pct': 100.0,
        'margin_mm': 150.0,
        'verdict': 'ok',
    }
    assert rows[1]['verdict'] == 'out of tolerance'
    assert rows[1]['margin_mm'] == -10.0


def test_scene_colours_states_and_draws_both_centres_of_mass():
    sc = _two_cartons()
    scene = sc.scene()
    assert [c['state'] for c in scene['cartons']] == ['placed', 'tolerance']
    assert scene['cog_true'] == [0.1, 0.0, 0.1]
    # Gauge masses 2 and 6 kg at x = -0.2 + 0.01 (offset along the carton's x) and 0.2.
    assert scene['cog_measured'] == pytest.approx([(2 * -0.19 + 6 * 0.2) / 8, 0.0, 0.1])
    assert scene['margin_mm'] == -10.0
    hull = scene['support']
    xs = [p[0] for p in hull]
    ys = [p[1] for p in hull]
    # a-00 spans x -0.4..0.0; b-00 is turned a quarter: x 0.05..0.35, y -0.2..0.2.
    assert min(xs) == pytest.approx(-0.4) and max(xs) == pytest.approx(0.35)
    assert min(ys) == pytest.approx(-0.2) and max(ys) == pytest.approx(0.2)


def test_a_carton_on_top_is_not_part_of_the_support_polygon():
    sc = _two_cartons()
    sc.on_placement(_placement(6, 'c-00', 0.9, 0.0, 0.3))  # 0.2 m up, far off to the side
    assert max(p[0] for p in sc.scene()['support']) == pytest.approx(0.35)


def test_the_failed_carton_is_marked_whether_placed_or_in_hand():
    sc = _two_cartons()
    sc.on_event(_event(5, 'settle', 'b-00', 12.0))
    sc.on_event(_event(6, 'fail', '', 12.5, cause='stack_collapse'))
    assert sc.scene()['cartons'][1]['state'] == 'failed'
    assert sc.rows()[1]['verdict'] == 'failed: stack_collapse'

    held = _two_cartons()
    held.on_event(_event(5, 'pick', 'c-00', 13.0, mass_kg=1.0, type='c'))
    held.on_event(_event(6, 'fail', '', 14.0, cause='wrong_placement'))
    assert [c['state'] for c in held.scene()['cartons']] == ['placed', 'tolerance']
    last = held.rows()[-1]
    assert last['package_id'] == 'c-00' and last['verdict'] == 'failed: wrong_placement'


def test_cycle_times_run_from_place_to_place():
    sc = _two_cartons()
    assert sc.cycle_times() == [{'package_id': 'a-00', 's': 4.0}, {'package_id': 'b-00', 's': 6.5}]
    assert sc.margins() == [{'seq': 2, 'mm': 150.0}, {'seq': 4, 'mm': -10.0}]


def _write(path: Path, rows) -> None:
    path.write_text(''.join(json.dumps(r) + '\n' for r in rows), encoding='utf-8')


def test_a_run_folder_reads_back_with_open_and_closed_episodes(tmp_path):
    run = tmp_path / 'runs' / '20261202-100000-pallet'
    run.mkdir(parents=True)
    _write(run / 'events.jsonl', [_event(1, 'pick', 'a-00', 1.0, mass_kg=2.0)])
    _write(run / 'placements.jsonl', [_placement(2, 'a-00', 0.0, 0.0, 0.1)])
    _write(run / 'pallet_states.jsonl', [_state(2, (0.0, 0.0, 0.1), 0.2)])
    _write(
        run / 'snapshots.jsonl',
        [{'seed': 1, 'after_seq': 2, 'view': 'top', 'path': '1/002-top.png'}],
    )
    # Seed 2 is still open: events only, and a torn last line (the writer is mid-line).
    with (run / 'events.jsonl').open('a', encoding='utf-8') as f:
        f.write(json.dumps({**_event(0, 'perceive'), 'seed': 2}) + '\n{"seed": 2, "se')
    _write(
        run / 'episodes.jsonl',
        [{'seed': 1, 'level': 11, 'success': True, 'n_placed': 1, 'n_objects': 1,
          'oracle': False, 'metrics': {'aborted': False}}],
    )  # fmt: skip
    rec = read_run(run, url_prefix='/api/history/x')
    assert [e['seed'] for e in rec.episodes] == [1, 2]
    first, second = rec.episodes
    assert first['success'] is True and not first['open']
    assert first['snapshots'][0]['url'] == '/api/history/x/files/1/002-top.png'
    assert first['scene']['cartons'][0]['package_id'] == 'a-00'
    assert second['open'] and second['cartons'] == []
    (tmp_path / 'runs' / 'not-a-run').mkdir()
    runs = list_runs(tmp_path / 'runs')
    assert [r['name'] for r in runs] == [run.name]
    assert runs[0]['succeeded'] == 1 and runs[0]['level'] == 11


def test_an_aborted_episode_counts_its_level_s_cartons(tmp_path):
    run = tmp_path / '20261202-100000-pallet'
    run.mkdir()
    _write(
        run / 'episodes.jsonl',
        [{'seed': 2, 'level': 12, 'n_objects': None, 'n_placed': 1, 'success': False,
          'metrics': {'aborted': True}}],
    )  # fmt: skip
    (ep,) = read_run(run).episodes
    assert ep['aborted'] and ep['n_objects'] == 6  # level 12 has six cartons
    (row,) = list_runs(tmp_path)
    assert (row['placed'], row['cartons'], row['aborted']) == (1, 6, 1)


def test_a_settle_with_its_cycle_gives_the_bar_its_phases_and_their_sum():
    sc = _two_cartons()
    phases = [['wait', 0.5], ['descend', 1.25], ['cross', 2.0], ['settle', 1.5]]
    sc.on_event(
        _event(5, 'settle', 'b-00', 11.6, layer=1, drift_mm=0.0, cycle_s=5.25, phases=phases)
    )
    assert sc.cycle_times() == [
        {'package_id': 'a-00', 's': 4.0},
        {'package_id': 'b-00', 's': 5.25, 'phases': phases},
    ]
