"""Tests of the docs/cell.md §3.10 cup-block rule and the tool-to-world offset conversion."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.motion import MotionError, plan_grasp, tool_to_world_xy


def test_book_s_gets_a_three_by_three_block_off_centre():
    g = plan_grasp(0.24, 0.18, mass=1.2)
    assert g.n_cups == 9
    # Runs of 3 sit +-half a pitch off the axis; the tie goes to the lower index.
    np.testing.assert_allclose(g.offset, (-0.0747 / 2, -0.024), atol=1e-12)
    assert g.capacity == pytest.approx(9 * 50 * 0.70)
    assert g.required == pytest.approx(1.2 * 9.81 * 1.5)
    assert g.feasible


def test_large_lid_uses_all_sixteen_cups_centred():
    g = plan_grasp(0.60, 0.40)
    assert (g.c0, g.c1, g.r0, g.r1) == (0, 4, 0, 4)
    np.testing.assert_allclose(g.offset, (0.0, 0.0), atol=1e-12)
    assert g.required is None and g.capacity_ratio is None


def test_run_must_fit_half_size_minus_cup_radius():
    # Half-extent of 4 columns is 0.11205: a 0.2640 lid has 0.112 of room and fails by 0.05 mm.
    assert plan_grasp(0.2640, 0.30).c1 - plan_grasp(0.2640, 0.30).c0 == 3
    assert plan_grasp(0.2642, 0.30).c1 - plan_grasp(0.2642, 0.30).c0 == 4


def test_narrow_lid_has_no_block_and_heavy_carton_is_infeasible():
    assert plan_grasp(0.30, 0.035).n_cups == 0
    assert not plan_grasp(0.30, 0.035).feasible
    g = plan_grasp(0.24, 0.18, mass=25.0)  # 315 N < 25 x 9.81 x 1.5 = 368 N
    assert not g.feasible
    assert g.capacity_ratio == pytest.approx(315.0 / (25.0 * 9.81 * 1.5))


def test_plan_grasp_rejects_bad_sizes():
    with pytest.raises(MotionError, match='width = -0.1'):
        plan_grasp(0.3, -0.1)


def test_tool_offset_mirrors_tool_y_against_world_y():
    # At yaw 0 tool y runs against world y (docs/cell.md §3.10): a direct world conversion
    # doubles the error.
    np.testing.assert_allclose(tool_to_world_xy((0.03, 0.02), 0.0), (0.03, -0.02), atol=1e-12)
    np.testing.assert_allclose(
        tool_to_world_xy((0.03, 0.02), math.pi / 2), (0.02, 0.03), atol=1e-12
    )


def test_alternative_blocks_keep_their_cups_over_the_lid_and_hold_the_heaviest_carton():
    from palletizer.core.motion import GripperGeometry, grasp_alternatives

    gripper = GripperGeometry()
    # Level 33 seed 32's carton: the rule takes 2 x 3 cups, off-centre across it.
    L, W = 0.182, 0.167
    rule = plan_grasp(L, W)
    alts = grasp_alternatives(L, W, 9.95, gripper)
    assert alts, 'a 2 x 3 block can stand elsewhere over this lid'
    offsets = [g.offset for g in alts]
    assert len(set(offsets)) == len(offsets)
    assert all(math.dist(o, rule.offset) > 0.02 for o in offsets)
    for g in alts:
        half_x = (g.c1 - g.c0 - 1) * gripper.pitch_x / 2
        half_y = (g.r1 - g.r0 - 1) * gripper.pitch_y / 2
        assert half_x <= L / 2 - gripper.cup_radius + 1e-12
        assert half_y <= W / 2 - gripper.cup_radius + 1e-12
        assert g.capacity >= 9.95 * 9.81 * 1.5 and g.required is None
    # The same cup count first, and one that moves the tool a column along the lid is among them.
    assert alts[0].n_cups == rule.n_cups
    assert any(abs(g.offset[0] - rule.offset[0]) > 0.07 for g in alts)
    # Most cups first, then the nearest the tool axis.
    keys = [(-g.n_cups, math.hypot(*g.offset)) for g in alts]
    assert keys == sorted(keys)
    # A carton too heavy for any smaller block leaves only the rule's cup count.
    heavy = grasp_alternatives(0.60, 0.40, 25.0, gripper)  # 368 N: 11 cups
    assert heavy and all(g.n_cups >= 12 for g in heavy)
    assert grasp_alternatives(0.30, 0.035, None, gripper) == []
