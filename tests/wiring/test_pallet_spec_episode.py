"""An episode run with a pallet spec: the referee measures the final stack against it."""

from __future__ import annotations

import pytest
from palletizer.core.config import load_config
from palletizer.core.loads import draw_load
from palletizer.core.pallet_spec import load_spec
from palletizer.core.planning import build_planner
from palletizer.wiring.inprocess import MemorySink, run_inprocess

pytestmark = pytest.mark.sim


def test_the_episode_line_carries_the_spec_and_the_referee_s_compliance():
    cfg = load_config()
    spec = load_spec(
        {'max_load_height_m': 0.15, 'weight_order': {}, 'label_out': {}}, cfg.catalogue.types
    )
    result, sink = run_inprocess(
        11, 1, build_planner('heuristic'), sink=MemorySink(), perception='oracle', pallet_spec=spec
    )
    assert result.success
    m = result.metrics
    assert m['pallet_spec'] == spec.to_dict()
    c = m['compliance']
    truth = [d.spec for d in draw_load(11, 1, cfg)]
    assert c['cartons'] == result.n_placed == len(truth)
    assert c['load_mass_kg'] == pytest.approx(sum(s.mass_kg for s in truth), abs=1e-3)
    # Level 11 is one layer of one type: the load is one carton high, no carton rests on
    # another, and the 0.15 m limit is broken by any carton taller than that.
    tallest = max(s.dims_m[2] for s in truth)
    assert c['load_height_m'] == pytest.approx(tallest, abs=0.005)
    assert c['weight_order_inversions'] == [] and c['crush_violations'] == []
    assert ('max_load_height_m' in c['broken']) == (tallest > 0.15)
    assert c['hard_violations'] == int(tallest > 0.15)
    assert c['perimeter_labelled'] <= c['cartons']
    # Without a spec, nothing is measured and the line is as before.
    plain, _ = run_inprocess(
        11, 1, build_planner('heuristic'), sink=MemorySink(), perception='oracle'
    )
    assert 'compliance' not in plain.metrics and 'pallet_spec' not in plain.metrics
    assert plain.n_placed == result.n_placed


def test_a_rule_level_reads_each_label_and_turns_it_out_on_the_perimeter():
    # Level 18 seed 1 (table, ten labelled cartons, some arriving turned half round) to its
    # spec, with camera perception: every label side read right, no hard rule broken, and the
    # perimeter labels out but one (4 of 5 fast-forward, 5 of 5 interpolated; 3 of 7 when the
    # planner ignores the labels).
    from palletizer.cli.bench_spec import LabelScore
    from palletizer.core.pallet_spec import level_spec

    cfg = load_config()
    spec = level_spec(cfg, 18)
    assert spec is not None and spec.label_out is not None
    score = LabelScore(cfg)
    result, sink = run_inprocess(
        18,
        1,
        build_planner('heuristic', cfg, pallet_spec=spec),
        sink=MemorySink(),
        pallet_spec=spec,
        probe=score.probe,
    )
    assert result.success and not result.oracle
    labels = score.summary()
    assert labels['checked'] == labels['right'] == result.n_objects, labels
    picks = [e[4] for e in sink.events if e[2] == 'pick']
    assert {p['label_how'] for p in picks} <= {'seen', 'other side'} and len(picks) == 10
    c = result.metrics['compliance']
    assert c['hard_violations'] == 0
    assert c['perimeter_labelled'] >= 4 and c['label_out'] >= c['perimeter_labelled'] - 1, c
    assert 0.0 < result.metrics['density'] < 1.0
