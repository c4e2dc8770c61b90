"""Planner benchmarks: decision times (as episodes build the planners too), the quality bench
on a tiny injected load, the stamp helper."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from palletizer.cli.bench_planner import bench_planner, bench_planner_quality, stamp
from palletizer.core.contracts import PackageSpec, PlacementPlan


@dataclass(frozen=True)
class _Draw:
    spec: PackageSpec


def _draw(level: int, seed: int) -> list[_Draw]:
    rng = np.random.default_rng(level * 100 + seed)
    n = 3 if level == 1 else 2
    return [
        _Draw(PackageSpec(f'c-{i}', 'std_m', (0.42, 0.30, rng.uniform(0.12, 0.2)), 4.0))
        for i in range(n)
    ]


def test_quality_bench_reports_every_level_and_planner():
    msgs: list[str] = []
    out = bench_planner_quality([1, 2], [1, 2], ['heuristic', 'grid'], msgs.append, draw=_draw)
    assert set(out['levels']) == {'1', '2'} and len(msgs) == 4
    for level in out['levels'].values():
        for name in ('heuristic', 'grid'):
            row = level[name]
            assert row['placed_pct'] == 100.0 and row['outcomes'] == {'complete': 2}
            assert 0.0 < row['fill_ratio'] <= 1.0 and row['min_stability_margin_m'] > 0.0
    assert out['overall']['grid']['episodes_complete'] == '4/4'
    with pytest.raises(ValueError, match="'astar'"):
        bench_planner_quality([1], [1], ['astar'], draw=_draw)


def test_stamp_raises_the_cells_under_a_placed_box():
    cells = np.zeros((80, 120))
    spec = PackageSpec('s', 'x', (0.30, 0.20, 0.12), 1.0)
    plan = PlacementPlan((0.15, -0.25, 0.144 + 0.06), np.pi / 2, 1, 's', 0.0, 1.0)
    stamp(cells, plan, spec)
    assert np.count_nonzero(cells) == 20 * 30
    np.testing.assert_allclose(cells[0:30, 5:25], 0.12)


def test_decision_time_bench_times_the_planners_as_episodes_build_them_too():
    out = bench_planner(repeats=1)
    keys = ('heuristic', 'heuristic_analytic_reach', 'beam', 'beam_greedy')
    for name in (*keys, 'heuristic_as_run', 'beam_as_run'):
        assert out[f'{name}_ms_median'] > 0.0, name
    assert out['repeats'] == 1 and out['placed_before'] == 8
