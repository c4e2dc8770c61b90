"""scripts/bench perception: its options, checked before anything runs."""

from __future__ import annotations

import pytest
from palletizer.cli.bench_perception import parse_options, summarise


def test_weighing_on_the_lift_needs_motion_and_the_defaults_follow_the_config(capsys):
    kw = parse_options([])
    assert kw['weigh'] is None and kw['speed'] is None
    assert parse_options(['--weigh', 'lift'])['weigh'] == 'lift'
    assert parse_options(['--weigh', 'track'])['weigh'] == 'track'
    for weigh in ('lift', 'track'):
        with pytest.raises(SystemExit):
            parse_options(['--weigh', weigh, '--speed', '0'])
        assert f'--weigh {weigh} needs --speed 1' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_options(['--speed', '2'])
    assert 'expected 0 (fast-forward) or 1' in capsys.readouterr().err


def test_the_weighings_on_the_lift_and_still_are_scored_apart():
    weighs = [
        {'package_id': 'a', 'mass_pct': 0.2, 'com_mm': 0.4, 'lift': True},
        {'package_id': 'b', 'mass_pct': 0.9, 'com_mm': 2.0, 'lift': False},
    ]
    episode = {
        'maps': [],
        'detects': [],
        'weighs': weighs,
        'success': True,
        'oracle': False,
        'zeroed_on_move': 3,
    }
    out = summarise([episode, {**episode, 'zeroed_on_move': 2}], [])
    assert out['gauge_zeroed_on_move'] == 5
    out = summarise([episode], [])
    assert out['gauge_on_lift'] == 1 and out['weighings_2kg_plus'] == 2
    assert out['gauge_lift_mass_err_pct_p95'] == 0.2 and out['gauge_lift_com_err_mm_p95'] == 0.4
    assert out['gauge_still_mass_err_pct_p95'] == 0.9 and out['gauge_still_com_err_mm_p95'] == 2.0
