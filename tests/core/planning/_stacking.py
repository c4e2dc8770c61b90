"""Shared helpers: place a plan exactly, as a measured placement in the pallet frame; a deck
free only in one corner; a plan's TCP positions over a lid gripped off-centre."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from palletizer.core.contracts import HeightMap, PackageSpec, Placement, PlacementPlan
from palletizer.core.measure import measure_placement, world_to_pallet


def place_exactly(seq: int, spec: PackageSpec, plan: PlacementPlan, before) -> Placement:
    pose = world_to_pallet((*plan.position, plan.yaw))
    return measure_placement(seq, spec, plan.layer, pose, pose, before)


# A carton small enough to go anywhere in the free corner of corner_map.
SMALL = PackageSpec('small-00', 'small', (0.30, 0.22, 0.12), 1.8)


def corner_map(nx: int, ny: int = 52) -> HeightMap:
    """The deck free only in an nx x ny cm corner at the pallet's (-x, -y) rim; everything else
    stands 1.30 m high, with no placement explaining it."""
    cells = np.full((80, 120), 1.30)
    cells[:ny, :nx] = 0.0
    return HeightMap(cells, None, (0.0, -0.4), 0.01)


def assert_tcp_asked_and_in_disc(
    plan: PlacementPlan, offset: tuple[float, float], asked: Sequence[tuple[float, float]]
) -> None:
    """Both TCP positions of `plan` (the cup block `offset` off the lid centre, on either side
    as the carton may be held either way round) lie in the reach stand-ins' disc (0.45-1.0 m
    round (0.6, -0.72)) and were among the positions the planner `asked` about."""
    ox, oy = offset
    x, y = plan.position[:2]
    c, s = math.cos(plan.yaw), math.sin(plan.yaw)
    for sign in (-1.0, 1.0):
        tx, ty = x + sign * (c * ox - s * oy), y + sign * (s * ox + c * oy)
        assert 0.45 <= math.hypot(tx - 0.6, ty + 0.72) <= 1.0
        assert any(math.dist(p, (tx, ty)) < 1e-9 for p in asked)
