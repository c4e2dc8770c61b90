"""The lid edges the filters leave unobserved, completed from the lids, cartons being boxes:
rectangles fitted to each lid's returns (_fit_lids), and the cells inside and round them
observed from the rectangles (_complete_edges).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

from palletizer.core.params.fusion import FusionParams

__all__: list[str] = []

# A fitted lid: its height [m], the cells whose centre its rectangle holds, the cells of the
# lid, and the rectangle (centre x, y [m, world], yaw [rad], length, width [m]).
_Lid = tuple[float, np.ndarray, np.ndarray, tuple[float, float, float, float, float]]


def _fit_lids(
    cells: np.ndarray,
    obs: np.ndarray,
    lid_pts: np.ndarray,
    foot: np.ndarray,
    origin: tuple[float, float],
    deck: float,
    params: FusionParams,
) -> list[_Lid]:
    """Rectangles fitted to the lids: each lid, a connected region of observed cells within
    lid_tol of one height, gets the minimum-area rectangle's axes of the returns within
    lid_band of its height round it (lid_pts (N, 3) [m, world], from the steepest view, foot
    (N,) their pixel footprints [m]) and its extent along them, lid_trim % trimmed off each end
    and widened by lid_widen of a pixel footprint. A rectangle holding cells observed at other
    heights below the lid's, or of its observed cells few of the lid's own or higher ones (a
    carton standing on it), is rejected (two lids merged, a fit thrown by stray returns).

    Returns (height [m], cells whose centre the rectangle holds, cells of the lid, the
    rectangle: centre x, y [m, world], yaw [rad], length, width [m]) per lid. The rectangle's
    centre is the mid-point of the trimmed extents, so the trim and the widening, the same at
    both ends, leave it where the returns put it, finer than the grid.
    """
    out: list[_Lid] = []
    if lid_pts.size == 0:
        return out
    ny, nx = cells.shape
    ox, oy = origin
    cs = params.cell
    pix = np.clip(((lid_pts[:, 0] - ox) / cs).astype(np.int64), 0, nx - 1)
    piy = np.clip(((lid_pts[:, 1] - oy) / cs).astype(np.int64), 0, ny - 1)
    pc = piy * nx + pix
    pz = lid_pts[:, 2] - deck
    gx = ox + (np.arange(nx) + 0.5) * cs
    gy = oy + (np.arange(ny) + 0.5) * cs
    k5 = np.ones((5, 5), np.uint8)
    k3 = np.ones((3, 3), np.uint8)
    todo = obs & (cells > 0.02)
    while todo.any():
        iy, ix = np.unravel_index(int(np.argmax(todo)), todo.shape)
        level = (obs & (np.abs(cells - cells[iy, ix]) <= params.lid_tol)).astype(np.uint8)
        _, lab = cv2.connectedComponents(level, connectivity=4)
        comp = lab == lab[iy, ix]
        todo &= ~comp
        if comp.sum() < 4:
            continue
        h = float(np.median(cells[comp]))
        near = cv2.dilate(comp.astype(np.uint8), k5).astype(bool)
        sel = near.reshape(-1)[pc] & (np.abs(pz - h) <= params.lid_band)
        if sel.sum() < 20:
            continue
        xy = lid_pts[sel, :2].astype(np.float32)
        ang = math.radians(cv2.minAreaRect(xy)[2])
        u = np.array([math.cos(ang), math.sin(ang)])
        v = np.array([-u[1], u[0]])
        t = params.lid_trim
        w = params.lid_widen * float(np.median(foot[sel]))
        u0, u1 = np.percentile(xy @ u, (t, 100 - t))
        v0, v1 = np.percentile(xy @ v, (t, 100 - t))
        GU = gx[None, :] * u[0] + gy[:, None] * u[1]
        GV = gx[None, :] * v[0] + gy[:, None] * v[1]
        rin = (GU >= u0 - w) & (GU <= u1 + w) & (GV >= v0 - w) & (GV <= v1 + w)
        n_in = int(rin.sum())
        if n_in == 0:
            continue
        # A carton standing on this one hides part of the lid: cells observed higher are no
        # contradiction, lower ones are (two lids merged round a gap, a fit thrown wide),
        # except on the rectangle's rim, where the oblique views' edge returns land. Nor are
        # cells no camera observed: the arm over the lid it just set down (the truck has no
        # ready pose) hides a small lid's middle from the top camera, its rim seen round the
        # gripper; counted against the lid, they threw out its rectangle and left the
        # placement check a fit to the cells, 5-11 mm off (levels 31-32, seeds 1-2).
        above = obs & (cells > h + params.lid_tol)
        below = obs & ~comp & (cells < h - params.lid_tol)
        core = cv2.erode(rin.astype(np.uint8), k3).astype(bool)
        n_lid, n_seen = int((rin & (comp | above)).sum()), int((rin & obs).sum())
        if int((core & below).sum()) > params.lid_other * n_in or n_lid < params.lid_fill * n_seen:
            continue
        cu, cv = (u0 + u1) / 2, (v0 + v1) / 2
        c = cu * u + cv * v
        rect = (float(c[0]), float(c[1]), ang, float(u1 - u0 + 2 * w), float(v1 - v0 + 2 * w))
        out.append((h, rin, comp, rect))
    return out


def _complete_edges(
    cells: np.ndarray,
    obs: np.ndarray,
    lids: list[_Lid],
    params: FusionParams,
) -> None:
    """Observe, in place, the edge cells round the fitted lids (lids = _fit_lids(...)): inside
    a rectangle the highest lid's height; outside every rectangle but within lid_ring of one,
    the height of the observed cells beyond (outside every rectangle) when at least two of the
    8 neighbours are and they agree within fill_tol; the same for the grid's outermost cells
    (the deck's edge, whose normals the footprint edge spoils). A slot between two lids, whose
    floor no camera saw, has only lid cells round it and stays unobserved."""
    top = np.full(cells.shape, -np.inf)
    for h, rin, _, _ in lids:
        top[rin] = np.maximum(top[rin], h)
    on = np.isfinite(top)
    fill = ~obs & on
    cells[fill] = top[fill]
    obs[fill] = True
    ring_px = max(int(math.ceil(params.lid_ring / params.cell)), 1)
    ring = cv2.dilate(on.astype(np.uint8), np.ones((2 * ring_px + 1,) * 2, np.uint8)).astype(bool)
    # The grid's outermost cells too: the deck's edge loses its normals at the footprint edge.
    border = np.ones_like(ring)
    border[1:-1, 1:-1] = False
    todo = (ring | border) & ~on
    ny, nx = cells.shape
    for _ in range(params.lid_ring_iters):
        if not (todo & ~obs).any():
            break
        H = np.pad(cells, 1)
        Ob = np.pad(obs & ~on, 1)
        hs = np.stack([H[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in _SHIFTS])
        os_ = np.stack([Ob[1 + dy : 1 + dy + ny, 1 + dx : 1 + dx + nx] for dy, dx in _SHIFTS])
        n = os_.sum(axis=0)
        hi = np.where(os_, hs, -np.inf).max(axis=0)
        lo = np.where(os_, hs, np.inf).min(axis=0)
        add = todo & ~obs & (n >= 2) & (hi - lo <= params.fill_tol)
        if not add.any():
            break
        cells[add] = (np.where(os_, hs, 0.0).sum(axis=0) / np.maximum(n, 1))[add]
        obs[add] = True


_SHIFTS = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0)]
