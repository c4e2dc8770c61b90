"""The scenario driver's referee: truth against the plan, and the palletizer's own check against
the truth, for the cartons the line handed over, by the palletizer's names."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from palletizer.bridge.scenario import Scenario, carton_name
from palletizer.core.contracts import PalletGeometry

PALLET = PalletGeometry()


def _truth(poses):
    """A ground-truth snapshot: {package_id: world (x, y, z, yaw)}."""
    cartons = {
        pid: SimpleNamespace(
            pos=np.array([x, y, z]), quat=np.array([math.cos(a / 2), 0.0, 0.0, math.sin(a / 2)])
        )
        for pid, (x, y, z, a) in poses.items()
    }
    return SimpleNamespace(cartons=cartons)


def _pallet(x, y, z, yaw):
    cx, cy = PALLET.centre_xy
    return (x - cx, y - cy, z - PALLET.deck_z, yaw)


def test_each_handed_over_carton_is_scored_by_truth_under_the_palletizers_name(tmp_path):
    out = tmp_path / 'scenario.jsonl'
    sc = Scenario(11, 3, PALLET, tolerance_xy=0.020, tolerance_yaw=0.10, out=out)
    truth = _truth(
        {
            'std_m-00': (0.40, -0.10, 0.234, 0.0),
            'std_m-01': (0.80, 0.10, 0.234, math.pi / 2),
            'std_m-02': (-0.2, -0.8, 0.67, 0.0),  # still on the table: never handed over
        }
    )
    # carton-01 landed 3 mm off its plan; the own check saw it 1 mm off the truth.
    sc.note_placement(
        'carton-01', _pallet(0.403, -0.10, 0.234, 0.0), _pallet(0.401, -0.10, 0.234, 0.0)
    )
    # carton-02 landed 30 mm off (beyond the 20 mm tolerance) and half a turn round.
    sc.note_placement(
        'carton-02',
        _pallet(0.83, 0.10, 0.234, -math.pi / 2),
        _pallet(0.80, 0.104, 0.234, math.pi / 2),
    )
    line = sc.score(truth, ['std_m-00', 'std_m-01'], sim_only_calls=0)
    a, b = line['cartons']
    assert (a['carton'], a['package_id'], b['carton'], b['package_id']) == (
        'carton-01',
        'std_m-00',
        'carton-02',
        'std_m-01',
    )
    assert a['error_xy_mm'] == pytest.approx(3.0, abs=0.01) and a['within_tolerance']
    assert a['check_err_mm'] == pytest.approx(1.0, abs=0.01)
    assert b['error_xy_mm'] == pytest.approx(30.0, abs=0.01) and not b['within_tolerance']
    assert b['error_yaw_deg'] == pytest.approx(0.0, abs=1e-6)  # half a turn is the same box
    assert b['check_err_mm'] == pytest.approx(4.0, abs=0.01)
    assert (line['load'], line['handed_over'], line['placed'], line['within_tolerance']) == (
        3,
        2,
        2,
        1,
    )
    assert line['oracle'] is False and line['seed'] == 3
    assert json.loads(out.read_text()) == line  # appended as one line
    s = Scenario.summary([line])
    assert s['cartons'] == 2 and s['cartons_ok'] == 1
    assert s['placement_check_err_mm_p95'] == pytest.approx(4.0, abs=0.01)


def test_a_carton_handed_over_but_never_placed_counts_and_the_next_seed_forgets_the_plans():
    sc = Scenario(21, 1, PALLET, tolerance_xy=0.020, tolerance_yaw=0.10)
    truth = _truth({'a': (0.4, 0.0, 0.3, 0.0)})
    sc.note_placement(carton_name(2), (0, 0, 0, 0), (0, 0, 0, 0))
    line = sc.score(truth, ['a'], sim_only_calls=2)
    assert line['cartons'][0]['placed'] is False and line['placed'] == 0
    assert line['sim_only_calls'] == 2
    assert sc.next_seed() == 2 and sc.placements == {}
