"""Baseline packing rules of the literature, written from their definitions (docs/bpp.md §10.5).

Each looks at every pose the container allows (Container.feasible: inside the bin, under its
height, stable by the support rule) and picks one by a fixed order, so a baseline never proposes
a refused pose. Ties fall to the container's enumeration order (rot 0 first, then x, then y).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from palletizer.core.bpp.container import Container, Item, Pose, footprint

__all__ = ['BASELINES', 'Baseline', 'dbl', 'first_fit', 'heightmap_min']


class Baseline:
    """A packing rule as a policy: `key(container, item, pose, z)` ranks the allowed poses,
    smallest first."""

    def __init__(
        self, name: str, key: Callable[[Container, Item, Pose, int], tuple[float, ...]]
    ) -> None:
        self.name = name
        self._key = key

    def reset(self) -> None:
        """A new bin: the rules keep no state."""

    def choose(self, container: Container, item: Item) -> Pose | None:
        best: tuple[tuple[float, ...], int] | None = None
        cands = container.feasible(item)
        for k, (pose, z) in enumerate(cands):
            key = (*self._key(container, item, pose, z), k)
            if best is None or key < best[0]:
                best = (key, k)
        return None if best is None else cands[best[1]][0]


def _first(container: Container, item: Item, pose: Pose, z: int) -> tuple[float, ...]:
    """First fit: the first allowed pose scanning x, then y, then the turn."""
    return (pose.x, pose.y, pose.rot)


def _dbl(container: Container, item: Item, pose: Pose, z: int) -> tuple[float, ...]:
    """Deepest-bottom-left: the smallest depth x, then the lowest base z, then the smallest y."""
    return (pose.x, z, pose.y)


def _hm(container: Container, item: Item, pose: Pose, z: int) -> tuple[float, ...]:
    """Height-map minimisation: the pose that leaves the smallest sum of the height map (the
    least volume covered, item and the space it seals under it), then the lowest top, then DBL."""
    ex, ey = footprint(item, pose.rot)
    under = container.heights[pose.x : pose.x + ex, pose.y : pose.y + ey]
    grow = float(np.sum(z + item[2] - under))
    return (grow, z + item[2], pose.x, z, pose.y)


def first_fit() -> Baseline:
    return Baseline('first_fit', _first)


def dbl() -> Baseline:
    return Baseline('dbl', _dbl)


def heightmap_min() -> Baseline:
    return Baseline('heightmap_min', _hm)


BASELINES: dict[str, Callable[[], Baseline]] = {
    'first_fit': first_fit,
    'dbl': dbl,
    'heightmap_min': heightmap_min,
}
