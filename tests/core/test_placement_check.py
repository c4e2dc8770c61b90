"""The palletizer's own placement check: a lid located in a height map, to sub-cell accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.contracts import (
    HeightMap,
    LidRect,
    PackageSpec,
    PalletGeometry,
    PlacementPlan,
)
from palletizer.core.placement_check import PlacementCheck, locate_lid

PALLET = PalletGeometry()
CELL = 0.010


def _map(boxes, noise=0.0, seed=0):
    """A pallet height map with boxes (x, y, yaw, L, W, top above the deck), cells sampled at
    their centres, as the fusion's per-cell heights are."""
    nx, ny = round(PALLET.size_xy[0] / CELL), round(PALLET.size_xy[1] / CELL)
    ox = PALLET.centre_xy[0] - PALLET.size_xy[0] / 2
    oy = PALLET.centre_xy[1] - PALLET.size_xy[1] / 2
    xs = ox + (np.arange(nx) + 0.5) * CELL
    ys = oy + (np.arange(ny) + 0.5) * CELL
    X, Y = np.meshgrid(xs, ys)
    h = np.zeros((ny, nx))
    for x, y, yaw, L, W, top in boxes:
        c, s = math.cos(yaw), math.sin(yaw)
        u = (X - x) * c + (Y - y) * s
        v = -(X - x) * s + (Y - y) * c
        inside = (np.abs(u) <= L / 2) & (np.abs(v) <= W / 2)
        h = np.where(inside, np.maximum(h, top), h)
    h += np.random.default_rng(seed).normal(0.0, noise, h.shape)
    return HeightMap(h, origin=(ox, oy), cell_size=CELL)


@pytest.mark.parametrize(
    ('dx', 'dy', 'dyaw'), [(0.0, 0.0, 0.0), (0.004, -0.003, 0.02), (-0.012, 0.007, -0.05)]
)
def test_a_lid_is_located_to_a_few_millimetres_from_a_one_centimetre_map(dx, dy, dyaw):
    L, W, H = 0.42, 0.30, 0.18
    planned = (0.45, -0.12, PALLET.deck_z + H / 2, 0.3)
    actual = (planned[0] + dx, planned[1] + dy, planned[3] + dyaw)
    neighbour = (0.97, -0.12, 0.0, 0.40, 0.30, H)  # same layer, 60 mm away
    hm = _map([(*actual, L, W, H), neighbour], noise=0.002)
    fit = locate_lid(hm, PALLET, planned, (L, W, H))
    assert fit is not None
    x, y, z, yaw = fit.pose
    assert math.hypot(x - actual[0], y - actual[1]) < 0.004
    assert abs(yaw - actual[2]) < math.radians(1.5)
    assert abs(z - planned[2]) < 0.003 and fit.coverage > 0.8


def test_the_fusions_lid_rectangle_gives_the_centre_finer_than_the_grid():
    # The same lid with the fusion's rectangle of it: the centre and yaw are the rectangle's.
    # A rectangle of another size (a lid seen in part) or height is not this lid's.
    L, W, H = 0.42, 0.30, 0.18
    planned = (0.45, -0.12, PALLET.deck_z + H / 2, 0.3)
    actual = (0.4537, -0.1236, 0.31)
    cells = _map([(*actual, L, W, H)], noise=0.002)
    rect = LidRect(*actual[:2], actual[2] + math.pi / 2, W + 0.002, L - 0.003, H + 0.001)
    for lids, exact in [
        ((rect,), True),
        ((rect._replace(length=W - 0.08),), False),
        ((rect._replace(height=H + 0.05),), False),
        ((), False),
    ]:
        hm = HeightMap(cells.cells, cells.observed, cells.origin, cells.cell_size, lids)
        fit = locate_lid(hm, PALLET, planned, (L, W, H))
        assert fit is not None and fit.returns is exact
        err = math.hypot(fit.pose[0] - actual[0], fit.pose[1] - actual[1])
        assert (err < 1e-9) if exact else (err > 1e-4)
        assert abs(fit.pose[3] - actual[2]) < (1e-9 if exact else math.radians(1.5))


