"""Height-map maths on carton poses: the yaw of a quaternion and footprints stamped on the grid.

ROS- and MuJoCo-free, so the depth_fusion node (oracle mode), the referee over ROS and the
in-process oracles share one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from palletizer.core.contracts import HeightMap, PalletGeometry

__all__ = ['stamp_heightmap', 'yaw_of_quat']

CartonBox = tuple[str, Sequence[float], Sequence[float], Sequence[float]]


def yaw_of_quat(q: Sequence[float]) -> float:
    """Yaw [rad] of a (w, x, y, z) quaternion: the heading of the body's x axis."""
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def stamp_heightmap(
    boxes: Iterable[CartonBox],
    held: str | None,
    pallet: PalletGeometry | None = None,
    cell_size: float = 0.010,
) -> HeightMap:
    """Oracle height map from true carton poses: (package_id, pos (3,) [m], quat wxyz,
    dims (3,) [m]) each.

    Every carton resting above the deck stamps its top on the cells under its rotated
    footprint, lowest first; a held carton, or one floating > 2 cm above what is under it
    (in the air, on a table edge), is skipped (docs/perception.md §4.3).
    """
    p = pallet or PalletGeometry()
    flat = HeightMap.flat(p, cell_size)
    ny, nx = flat.shape
    ox, oy = flat.origin
    X, Y = np.meshgrid(
        ox + (np.arange(nx) + 0.5) * cell_size, oy + (np.arange(ny) + 0.5) * cell_size
    )
    deck = p.deck_z
    cells = np.zeros((ny, nx))
    rows = []
    for pid, pos, quat, dims in boxes:
        if pid == held or float(pos[2]) < deck:
            continue
        rows.append((float(pos[2]) - dims[2] / 2, pos, quat, dims))
    for bottom, pos, quat, dims in sorted(rows, key=lambda r: r[0]):
        yaw = yaw_of_quat(quat)
        cs, sn = math.cos(yaw), math.sin(yaw)
        dx, dy = X - float(pos[0]), Y - float(pos[1])
        u, v = cs * dx + sn * dy, -sn * dx + cs * dy
        inside = (np.abs(u) <= dims[0] / 2) & (np.abs(v) <= dims[1] / 2)
        if not inside.any() or bottom - deck > cells[inside].max() + 0.02:
            continue
        cells[inside] = np.maximum(cells[inside], float(pos[2]) + dims[2] / 2 - deck)
    return HeightMap(cells, None, flat.origin, cell_size)
