"""The executor's current height map, as the fused maps reach it (topic and goals, any order)."""

from __future__ import annotations

import numpy as np

from palletizer.core.contracts import HeightMap

__all__ = ['CurrentMap', 'same_map']


def same_map(a: HeightMap, b: HeightMap) -> bool:
    """Whether two height maps are the same fused map (cells, observed mask and grid)."""
    # HeightMap.__post_init__ replaces observed=None by an all-True mask.
    assert a.observed is not None and b.observed is not None, 'HeightMap without a mask'
    return (
        a.origin == b.origin
        and a.cell_size == b.cell_size
        and np.array_equal(a.cells, b.cells)
        and np.array_equal(a.observed, b.observed)
    )


class CurrentMap:
    """The newest fused map. One fused map reaches the trajectory executor twice, on the
    latched topic and in the place goal, in either order: `offer` says whether a map is new
    (only a new map shows the cartons placed since the last one), so the second copy of a map
    changes nothing."""

    def __init__(self) -> None:
        self.map: HeightMap | None = None

    def offer(self, heightmap: HeightMap) -> bool:
        """Take `heightmap` as the current map; False when it is the current one already."""
        if self.map is not None and same_map(self.map, heightmap):
            return False
        self.map = heightmap
        return True

    def clear(self) -> None:
        """No map (a new episode's pallet is empty until the next fusion)."""
        self.map = None
