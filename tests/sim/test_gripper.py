"""VGP20 cup layout and the cup coverage / capacity rule of docs/cell.md §3.10."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.sim.gripper import CupBlock, block_capacity, cup_positions, plan_cup_block


def test_cup_positions_follow_the_pitch_grid():
    pts = cup_positions()
    np.testing.assert_allclose(np.unique(pts[:, 0]), [-0.11205, -0.03735, 0.03735, 0.11205])
    np.testing.assert_allclose(np.unique(pts[:, 1]), [-0.072, -0.024, 0.024, 0.072])


def test_book_s_gets_a_centred_three_by_three_block():
    block = plan_cup_block(0.24, 0.18)
    assert block.n_cups == 9
    cap, req = block_capacity(block, 1.20)
    assert cap == pytest.approx(315.0)
    assert req == pytest.approx(17.658)
    # Three of four columns cannot be centred: the block sits one half pitch off the axis.
    assert abs(block.offset()[0]) == pytest.approx(0.0747 / 2)
    assert abs(block.offset()[1]) == pytest.approx(0.024)


def test_large_lid_uses_all_sixteen_cups():
    block = plan_cup_block(0.55, 0.36)
    assert block == CupBlock(0, 4, 0, 4)
    cap, req = block_capacity(block, 8.5)
    assert cap == pytest.approx(560.0)
    assert cap >= req


def test_lid_narrower_than_a_cup_gets_no_cups():
    block = plan_cup_block(0.035, 0.20)
    assert block.n_cups == 0
    assert block_capacity(block, 0.5)[0] == 0.0