def test_a_lid_not_at_its_planned_height_is_not_seen():
    L, W, H = 0.42, 0.30, 0.18
    planned = (0.45, -0.12, PALLET.deck_z + H / 2, 0.0)
    covered = _map([(0.45, -0.12, 0.0, L, W, H + 0.2)])  # another carton stands on it
    assert locate_lid(covered, PALLET, planned, (L, W, H)) is None
    assert locate_lid(_map([]), PALLET, planned, (L, W, H)) is None  # never arrived


def test_the_yaw_is_reported_near_the_plan_not_a_quarter_or_half_turn_off():
    L, W, H = 0.40, 0.30, 0.20
    planned = (0.6, 0.1, PALLET.deck_z + H / 2, math.radians(178.0))
    hm = _map([(0.6, 0.1, math.radians(-179.0), L, W, H)])
    fit = locate_lid(hm, PALLET, planned, (L, W, H))
    assert fit is not None
    d = (fit.pose[3] - math.radians(181.0) + math.pi) % (2 * math.pi) - math.pi
    assert abs(d) < math.radians(1.5) and abs(fit.pose[3] - planned[3]) < math.radians(5)


class _Perception:
    def __init__(self, hm):
        self.hm = hm

    def heightmap(self):
        return self.hm


def test_a_carton_lost_on_its_way_is_reported_only_where_its_lid_is_found():
    # Two planned cartons, neither lid in the map. The one released at its slot but not seen
    # (the cameras missed it) is reported where it was planned; the one that left the gripper
    # on its way is left out, so the episode counts it as not placed. Found, it is reported.
    L, W, H = 0.42, 0.30, 0.18
    z = PALLET.deck_z + H / 2
    plans = {
        'carton-01': PlacementPlan((0.45, -0.12, z), 0.0, 1, 'a', 1.0, 1.0),
        'carton-02': PlacementPlan((0.85, 0.12, z), 0.0, 1, 'b', 1.0, 1.0),
    }
    check = PlacementCheck(_Perception(_map([])), PALLET)
    for pid, plan in plans.items():
        check.expect(pid, plan, PackageSpec(pid, 'carton', (L, W, H), 4.0))
    check.lost('carton-02')
    got = check.poses(list(plans))
    assert got == {'carton-01': (0.45, -0.12, z, 0.0)} and check.unseen == set(plans)
    check.perception = _Perception(_map([(0.85, 0.12, 0.0, L, W, H)]))  # it fell into place
    assert set(check.poses(list(plans))) == set(plans)
    check.reset()
    assert check.gone == set()


def test_a_lid_partly_covered_by_a_later_carton_keeps_its_last_measurement():
    # A carton on the layer above covers 40 % of the lower lid; the 60 % left in sight would
    # fit a rectangle 80 mm off the carton's centre. The check keeps what it measured before.
    L, W, H = 0.40, 0.30, 0.20
    z = PALLET.deck_z + H / 2
    plan = PlacementPlan((0.5, 0.0, z), 0.0, 1, 'a', 1.0, 1.0)
    check = PlacementCheck(_Perception(_map([(0.502, 0.001, 0.0, L, W, H)], noise=0.001)), PALLET)
    check.expect('carton-01', plan, PackageSpec('carton-01', 'carton', (L, W, H), 4.0))
    first = check.poses(['carton-01'])['carton-01']
    assert math.hypot(first[0] - 0.502, first[1] - 0.001) < 0.004
    upper = (0.502 + L / 2, 0.001, 0.0, L, W, 2 * H)  # its left edge over the lower's middle
    hm = _map([(0.502, 0.001, 0.0, L, W, H), upper], noise=0.001)
    part = locate_lid(hm, PALLET, (0.5, 0.0, z, 0.0), (L, W, H))
    assert part is not None and part.covered > 0.3  # the part in sight alone is well off
    assert abs(part.pose[0] - 0.502) > 0.05
    assert check.poses(['carton-01'])['carton-01'] == first
    assert check.fits['carton-01'].covered == 0.0 and not check.unseen
