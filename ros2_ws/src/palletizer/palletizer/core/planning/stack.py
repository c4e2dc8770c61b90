"""The stack as planners see it: measured placements turned into boxes in the pallet frame."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from palletizer.core.contracts import HeightMap, PackageSpec, PalletGeometry, Placement
from palletizer.core.stability import StackBox

__all__ = ['box_from_placement', 'map_max_under', 'snap_quarter', 'stack_from_placements']


def snap_quarter(yaw: float) -> int:
    """0 when the footprint's long side lies along X, 1 along Y (yaw snapped to 0/90)."""
    return int(abs(math.sin(yaw)) > abs(math.cos(yaw)))


def box_from_placement(p: Placement, cog_offset: Sequence[float] = (0.0, 0.0, 0.0)) -> StackBox:
    """A measured placement as an axis-aligned StackBox (PALLET frame, yaw snapped to 0/90)."""
    x, y, z, yaw = p.actual_pose
    L, W, H = p.dims_m
    q = snap_quarter(yaw)
    ex, ey = (W, L) if q else (L, W)
    c, s = math.cos(yaw), math.sin(yaw)
    cog = (x + c * cog_offset[0] - s * cog_offset[1], y + s * cog_offset[0] + c * cog_offset[1])
    return StackBox(x, y, z - H / 2.0, ex, ey, H, p.mass_kg, (cog[0], cog[1], z + cog_offset[2]))


def stack_from_placements(
    placements: Sequence[Placement], specs: Mapping[str, PackageSpec] | None = None
) -> list[StackBox]:
    """Placed cartons as StackBoxes; CoG offsets come from the specs seen when planning."""
    specs = specs or {}
    out = []
    for p in placements:
        if not p.placed:
            continue
        spec = specs.get(p.package_id)
        out.append(box_from_placement(p, spec.cog_offset_m if spec else (0.0, 0.0, 0.0)))
    return out


def map_max_under(
    heightmap: HeightMap,
    x0: np.ndarray,
    x1: np.ndarray,
    y0: np.ndarray,
    y1: np.ndarray,
    pallet: PalletGeometry,
) -> np.ndarray:
    """Highest map cell [m above deck] under each pallet-frame rect (x0, x1, y0, y1) [m]."""
    h = np.asarray(heightmap.cells)
    cell = heightmap.cell_size
    ox = heightmap.origin[0] - pallet.centre_xy[0]
    oy = heightmap.origin[1] - pallet.centre_xy[1]
    ny, nx = h.shape
    # Cells whose centre lies inside the rect.
    i0 = np.clip(np.ceil((x0 - ox) / cell - 0.5 - 1e-9).astype(int), 0, nx)
    i1 = np.clip(np.floor((x1 - ox) / cell - 0.5 + 1e-9).astype(int) + 1, 0, nx)
    j0 = np.clip(np.ceil((y0 - oy) / cell - 0.5 - 1e-9).astype(int), 0, ny)
    j1 = np.clip(np.floor((y1 - oy) / cell - 0.5 + 1e-9).astype(int) + 1, 0, ny)
    out = np.zeros(len(x0))
    for k in range(len(x0)):
        if i1[k] > i0[k] and j1[k] > j0[k]:
            out[k] = h[j0[k] : j1[k], i0[k] : i1[k]].max()
    return out
