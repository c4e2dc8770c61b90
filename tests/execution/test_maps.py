"""One fused map reaching the executor twice (topic and place goal, either order) is new once."""

from __future__ import annotations

import numpy as np
from palletizer.core.contracts import HeightMap
from palletizer.execution.maps import CurrentMap, same_map


def _map(top: float) -> HeightMap:
    cells = np.zeros((80, 120))
    cells[10:40, 20:60] = top
    return HeightMap(cells)


def test_the_second_copy_of_a_map_is_not_new_whichever_copy_came_first():
    current = CurrentMap()
    assert current.offer(_map(0.2))  # the place goal's copy
    assert not current.offer(_map(0.2))  # the topic's copy, a separate but equal object
    assert current.offer(_map(0.4))  # the next fusion
    assert not current.offer(_map(0.4))
    current.clear()  # a new episode
    assert current.offer(_map(0.4))


def test_maps_differ_by_cells_observed_mask_or_grid():
    a = _map(0.2)
    assert same_map(a, _map(0.2))
    assert not same_map(a, _map(0.2000001))
    seen = np.ones(a.shape, dtype=bool)
    seen[0, 0] = False
    assert not same_map(a, HeightMap(a.cells, observed=seen))
    assert not same_map(a, HeightMap(a.cells, origin=(0.0, -0.39)))
