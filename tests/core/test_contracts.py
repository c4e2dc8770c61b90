"""Contracts: validation, JSON-safe lossless round trips, the closed failure vocabulary."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from palletizer.core.contracts import (
    EpisodeResult,
    FailureCause,
    HeightMap,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
    PlanResult,
)
from palletizer.core.errors import PalletizerError


def _json_round_trip(obj):
    return type(obj).from_dict(json.loads(json.dumps(obj.to_dict())))


def _placement(seq: int = 0, placed: bool = True) -> Placement:
    return Placement(
        seq=seq,
        package_id='std_m-00',
        package_type='std_m',
        mass_kg=4.2,
        dims_m=(0.42, 0.30, 0.18),
        layer=1,
        planned_pose=(-0.39, -0.25, 0.09, 0.0),
        actual_pose=(-0.388, -0.251, 0.0899, 0.01),
        error_xy_m=0.0022,
        error_yaw_rad=0.01,
        support_ratio=1.0,
        overhang_m=0.0,
        placed=placed,
    )


def test_failure_cause_is_exactly_the_closed_vocabulary():
    assert {c.value for c in FailureCause} == {
        'no_detection',
        'ik_unreachable',
        'collision',
        'grasp_slip',
        'wrong_placement',
        'timeout',
        'stack_collapse',
        'overhang_violation',
    }
    assert all(c.name == c.value for c in FailureCause)
    with pytest.raises(PalletizerError, match="'stack_colapse'.*did you mean 'stack_collapse'"):
        FailureCause.parse('stack_colapse')


def test_every_contract_round_trips_through_json_losslessly():
    rng = np.random.default_rng(7)
    objs = [
        Observation('small-01', (0.1, -0.9, 0.7), 0.2, (0.3, 0.22, 0.12), 0.93),
        PackageSpec('small-01', 'small', (0.3, 0.22, 0.12), 1.8, (0.025, 0.0, 0.0)),
        PlacementPlan((0.21, -0.25, 0.234), np.pi / 2, 2, 'score-L2-0x0', 0.71, 0.98, {'a': 0.5}),
        _placement(),
        PalletState(3, 12.6, (0.01, -0.02, 0.15), 0.124, 0.52, 0.0011, 0.002),
        PlanResult(None, {'collision': 3}),
        PlanResult(PlacementPlan((0.1, 0.2, 0.3), 0.0, 1, 's', 0.5, 1.0, {}), {}),
        EpisodeResult(1, 11, 4, 4, 0, True, 45.3, None, True, 'abc1234', 'table', {'score': 1.0}),
        EpisodeResult(2, 13, 8, 5, 0, False, 99.0, 'stack_collapse', False, 'abc', 'table', {}),
    ]
    for obj in objs:
        assert _json_round_trip(obj) == obj
    hm = HeightMap(rng.uniform(0, 0.5, (8, 12)), rng.uniform(size=(8, 12)) > 0.2, (0.0, -0.4))
    back = _json_round_trip(hm)
    assert back == hm
    np.testing.assert_array_equal(back.cells, hm.cells)
    np.testing.assert_array_equal(back.observed, hm.observed)


def test_episode_result_dict_is_the_jsonl_line():
    r = EpisodeResult(3, 21, 4, 2, 0, False, 12.5, FailureCause.timeout, True, 'f00', 'conveyor')
    d = r.to_dict()
    assert list(d) == [
        'seed',
        'level',
        'n_objects',
        'n_placed',
        'n_misrouted',
        'success',
        'duration_s',
        'failure',
        'oracle',
        'git_sha',
        'task',
        'metrics',
    ]
    assert d['failure'] == 'timeout'
    json.dumps(d)


def test_episode_result_rejects_success_with_a_failure_or_missing_cartons():
    with pytest.raises(PalletizerError, match='failure = None on success'):
        EpisodeResult(1, 11, 4, 4, 0, True, 1.0, 'timeout', True, 'x', 'table')
    with pytest.raises(PalletizerError, match='n_placed = 3 of 4'):
        EpisodeResult(1, 11, 4, 3, 0, True, 1.0, None, True, 'x', 'table')
    with pytest.raises(PalletizerError, match='n_placed = 5'):
        EpisodeResult(1, 11, 4, 5, 0, False, 1.0, None, True, 'x', 'table')
    with pytest.raises(PalletizerError, match="'collapse'.*did you mean 'stack_collapse'"):
        EpisodeResult(1, 11, 4, 1, 0, False, 1.0, 'collapse', True, 'x', 'table')


def test_heightmap_turns_non_finite_cells_into_unobserved_without_touching_the_input():
    cells = np.zeros((3, 4))
    cells[1, 2] = np.nan
    cells[0, 0] = np.inf
    cells[2, 3] = 0.3
    hm = HeightMap(cells)
    assert np.isnan(cells[1, 2])  # caller's array untouched
    assert not hm.observed[1, 2] and not hm.observed[0, 0]
    assert hm.cells[1, 2] == 0.0 and hm.cells[0, 0] == 0.0
    np.testing.assert_allclose(hm.top, 0.3)
    np.testing.assert_allclose(hm.observed_ratio, 10 / 12)
    with pytest.raises(ValueError):
        hm.cells[0, 0] = 1.0  # read-only


def test_package_spec_properties_and_validation():
    spec = PackageSpec('a', 'std_s', (0.38, 0.28, 0.16), 3.5, (0.02, 0.02, -0.015))
    np.testing.assert_allclose(spec.footprint_area, 0.38 * 0.28)
    np.testing.assert_allclose(spec.grasp_width, 0.28)
    with pytest.raises(PalletizerError, match='dims_m'):
        PackageSpec('a', 'x', (0.3, 0.0, 0.1), 1.0)
    with pytest.raises(PalletizerError, match='Observation.confidence'):
        Observation('a', (0, 0, 0), 0.0, (0.3, 0.2, 0.1), 1.5)
    labelled = dataclasses.replace(spec, label_face='-y')
    assert PackageSpec.from_dict(labelled.to_dict()) == labelled and spec.label_face == ''
    with pytest.raises(PalletizerError, match=r"label_face = 'top'; expected one of '', '\+x'"):
        PackageSpec('a', 'std_s', (0.38, 0.28, 0.16), 3.5, label_face='top')


def test_placement_carries_the_reference_support_figure_when_measured():
    assert _placement().support_ratio_layer is None
    p = dataclasses.replace(_placement(), support_ratio=1.0, support_ratio_layer=0.0)
    assert _json_round_trip(p) == p and p.to_dict()['support_ratio_layer'] == 0.0
    with pytest.raises(PalletizerError, match='Placement.support_ratio_layer'):
        dataclasses.replace(p, support_ratio_layer=1.2)


def test_unknown_keys_in_from_dict_are_named():
    d = _placement().to_dict()
    d['error_xy'] = d.pop('error_xy_m')
    with pytest.raises(PalletizerError, match="unknown key 'error_xy'.*did you mean 'error_xy_m'"):
        Placement.from_dict(d)


def test_the_deck_height_default_is_the_cells_pallet():
    from palletizer.core.config import load_config
    from palletizer.core.contracts import EUR_DECK_Z, PalletGeometry
    from palletizer.core.motion.collision import HeightField
    from palletizer.core.motion.params import MotionParams

    cell = load_config().cell
    assert cell.pallet.size[2] == cell.pallet.deck_z == EUR_DECK_Z
    # every default pallet is the configured one (cell.yaml `pallet` is the one source)
    assert PalletGeometry() == PalletGeometry.from_config(cell.pallet)
    assert PalletGeometry().deck_z == MotionParams().deck_z == EUR_DECK_Z
    assert HeightField(np.zeros((2, 2))).deck_z == EUR_DECK_Z
