"""Core contracts convert to palletizer_msgs and back without loss."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip('palletizer_msgs', reason='interfaces not built: run scripts/setup')

from palletizer.core.contracts import (  # noqa: E402
    HeightMap,
    Observation,
    PackageSpec,
    PalletState,
    Placement,
    PlacementPlan,
)
from palletizer.core.errors import PalletizerError  # noqa: E402
from palletizer.nodes import convert  # noqa: E402


def test_heightmap_round_trip_is_bit_exact_and_keeps_the_mask():
    rng = np.random.default_rng(3)
    cells = rng.uniform(0, 1.2, size=(80, 120))
    observed = rng.random((80, 120)) > 0.1
    lids = ((0.41, -0.12, 0.3, 0.42, 0.3, 0.18), (0.9, 0.2, -1.2, 0.3, 0.2, 0.36))
    h = HeightMap(cells, observed, (0.0, -0.4), 0.01, lids)
    back = convert.heightmap_from_msg(convert.heightmap_to_msg(h))
    assert back == h
    np.testing.assert_array_equal(back.cells, h.cells)
    np.testing.assert_array_equal(back.observed, h.observed)
    assert back.lids == lids and back.lids[1].height == 0.36


def test_heightmap_with_a_partial_lid_is_refused():
    m = convert.heightmap_to_msg(HeightMap(np.zeros((2, 3)), lids=((0, 0, 0, 0.4, 0.3, 0.2),)))
    m.lids = list(m.lids)[:5]
    with pytest.raises(PalletizerError, match='5 lid values; expected 6 per lid'):
        convert.heightmap_from_msg(m)


def test_heightmap_with_wrong_cell_count_is_refused():
    m = convert.heightmap_to_msg(HeightMap(np.zeros((2, 3))))
    m.nx = 4
    with pytest.raises(PalletizerError, match='expected ny \\* nx = 2 \\* 4 = 8'):
        convert.heightmap_from_msg(m)


@pytest.mark.parametrize(
    'value, to_msg, from_msg',
    [
        (
            Observation('std_m-00', (0.1, -0.2, 0.67), 0.3, (0.42, 0.3, 0.18), 0.93),
            convert.observation_to_msg,
            convert.observation_from_msg,
        ),
        (
            PackageSpec('std_m-00', 'std_m', (0.42, 0.3, 0.18), 4.2, (0.05, -0.001, 0.01)),
            convert.spec_to_msg,
            convert.spec_from_msg,
        ),
        (
            PackageSpec(
                'std_m-00', 'std_m', (0.42, 0.3, 0.18), 4.2, (0.05, 0, 0), label_face='-x'
            ),
            convert.spec_to_msg,
            convert.spec_from_msg,
        ),
        (
            PlacementPlan(
                (0.31, -0.23, 0.234),
                1.5707963267948966,
                2,
                'score-L2-3x4',
                0.8123456789,
                0.97,
                {'support_ratio': 1.0, 'bridge': 0.25},
            ),
            convert.plan_to_msg,
            convert.plan_from_msg,
        ),
        (
            Placement(
                3,
                'small-01',
                'small',
                1.8,
                (0.3, 0.22, 0.12),
                1,
                (0.1, 0.2, 0.06, 0.0),
                (0.1021, 0.199, 0.0601, 0.012),
                0.0023,
                0.012,
                0.99,
                0.0,
                True,
            ),
            convert.placement_to_msg,
            convert.placement_from_msg,
        ),
        (
            Placement(
                6,
                'random-06',
                'random',
                2.1,
                (0.3, 0.22, 0.12),
                3,
                (0.1, 0.2, 0.35, 0.0),
                (0.1, 0.2, 0.35, 0.0),
                0.0,
                0.0,
                1.0,
                0.0,
                True,
                support_ratio_layer=0.0,
            ),
            convert.placement_to_msg,
            convert.placement_from_msg,
        ),
        (
            PalletState(3, 12.6, (0.01, -0.02, 0.15), 0.1234, 0.41, 0.0021, 0.004),
            convert.pallet_state_to_msg,
            convert.pallet_state_from_msg,
        ),
    ],
)
def test_contract_round_trip_is_lossless(value, to_msg, from_msg):
    assert from_msg(to_msg(value)) == value


def test_reject_summary_round_trip():
    summary = {'collision': 12, 'com_unsupported': 3}
    assert convert.reject_from_lists(*convert.reject_to_lists(summary)) == summary


@pytest.mark.parametrize('failure', [None, 'stack_collapse'])
def test_episode_result_round_trip_is_lossless(failure):
    from palletizer.core.contracts import EpisodeResult, FailureCause

    r = EpisodeResult(
        seed=3,
        level=23,
        n_objects=8,
        n_placed=8 if failure is None else 5,
        n_misrouted=0,
        success=failure is None,
        duration_s=81.234567,
        failure=FailureCause(failure) if failure else None,
        oracle=True,
        git_sha='abc1234',
        task='conveyor',
        metrics={
            'score': 0.625,
            'fill_ratio': 0.4123456789,
            'planner_score_breakdown': {'bridge': 0.1},
        },
    )
    assert convert.episode_result_from_msg(convert.episode_result_to_msg(r)) == r
