"""Tests of the swept tool / carton checks against height fields and static boxes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.contracts import HeightMap
from palletizer.core.motion import AABB, CarriedLoad, CollisionWorld, HeightField, MotionError
from palletizer.core.motion.collision import first_collision

BODY = (0.264, 0.184, 0.092)


def test_height_field_reads_the_core_height_map_contract():
    cells = np.zeros((80, 120))
    cells[10, 20] = 0.3
    hf = HeightField.from_height_map(HeightMap(cells))
    assert hf.top_z == pytest.approx(0.144 + 0.3)
    # Cell (row 10, col 20) is centred at world (0.205, -0.295).
    assert hf.max_under(0.205, -0.295, 0.001, 0.001, 0.0) == pytest.approx(0.444)
    assert hf.max_under(0.5, 0.2, 0.05, 0.05, 0.0) == pytest.approx(0.144)
    assert hf.max_under(3.0, 3.0, 0.05, 0.05, 0.0) == -math.inf


def test_rotated_footprint_misses_a_cell_its_bounding_box_would_cover():
    cells = np.zeros((80, 120))
    cells[40, 60] = 0.5  # cell centred at (0.605, 0.005)
    hf = HeightField(cells)
    # A 0.4 x 0.02 bar at 45 deg centred at (0.5, 0.0): the AABB covers the cell, the bar not.
    assert hf.max_under(0.5, 0.0, 0.2, 0.01, math.pi / 4) == pytest.approx(0.144)
    assert hf.max_under(0.5, 0.0, 0.2, 0.01, 0.0) == pytest.approx(0.644)


def test_carried_carton_hits_a_box_the_bare_tool_clears():
    box = AABB((0.4, -0.1, 0.0), (0.6, 0.1, 0.5), 'crate')
    world = CollisionWorld(None, (box,))
    pose = np.array([[0.5, 0.0, 0.6, 0.0]])  # TCP 10 cm above the crate
    assert first_collision(pose, world, BODY, 0.0015, None, 0.005) is None
    hit = first_collision(pose, world, BODY, 0.0015, CarriedLoad((0.3, 0.2, 0.2)), 0.005)
    assert hit == (0, 'crate')


def test_carton_offset_is_applied_in_the_tool_frame():
    # Tool-frame offset (0, +0.2) lands at world y -0.2 at yaw 0 (tool y runs against world y).
    box = AABB((0.45, -0.25, 0.0), (0.55, -0.15, 0.5), 'post')
    world = CollisionWorld(None, (box,))
    pose = np.array([[0.5, 0.0, 0.6, 0.0]])
    load = CarriedLoad((0.05, 0.05, 0.2), offset=(0.0, 0.2))
    assert first_collision(pose, world, (0.01, 0.01, 0.01), 0.0, load, 0.005) == (0, 'post')
    mirrored = CarriedLoad((0.05, 0.05, 0.2), offset=(0.0, -0.2))
    assert first_collision(pose, world, (0.01, 0.01, 0.01), 0.0, mirrored, 0.005) is None


def test_resting_contact_within_tolerance_is_not_a_collision():
    table = AABB((-0.5, -0.5, 0.0), (0.5, 0.5, 0.58), 'table')
    world = CollisionWorld(None, (table,))
    load = CarriedLoad((0.3, 0.2, 0.2))
    resting = np.array([[0.0, 0.0, 0.58 + 0.2 + 0.0015, 0.0]])
    assert first_collision(resting, world, BODY, 0.0015, load, 0.005) is None
    sunk = resting - [0, 0, 0.01, 0]
    assert first_collision(sunk, world, BODY, 0.0015, load, 0.005) == (0, 'table')


def test_aabb_rejects_inverted_corners():
    with pytest.raises(MotionError, match='must be <='):
        AABB((0.0, 0.0, 1.0), (1.0, 1.0, 0.0), 'bad')
