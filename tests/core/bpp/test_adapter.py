"""The adapter: our planners on the integer bin, snapped and judged by the bin's rule."""

from __future__ import annotations

import math

import pytest
from palletizer.core.bpp import PLANNER_POLICIES, Container, PlannerPolicy, Pose, run_episode
from palletizer.core.bpp.adapter import UNIT, bin_geometry
from palletizer.core.contracts import PlacementPlan, PlanResult


def test_the_bin_becomes_a_pallet_of_its_footprint():
    g = bin_geometry((10, 8, 6))
    assert g.size_xy == pytest.approx((1.0, 0.8))
    assert g.origin_xy == pytest.approx((0.0, 0.0))
    assert (g.deck_z, g.max_height_m) == (0.0, pytest.approx(0.6))


def test_snap_maps_a_centre_and_yaw_to_a_corner_and_turn():
    pol = PlannerPolicy('heuristic', PLANNER_POLICIES['heuristic'])
    # A 3 x 2 item turned a quarter: 2 along x, 3 along y; centred at (0.5, 0.35) m.
    assert pol.snap((3, 2, 1), 0.5, 0.35, math.pi / 2) == Pose(4, 2, 1)
    assert pol.snap((3, 2, 1), 0.45, 0.2, 0.0) == Pose(3, 1, 0)
    assert pol.snap((3, 2, 1), 0.47, 0.2, 0.0) is None  # between cells


@pytest.mark.parametrize('name', ['heuristic', 'beam'])
def test_our_planners_pack_a_short_sequence_within_the_rules(name):
    items = [(5, 5, 3), (5, 5, 3), (4, 3, 2), (2, 2, 5), (3, 1, 4), (5, 2, 2)]
    pol = PlannerPolicy(name, PLANNER_POLICIES[name])
    ep = run_episode(pol, items)
    assert ep.outcome == 'exhausted'  # run_episode ends 'refused' on a pose the bin refuses
    assert ep.placed == len(items)
    assert len(pol.planner.book.placements) == len(items)  # type: ignore[attr-defined]
    # The planner's record matches the bin: the last item's recorded base is the bin's.
    rec = pol.planner.book.placements[-1]  # type: ignore[attr-defined]
    assert rec.actual_pose[2] - rec.dims_m[2] / 2 >= -1e-9


class _Stub:
    """A planner that first proposes a slot the bin refuses, then an allowed one."""

    kind = 'heuristic'
    oracle = False

    def __init__(self, plans):
        self.plans = list(plans)
        self.excluded = []
        self.recorded = []

    def choose(self, spec, heightmap, pallet, excluded_slots=(), last_resort=False):
        self.excluded.append(list(excluded_slots))
        return PlanResult(self.plans.pop(0) if self.plans else None, {})

    def record(self, placement):
        self.recorded.append(placement)

    def set_forecast(self, specs):
        pass


def _plan(x, y, z, slot):
    return PlacementPlan((x, y, z), 0.0, 1, slot, 0.0, 1.0)


def test_a_refused_plan_is_asked_again_with_its_slot_excluded():
    stub = _Stub([_plan(1.0, 0.1, 0.1, 'off-the-bin'), _plan(0.1, 0.1, 0.1, 'ok')])
    pol = PlannerPolicy('stub', lambda g: stub)
    pose = pol.choose(Container(), (2, 2, 2))
    assert pose == Pose(0, 0, 0)
    assert stub.excluded == [[], ['off-the-bin']]
    assert pol.counts.refusals == 1 and len(stub.recorded) == 1
    assert stub.recorded[0].actual_pose[:3] == pytest.approx((-0.4, -0.4, 0.1))


def test_a_plan_at_the_wrong_height_is_refused_and_tries_are_bounded():
    box = Container()
    box.place((2, 2, 3), Pose(0, 0, 0))
    # The planner believes the item rests on the floor where the bin has a 3-high block.
    stub = _Stub([_plan(0.1, 0.1, 1 * UNIT, f's{k}') for k in range(5)])
    pol = PlannerPolicy('stub', lambda g: stub, tries=3)
    assert pol.choose(box, (2, 2, 2)) is None
    assert (pol.counts.refusals, pol.counts.gave_up, len(stub.excluded)) == (3, 1, 3)
