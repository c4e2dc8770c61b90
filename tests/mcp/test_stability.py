"""check_stability through the in-memory client: a run's stack rebuilt from its placements in
the simulated cell, the trials on it (a column holds, an overhanging carton falls), and each
refusal naming why."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import connected

STD_M = (0.42, 0.30, 0.18)  # 4.2 kg (docs/levels.md §1.1)


def _row(seq: int, x: float, layer: int, placed: bool = True) -> dict:
    L, W, H = STD_M
    pose = {'x': x, 'y': 0.0, 'z': H / 2 + (layer - 1) * H, 'yaw': 0.0}
    return {
        'seed': 7,
        'seq': seq,
        'package_id': f'std_m-{seq:02d}',
        'package_type': 'std_m',
        'mass_kg': 4.2,
        'dims_m': list(STD_M),
        'layer': layer,
        'planned_pose': pose,
        'actual_pose': pose,
        'error_xy_m': 0.0,
        'error_yaw_rad': 0.0,
        'support_ratio': 1.0,
        'overhang_m': 0.0,
        'placed': placed,
    }


def _run(runs: Path, name: str, rows: list[dict]) -> None:
    d = runs / name
    d.mkdir(parents=True)
    (d / 'events.jsonl').write_text('')
    (d / 'episodes.jsonl').write_text(json.dumps({'seed': 7, 'level': 11, 'success': True}) + '\n')
    (d / 'placements.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))


def _call(cell, args: dict):
    async def go():
        async with connected(cell) as client:
            return await client.call_tool('check_stability', args)

    return anyio.run(go)


@pytest.mark.sim
def test_a_column_holds_every_trial_and_a_carton_left_out_is_counted(cell):
    rows = [_row(0, 0.0, 1), _row(1, 0.0, 2), _row(2, 0.0, 3), _row(3, 0.9, 1, placed=False)]
    _run(cell.runs_dir, '20260101-000000-column', rows)
    r = _call(cell, {'run_id': '20260101-000000-column'})
    assert not r.is_error, r.content
    out = r.structured_content
    assert out['stack'] == '20260101-000000-column seed 7'
    assert (out['cartons'], out['left_out']) == (3, 1)
    assert out['held_all'] is True and out['summary']['falls'] == 0
    kinds = [t['kind'] for t in out['trials']]
    assert kinds.count('jolt') == 15 and 'beam' in kinds and 'eumos' in kinds


@pytest.mark.sim
def test_a_carton_overhanging_the_edge_falls(cell):
    L = STD_M[0]
    x0 = 0.6 - L / 2  # flush with the pallet's +x edge (pallet frame)
    _run(cell.runs_dir, '20260101-000000-overhang', [_row(0, x0, 1), _row(1, x0 + 0.45 * L, 2)])
    r = _call(cell, {'run_id': '20260101-000000-overhang', 'seed': 7})
    assert not r.is_error, r.content
    out = r.structured_content
    assert out['held_all'] is False
    assert 'std_m-01' in out['summary']['fell_ids']


@pytest.mark.parametrize(
    ('args', 'words'),
    [
        ({}, ['no stack yet', 'run_episode first', 'list_runs']),
        ({'run_id': 'nope'}, ["'nope'", 'list_runs']),
        ({'run_id': '20260101-000000-empty'}, ['no placed carton']),
        ({'run_id': '20260101-000000-empty', 'seed': 101}, ['seed', 'reserved']),
    ],
)
def test_check_stability_refuses_naming_why(cell, args, words):
    _run(cell.runs_dir, '20260101-000000-empty', [_row(0, 0.0, 1, placed=False)])
    r = _call(cell, args)
    assert r.is_error
    for w in words:
        assert w in r.content[0].text, r.content[0].text
