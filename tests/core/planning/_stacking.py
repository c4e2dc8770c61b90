"""Shared helpers: place a plan exactly, as a measured placement in the pallet frame; a deck
free only in one corner."""

from __future__ import annotations

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
