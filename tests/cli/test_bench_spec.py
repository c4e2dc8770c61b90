"""`scripts/bench spec`: its options and the figures it prints from the episode rows."""

from __future__ import annotations

import pytest
from palletizer.cli.bench_spec import RULE_LEVELS, parse_options, summarise


def test_the_rule_levels_are_the_default_and_bad_options_are_named(capsys, tmp_path):
    assert RULE_LEVELS == (18, 24, 35)
    got = parse_options([])
    assert got['levels'] == [18, 24, 35] and got['seeds'] == list(range(1, 21))
    assert got['planners'] == ['heuristic', 'beam'] and got['spec_file'] is None
    with pytest.raises(SystemExit):
        parse_options(['--seeds', '99-101'])
    assert 'seeds above 100 are reserved' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_options(['--levels', '11'])
    assert '--levels 11 has no pallet spec; give one with --spec FILE' in capsys.readouterr().err
    bad = tmp_path / 'bad.yaml'
    bad.write_text('max_load_height_m: tall\n')
    with pytest.raises(SystemExit):
        parse_options(['--levels', '11', '--spec', str(bad)])
    assert 'max_load_height_m' in capsys.readouterr().err
    good = tmp_path / 'good.yaml'
    good.write_text('max_load_height_m: 1.0\n')
    assert parse_options(['--levels', '11', '--spec', str(good)])['levels'] == [11]


def _row(ok, out, perimeter, broken=(), crush=0, fragile=0, inversions=0, right=(3, 3)):
    return {
        'success': ok,
        'failure': None if ok else 'collision',
        'n_placed': 8,
        'density': 0.4,
        'labels_seen': {'checked': right[1], 'right': right[0]},
        'compliance': {
            'label_out': out,
            'perimeter_labelled': perimeter,
            'broken': list(broken),
            'crush_violations': [{}] * crush,
            'fragile_violations': [{}] * fragile,
            'weight_order_inversions': [{}] * inversions,
            'group_splits': 1,
        },
    }


def test_the_summary_pools_the_perimeter_labels_and_counts_each_violation():
    rows = [
        _row(True, 5, 5),
        _row(True, 3, 4, broken=['label_out', 'max_load_height_m'], crush=2, inversions=1),
        _row(False, 1, 1, fragile=1, right=(2, 3)),
    ]
    s = summarise(rows)
    assert (s['episodes'], s['episodes_ok']) == (3, 2)
    assert (s['label_out'], s['perimeter_labelled'], s['label_out_pct']) == (9, 10, 90.0)
    assert (s['crush_violations'], s['fragile_violations']) == (2, 1)
    assert (s['weight_order_inversions'], s['height_violations']) == (1, 1)
    assert s['mass_violations'] == 0 and s['group_splits'] == 3
    assert s['label_detection'] == {'checked': 9, 'right': 8, 'accuracy_pct': 88.9}
    assert s['failures'] == ['collision'] and s['density'] == 0.4
    assert summarise([])['label_out_pct'] is None


def test_a_resumed_run_keeps_the_rows_of_its_own_run_and_skips_a_torn_line(tmp_path):
    from palletizer.cli.pool import earlier_rows

    log = tmp_path / 'spec.episodes.jsonl'
    log.write_text('{"commit": "a", "seed": 1}\n{"commit": "b", "seed": 2}\n{"commit": "a", "se')
    assert earlier_rows(log, True, lambda r: r['commit'] == 'a') == [{'commit': 'a', 'seed': 1}]
    assert log.exists()
    assert earlier_rows(log, False, lambda r: True) == [] and not log.exists()
    assert earlier_rows(log, True, lambda r: True) == []
