"""The online 3D bin-packing setting of the learning literature: an integer bin, a height map,
items dropped from above, and the support rule that decides whether an item may rest where it
lands (docs/bpp.md §10.1, §10.3).

Coordinates are integer cells: x along the bin's length, y along its width, z up. An item turned
by a quarter turn about z swaps its x and y sides. Heights are kept as an (L, W) int array indexed
[x, y]: an item dropped at (x, y) rests on the highest cell under its footprint, so the space
under an overhang is lost (the height-map model the papers use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.errors import InvalidValue

__all__ = [
    'BIN_SIZE',
    'Check',
    'Container',
    'Item',
    'Pose',
    'Rejection',
    'footprint',
    'stable',
]

# The bin of the setting: 10 x 10 x 10 cells.
BIN_SIZE: tuple[int, int, int] = (10, 10, 10)

Item = tuple[int, int, int]  # (l, w, h) [cells], l along x before any turn


@dataclass(frozen=True)
class Pose:
    """Where an item goes: its low corner (x, y) [cells] and rot, 0 or 1 (a quarter turn about z:
    the footprint is w along x and l along y)."""

    x: int
    y: int
    rot: int


class Rejection:
    """Why the container refuses a pose (Check.reason)."""

    out_of_bin = 'out_of_bin'
    too_tall = 'too_tall'
    unstable = 'unstable'


@dataclass(frozen=True)
class Check:
    """A pose judged: ok, the base height z [cells] it lands at, and the reason when refused."""

    ok: bool
    z: int
    reason: str = ''


def footprint(item: Item, rot: int) -> tuple[int, int]:
    """(extent along x, extent along y) [cells] of `item` turned by `rot` quarter turns."""
    return (item[1], item[0]) if rot % 2 else (item[0], item[1])


def _cross(o: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> int:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _in_hull(points: Sequence[tuple[int, int]], q: tuple[int, int]) -> bool:
    """Whether q lies in the closed convex hull of `points` (integer coordinates, exact)."""
    pts = sorted(set(points))
    if len(pts) == 1:
        return pts[0] == q
    lower: list[tuple[int, int]] = []
    for p in pts:
        while len(lower) >= 2 and _cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[int, int]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and _cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    hull = lower[:-1] + upper[:-1]
    if len(hull) == 2:  # collinear points: q must lie on the segment
        a, b = hull
        return (
            _cross(a, b, q) == 0
            and min(a[0], b[0]) <= q[0] <= max(a[0], b[0])
            and min(a[1], b[1]) <= q[1] <= max(a[1], b[1])
        )
    n = len(hull)
    return all(_cross(hull[k], hull[(k + 1) % n], q) >= 0 for k in range(n))


def stable(heights: np.ndarray, x: int, y: int, ex: int, ey: int, z: int) -> bool:
    """The support rule (docs/bpp.md §10.3): may a footprint ex x ey [cells] with its low corner at
    (x, y) rest at base height z on `heights` ((L, W) int, [x, y])?

    On the floor (z == 0): yes. Otherwise the supported cells are the footprint's cells whose
    height equals z. Yes when more than half of the footprint is supported, or when the
    footprint's centre lies in the closed convex hull of the supported cells' centres.
    """
    if z == 0:
        return True
    rec = heights[x : x + ex, y : y + ey]
    sx, sy = np.nonzero(rec == z)
    n = len(sx)
    if 2 * n > ex * ey:
        return True
    if n == 0:
        return False
    # Doubled coordinates keep the centre, (x + (ex - 1) / 2, y + (ey - 1) / 2), integer.
    pts = [(2 * int(i), 2 * int(j)) for i, j in zip(sx, sy, strict=True)]
    return _in_hull(pts, (ex - 1, ey - 1))


class Container:
    """One bin being packed: the height map and the items placed, in order."""

    def __init__(self, size: tuple[int, int, int] = BIN_SIZE) -> None:
        self.size = size
        self.heights = np.zeros(size[:2], dtype=np.int64)
        self.placed: list[tuple[Item, Pose, int]] = []  # item, pose, base z
        self.volume = 0

    def base(self, ex: int, ey: int, x: int, y: int) -> int:
        """The height [cells] a footprint ex x ey dropped at (x, y) comes to rest at (in bounds)."""
        return int(self.heights[x : x + ex, y : y + ey].max())

    def check(self, item: Item, pose: Pose) -> Check:
        """Whether `item` may go at `pose`: inside the bin, its top at most the bin's height, and
        stable by the support rule."""
        ex, ey = footprint(item, pose.rot)
        L, W, H = self.size
        if pose.x < 0 or pose.y < 0 or pose.x + ex > L or pose.y + ey > W:
            return Check(False, -1, Rejection.out_of_bin)
        z = self.base(ex, ey, pose.x, pose.y)
        if z + item[2] > H:
            return Check(False, z, Rejection.too_tall)
        if not stable(self.heights, pose.x, pose.y, ex, ey, z):
            return Check(False, z, Rejection.unstable)
        return Check(True, z)

    def feasible(self, item: Item) -> list[tuple[Pose, int]]:
        """Every allowed (pose, base z) of `item`, rot 0 first, then x, then y ascending. A square
        footprint is tried once (rot 0)."""
        out: list[tuple[Pose, int]] = []
        L, W, _ = self.size
        for rot in (0, 1) if item[0] != item[1] else (0,):
            ex, ey = footprint(item, rot)
            for x in range(L - ex + 1):
                for y in range(W - ey + 1):
                    pose = Pose(x, y, rot)
                    c = self.check(item, pose)
                    if c.ok:
                        out.append((pose, c.z))
        return out

    def place(self, item: Item, pose: Pose) -> int:
        """Put `item` at `pose` (it must pass check); returns its base z [cells]."""
        c = self.check(item, pose)
        if not c.ok:
            raise InvalidValue(
                f'item {item} at {pose}: refused ({c.reason}); expected a pose that check() allows'
            )
        ex, ey = footprint(item, pose.rot)
        self.heights[pose.x : pose.x + ex, pose.y : pose.y + ey] = c.z + item[2]
        self.placed.append((item, pose, c.z))
        self.volume += item[0] * item[1] * item[2]
        return c.z

    @property
    def utilisation(self) -> float:
        """Packed volume over the bin's volume, in [0, 1]."""
        L, W, H = self.size
        return self.volume / (L * W * H)
