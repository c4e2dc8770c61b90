"""One height map from the pallet cameras' depth views (fuse_heightmap, FusionResult): the views'
points, the robot self-filter, per cell the estimate of the steepest view that observed it,
holes filled, deck gaps bridged and lid edges completed, with the rectangles fitted to the lids
(HeightMap.lids); and a fused map's errors against the
true one (map_errors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from palletizer.core.contracts import HeightMap, LidRect, PalletGeometry
from palletizer.core.heightmap_fusion.cells import _bridge_deck, _fill_holes, _robust_cells
from palletizer.core.heightmap_fusion.lids import _complete_edges, _fit_lids
from palletizer.core.heightmap_fusion.points import _lid_points, _view_points
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.params.fusion import FusionError, FusionParams

__all__ = ['FusionResult', 'fuse_heightmap', 'map_errors']


@dataclass(frozen=True)
class FusionResult:
    """The fused map, the points it was made of (N, 3) float32 [m, world] and how many points
    the robot self-filter removed."""

    heightmap: HeightMap
    points: np.ndarray
    dropped_robot: int


def _held_lid(held_dims: Sequence[float] | None) -> tuple[float, float, float] | None:
    """The held carton (L, W, H [m]) as the self-filter needs it for the kept points: its lid,
    a slab of no height at the cups (the filter's margin makes it 2 x robot_margin thick).

    The kept points face upward and the cameras look down: of a carton in the cups they can only
    be its lid, at the cups; its sides are dropped by their normals. The whole carton's box
    below the cups would also hold the lid of the carton just set down while the empty arm is
    still over it (the truck has no ready pose to wait at, and the carton last held stays the
    held one until the next detection): that lid was dropped from the map the placement check
    reads right after the place, in whole or in part.
    """
    if held_dims is None:
        return None
    length, width, _ = (float(v) for v in held_dims)
    return (length, width, 0.0)


def fuse_heightmap(
    views: Sequence[Any],
    params: FusionParams,
    pallet: PalletGeometry | None = None,
    body: RobotBody | None = None,
    q: np.ndarray | None = None,
    held_dims: Sequence[float] | None = None,
) -> FusionResult:
    """One height map from the depth views (CameraView: depth (H, W) [m], K, T_world_optical).

    Points of upward-facing surfaces inside the pallet footprint and the height band are kept;
    with a body and joint positions q (6,) [rad], points inside the inflated arm, gripper and
    held carton's lid (held_dims L x W x H [m]; _held_lid) are dropped. Per cell the estimate is the mean of the
    points within `band` of the cell's most populated height (a mode, robust against flying
    pixels and the noise that biases a maximum upward); cells with fewer than min_points stay
    unobserved (height 0), then small holes are filled where the neighbours agree.
    """
    p = pallet or PalletGeometry()
    cs = params.cell
    ox, oy = p.origin_xy
    nx, ny = round(p.size_xy[0] / cs), round(p.size_xy[1] / cs)
    deck = p.deck_z
    zlo, zhi = deck + params.z_range[0], deck + params.z_range[1]
    box = (ox, ox + nx * cs, oy, oy + ny * cs, zlo, zhi)
    # Steepest view first: a cell takes the estimate of the most downward-looking camera that
    # observed it. A near-vertical ray puts the depth error into the height only, and shows
    # little of the carton sides; an oblique one moves points across carton edges by about
    # the depth error (lid points spill onto the deck beyond), so it only fills what the
    # steeper views could not see.
    order = sorted(views, key=lambda v: float(np.asarray(v.T_world_optical)[2, 2]))
    parts = [_view_points(v, params, box, deck) for v in order]
    sizes = [len(q_) for q_ in parts]
    pts = np.concatenate(parts) if parts else np.zeros((0, 3), np.float32)
    src = np.repeat(np.arange(len(parts)), sizes)
    dropped = 0
    held = _held_lid(held_dims)
    if body is not None and q is not None and len(pts):
        inside = body.contains(pts, np.asarray(q, float), held, params.robot_margin)
        dropped = int(inside.sum())
        if dropped:
            pts, src = pts[~inside], src[~inside]
    ncell = nx * ny
    ix = np.minimum(((pts[:, 0] - ox) / cs).astype(np.int64), nx - 1)
    iy = np.minimum(((pts[:, 1] - oy) / cs).astype(np.int64), ny - 1)
    cell_of = iy * nx + ix
    nb = int(math.ceil((zhi - zlo) / params.bin)) + 2
    fused = np.zeros(ncell)
    seen = np.zeros(ncell, dtype=bool)
    for k in range(len(parts)):
        mine = src == k
        c, z = cell_of[mine], pts[mine, 2]
        if c.size == 0:
            continue
        est, cnt = _robust_cells(c, z, ncell, nb, zlo, params)
        new = ~seen & (cnt >= params.min_points)
        fused[new] = est[new]
        seen |= new
    obs = seen.reshape(ny, nx)
    cells = np.where(obs, np.maximum(fused.reshape(ny, nx) - deck, 0.0), 0.0)
    # Twice: a bridged board gap completes the neighbourhoods of holes next to it.
    for _ in range(2):
        _fill_holes(cells, obs, params.fill_neighbours, params.fill_tol)
        _bridge_deck(cells, obs, params.deck_bridge, params.fill_tol)
    rects: list[LidRect] = []
    if params.edge_fill and order:
        # The steepest view's returns give the lid edges; those inside the robot are its own.
        lid_pts, foot = _lid_points(order[0], box, deck)
        if body is not None and q is not None and len(lid_pts):
            free = ~body.contains(lid_pts, np.asarray(q, float), held, params.robot_margin)
            lid_pts, foot = lid_pts[free], foot[free]
        lids = _fit_lids(cells, obs, lid_pts, foot, (ox, oy), deck, params)
        _complete_edges(cells, obs, lids, params)
        rects = [LidRect(*r, h) for h, _, _, r in lids]
    hm = HeightMap(cells, obs, (ox, oy), cs, tuple(rects))
    return FusionResult(hm, np.ascontiguousarray(pts, dtype=np.float32), dropped)


def map_errors(fused: HeightMap, truth: HeightMap) -> dict[str, Any]:
    """Errors of a fused map against the true one: coverage_pct (observed share of the grid
    [%]), errors (absolute height errors [m] over the fused map's observed cells), and their
    median_mm and p99_mm."""
    if fused.shape != truth.shape:
        raise FusionError(f'map shapes differ: fused {fused.shape}, truth {truth.shape}')
    obs = np.asarray(fused.observed)
    err = np.abs(np.asarray(fused.cells)[obs] - np.asarray(truth.cells)[obs])
    return {
        'coverage_pct': 100.0 * float(obs.mean()),
        'errors': err,
        'median_mm': 1000.0 * float(np.median(err)) if err.size else 0.0,
        'p99_mm': 1000.0 * float(np.percentile(err, 99)) if err.size else 0.0,
    }
