"""Grid baseline: first fit nearest the centre, from recorded placements only."""

from __future__ import annotations

import numpy as np
from palletizer.core.contracts import HeightMap, PackageSpec
from palletizer.core.planning import GridPlanner, PlannerKind

from ._stacking import place_exactly

STD_M = PackageSpec('a', 'std_m', (0.42, 0.30, 0.18), 4.2)


def test_grid_first_box_goes_to_the_centre_and_is_not_an_oracle():
    planner = GridPlanner()
    assert planner.kind is PlannerKind.grid and planner.oracle is False
    plan = planner.choose(STD_M, HeightMap.flat(), None).plan
    np.testing.assert_allclose(plan.position, (0.6, 0.0, 0.144 + 0.09), atol=1e-9)
    assert plan.slot == 'grid-L1-0' and plan.score == 0.0 and plan.breakdown == {}


def test_grid_stacks_a_column_when_nothing_fits_beside_and_ignores_the_height_map():
    planner = GridPlanner()
    first = planner.choose(STD_M, HeightMap.flat(), None).plan
    planner.record(place_exactly(0, STD_M, first, []))
    junk = HeightMap(np.full((80, 120), 0.7))  # ignored: the grid reads its records only
    res = planner.choose(STD_M, junk, None)
    assert res.plan.layer == 2 and res.plan.predicted_support == 1.0
    np.testing.assert_allclose(res.plan.position, (0.6, 0.0, 0.144 + 0.18 + 0.09), atol=1e-9)
    assert res.reject_summary['off_pallet'] > 0 and res.reject_summary['overlap'] > 0


def test_grid_puts_a_smaller_box_beside_at_the_clearance_and_skips_excluded_slots():
    planner = GridPlanner()
    first = planner.choose(STD_M, HeightMap.flat(), None).plan
    planner.record(place_exactly(0, STD_M, first, []))
    small = PackageSpec('s', 'small', (0.30, 0.20, 0.12), 1.8)
    plan = planner.choose(small, HeightMap.flat(), None).plan
    assert plan.layer == 1
    # Nearest the centre (Manhattan): beside the first box along Y, 40 mm away.
    np.testing.assert_allclose(plan.position, (0.6, -0.15 - 0.04 - 0.10, 0.144 + 0.06))
    other = planner.choose(small, HeightMap.flat(), None, excluded_slots={plan.slot}).plan
    assert other.slot != plan.slot and other.layer == 1
    np.testing.assert_allclose(other.position[:2], (0.6, 0.15 + 0.04 + 0.10))


def test_grid_no_fit_is_a_result():
    res = GridPlanner().choose(PackageSpec('h', 'h', (1.3, 0.9, 0.2), 5.0), HeightMap.flat(), None)
    assert res.plan is None and res.reject_summary['off_pallet'] > 0
