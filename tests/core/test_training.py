"""Weight training's pure parts: the CEM search keeps the weight sum and moves towards the
elite, the loss and ranking are the reference's, the jolt trials tip what they should, and a
weights file is validated term by term."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from palletizer.core.errors import ConfigError
from palletizer.core.params.planning import DEFAULT_WEIGHTS, TERMS, check_weights, read_weights
from palletizer.core.stability import StackBox, validate_stack
from palletizer.core.training import (
    CemState,
    Score,
    fallen_under,
    jolt_falls,
    loss,
    n_trials,
    weight_id,
)


def test_the_weights_keep_their_sum_and_the_off_terms_stay_off():
    state = CemState.start(DEFAULT_WEIGHTS, sigma=0.35)
    total = sum(DEFAULT_WEIGHTS.values())
    assert 'reachability' not in state.free and len(state.free) == 13
    assert state.weights(state.mean) == dict(DEFAULT_WEIGHTS)  # exactly: no tie can flip
    rng = np.random.default_rng(2026)
    cands = state.sample(rng, 5)
    assert np.array_equal(cands[0], state.mean)  # candidate 1 is the mean
    for c in cands:
        w = state.weights(c)
        assert list(w) == list(TERMS)
        assert math.isclose(sum(w.values()), total, rel_tol=0.0, abs_tol=1e-11)
        assert w['reachability'] == 0.0 and all(v > 0 for k, v in w.items() if k != 'reachability')
        check_weights(w)


def test_the_update_moves_the_mean_to_the_elite_and_floors_the_std():
    state = CemState.start({t: 1.0 for t in TERMS}, sigma=0.35)
    n = len(TERMS)
    a, b, c, d = (
        np.full(n, 0.0) + np.eye(n)[k] * s for k, s in ((0, 2.0), (1, 1.0), (2, 5.0), (3, 3.0))
    )
    cands = [x - x.mean() for x in (a, b, c, d)]
    scores = [Score(5, 0, 5), Score(3, 0, 3), Score(40, 3, 7), Score(3, 0, 3)]
    elite = state.update(cands, scores, 0.5)
    assert elite == [1, 3]  # (3,0,3) twice: candidate order breaks the tie
    pts = np.array([cands[1], cands[3]])
    want = 0.7 * pts.mean(axis=0)  # the old mean is 0
    assert np.allclose(state.mean, want - want.mean())
    assert np.allclose(state.std, np.maximum(0.05, 0.5 * 0.35 + 0.5 * pts.std(axis=0)))
    assert state.std.min() >= 0.05
    for _ in range(20):  # the std never goes under its floor
        state.update(cands, scores, 0.25)
    assert state.std.min() == pytest.approx(0.05)


def test_ranking_is_loss_then_missing_then_fallen_and_a_missing_box_costs_n_trials_plus_one():
    assert n_trials() == 10
    assert loss(2, 7, 10) == 29
    assert loss(1, 0, 10) > loss(0, 10, 10)
    assert sorted([Score(5, 0, 5), Score(5, 0, 4), Score(4, 1, 0)]) == [
        Score(4, 1, 0),
        Score(5, 0, 4),
        Score(5, 0, 5),
    ]


def test_weight_id_is_the_canonical_json_hash():
    w = dict(DEFAULT_WEIGHTS)
    shuffled = dict(reversed(list(w.items())))
    assert weight_id(w) == weight_id(shuffled) and len(weight_id(w)) == 12
    assert weight_id({**w, 'bridge': 0.51}) != weight_id(w)


def _box(x, y, z, ex, ey, h, m=5.0):
    return StackBox(x, y, z, ex, ey, h, m, (x, y, z + h / 2))


def test_a_tall_box_tips_past_half_width_over_height():
    # 0.2 m wide, CoG 0.4 m up: tips once a > 0.1 / 0.4 = 0.25 g along x; along y it is 0.6 m wide
    tall = [_box(0.0, 0.0, 0.0, 0.2, 0.6, 0.8)]
    assert not fallen_under(tall, (0.24, 0.0)).any()
    assert fallen_under(tall, (0.26, 0.0)).all()
    assert fallen_under(tall, (-0.26, 0.0)).all()
    assert not fallen_under(tall, (0.0, 0.5)).any()
    trials = jolt_falls(tall)
    assert [t['fallen'] for t in trials if t['axis'] == 'x'] == [0, 0, 1, 1, 1]
    # along y: 0.3 / 0.4 = 0.75 g, so only the 0.8 g jolt tips it
    assert [t['fallen'] for t in trials if t['axis'] == 'y'] == [0, 0, 0, 0, 1]


def test_at_rest_the_trials_agree_with_the_stack_check_and_a_box_on_a_fallen_box_falls():
    base = _box(0.0, 0.0, 0.0, 0.2, 0.4, 0.6)
    top = _box(0.0, 0.0, 0.6, 0.2, 0.4, 0.2, m=1.0)
    stack = [base, top]
    assert validate_stack(stack, min_support=0.0, min_margin=0.0).ok
    assert not fallen_under(stack, (0.0, 0.0)).any()
    # The base tips under the load above it (resultant higher up): both fall; the top box alone
    # (0.1 / 0.1 = 1 g) would not.
    falls = fallen_under(stack, (0.3, 0.0))
    assert falls.tolist() == [True, True]
    assert not fallen_under([_box(0.0, 0.0, 0.0, 0.2, 0.4, 0.2)], (0.3, 0.0)).any()
    # An overhanging box whose CoG is off its support falls even at rest.
    over = [base, StackBox(0.2, 0.0, 0.6, 0.3, 0.4, 0.1, 2.0, (0.2, 0.0, 0.65))]
    assert fallen_under(over, (0.0, 0.0)).tolist() == [False, True]


@pytest.mark.parametrize(
    'change, match',
    [
        (
            {'bridg': 1.0},
            r"weights\.bridg: unknown weight; expected one of .*did you mean 'bridge'",
        ),
        ({'bridge': None}, r'weights\.bridge = None; expected a finite number'),
        ({'bridge': -0.5}, r'weights\.bridge = -0.5; expected a finite number in \[0\.0, inf\]'),
        ({'bridge': float('inf')}, r'weights\.bridge = inf; expected a finite number'),
        ({'bridge': float('nan')}, r'weights\.bridge = nan; expected a finite number'),
        ({'bridge': True}, r'weights\.bridge = True; expected a finite number'),
        ({'bridge': 'x'}, r"weights\.bridge = 'x'; expected a finite number"),
    ],
)
def test_each_bad_weight_fails_naming_it_and_what_is_allowed(change, match):
    w = {**DEFAULT_WEIGHTS, **change}
    if 'bridg' in change:
        w.pop('bridge')  # bridge missing too: the unknown name is reported first
    with pytest.raises(ConfigError, match=match):
        check_weights(w)


def test_missing_all_zero_and_not_a_mapping_fail_clearly():
    w = dict(DEFAULT_WEIGHTS)
    del w['gap_waste']
    with pytest.raises(ConfigError, match=r"missing weight 'gap_waste'; all 14 are required"):
        check_weights(w)
    with pytest.raises(ConfigError, match='expected at least one weight > 0'):
        check_weights(dict.fromkeys(TERMS, 0.0))
    with pytest.raises(ConfigError, match='expected a mapping of the 14 weights'):
        check_weights([1.0] * 14)


def test_a_weights_file_reads_json_and_yaml_and_names_itself_in_errors(tmp_path):
    good = tmp_path / 'w.json'
    good.write_text(json.dumps({'weight_id': 'x', 'weights': {**DEFAULT_WEIGHTS, 'bridge': 0.9}}))
    assert read_weights(good)['bridge'] == 0.9
    yml = tmp_path / 'w.yaml'
    yml.write_text('weights:\n' + ''.join(f'  {k}: {v}\n' for k, v in DEFAULT_WEIGHTS.items()))
    assert dict(read_weights(yml)) == dict(DEFAULT_WEIGHTS)
    with pytest.raises(ConfigError, match=r'nope\.json: cannot read the weights file'):
        read_weights(tmp_path / 'nope.json')
    flat = tmp_path / 'flat.json'
    flat.write_text(json.dumps(dict(DEFAULT_WEIGHTS)))
    with pytest.raises(ConfigError, match=r'flat\.json: no `weights` mapping .*expected weights:'):
        read_weights(flat)
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps({'weights': {**DEFAULT_WEIGHTS, 'lowness': -1}}))
    with pytest.raises(ConfigError, match=r'bad\.json\.weights\.lowness = -1'):
        read_weights(bad)
    broken = tmp_path / 'broken.json'
    broken.write_text('{"weights": [')
    with pytest.raises(ConfigError, match=r'broken\.json: not JSON or YAML'):
        read_weights(broken)
