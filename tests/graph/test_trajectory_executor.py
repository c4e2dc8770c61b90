"""The trajectory_executor picks and places a carton through the real cell_bridge, across processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.graph.isolation import run_isolated

HERE = Path(__file__).parent


@pytest.mark.parametrize('speed', ['1', '0'])
def test_executor_refuses_unreachable_then_picks_and_places_within_20_mm(speed):
    # speed 1: servo-tracked, verified from the wrench; 0: fast-forward, vacuum sensor.
    proc = run_isolated(
        [sys.executable, str(HERE / 'executor_run.py'), 'level:=11', 'seed:=1', f'speed:={speed}'],
        timeout=90,
    )
    lines = [ln for ln in proc.stdout.splitlines() if 'EXECUTOR ' in ln]
    assert proc.returncode == 0 and lines, proc.stdout[-4000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split('EXECUTOR ', 1)[1])
    far = got['far']
    assert far['code'] == 301 and far['cause'] == 'ik_unreachable'  # Pick IK_UNREACHABLE
    assert 'failing waypoint 0' in far['msg']
    # Refused before any goal: no simulated time passed and the arm did not move.
    assert far['sim_dt'] == 0.0 and far['dq'] == 0.0
    bad = got['invalid']  # Pick INVALID_REQUEST: not a cell failure, so no cause; nothing moved
    assert bad['code'] == 305 and bad['cause'] == '' and bad['sim_dt'] == 0.0 and bad['dq'] == 0.0
    assert bad['msg'].startswith('invalid Pick request: Observation.position = ')
    pick = got['pick']
    assert pick['code'] == 0 and pick['cause'] == '' and pick['msg'] == ''
    assert pick['held'] == pick['id'] and pick['cups'] > 0 and pick['ratio'] == 0.0
    assert pick['phases'][-3:] == ['seal', 'lift', 'verify'] and pick['phases'][0] == 'cross'
    if speed == '1':  # fast-forward sends no controller feedback inside a goal
        assert 'descend' in pick['phases']
    place = got['place']
    assert place['code'] == 0 and place['cause'] == '' and place['failing_waypoint'] == -1
    assert place['held'] == '' and place['settle_code'] == 0
    assert place['phases'][-2:] == ['release', 'retract']
    assert place['err_xy_m'] < 0.020 and abs(place['err_z_m']) < 0.010
    assert abs(place['err_yaw']) < 0.05
    # MoveArm: the empty arm moves to wait above the source, then parks; typed, OK, no cause.
    assert got['ready']['code'] == 0 and got['ready']['cause'] == '' and got['ready']['msg'] == ''
    assert got['ready']['motion_s'] > 0
    assert got['park']['code'] == 0 and got['park']['cause'] == ''
    _check_moveit_view(got)
    print(
        f'speed {speed}: pick {pick["wall_s"]} s, place {place["wall_s"]} s wall; '
        f'{place["cycle_sim_s"]:.2f} s simulated from pick to settled'
    )


def _check_moveit_view(got: dict) -> None:
    """/monitored_planning_scene and /display_planned_path against the cell: the pallet where the
    simulated cell has it, the held carton attached to tcp with the carton's size, the placed one
    in the stack where the cell found it after the settle, and each planned path the one the
    arm ran."""
    for key in ('scene_held', 'scene_placed'):
        sc = got[key]
        assert sc['model'] == 'ur10e_palletizer' and sc['diff'] is False
        assert len(sc['joints']) == 6
        # Level 11 is a table level: the furniture the arm clears, and the pallet.
        assert {'pedestal', 'auxiliary_table', 'pick_table', 'pallet'} <= set(sc['boxes'])
        pallet = sc['boxes']['pallet']
        assert pallet['frame'] == 'world'
        assert abs(pallet['centre'][0] - got['pallet'][0]) < 1e-3
        assert abs(pallet['centre'][1] - got['pallet'][1]) < 1e-3
        assert abs(pallet['dims'][0] - 1.20) < 1e-3 and abs(pallet['dims'][1] - 0.80) < 1e-3
    carton = got['carton']
    held = got['scene_held']['attached']
    assert len(held) == 1 and held[0]['link'] == 'tcp' and held[0]['frame'] == 'tcp'
    assert held[0]['dims'] == pytest.approx(carton['dims'], abs=1e-6)
    assert held[0]['centre'] == pytest.approx([0.0, 0.0, carton['dims'][2] / 2], abs=1e-6)
    assert not [k for k in got['scene_held']['boxes'] if k.startswith('carton_')]
    placed = got['scene_placed']
    assert placed['attached'] == []
    stack = [b for k, b in placed['boxes'].items() if k.startswith('carton_')]
    assert len(stack) == 1 and stack[0]['dims'] == pytest.approx(carton['dims'], abs=1e-6)
    gap = [a - b for a, b in zip(stack[0]['centre'], carton['centre'], strict=True)]
    assert (gap[0] ** 2 + gap[1] ** 2) ** 0.5 < 0.020 and abs(gap[2]) < 0.010
    paths = got['paths']
    assert paths['n'] >= 4 and paths['model'] == 'ur10e_palletizer'  # pick, place, ready, park
    assert paths['names'] == paths['start_names'] and len(paths['names']) == 6
    assert paths['start_gap'] < 1e-3 and paths['end_gap'] < 0.01
