"""Score heuristic, window quantities: per footprint, every window of the height map at once.

The map pooled to the planning cell, and per footprint size (cells along X and Y) each window's
base, support extent, clearance ring and the 11 score terms that do not depend on yaw or the
carton's CoG, as arrays indexed by window corner (j0, i0). Rules and values: docs/planners.md
§6.2-6.4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from palletizer.core.contracts import HeightMap
from palletizer.core.errors import PalletizerError
from palletizer.core.params.planning import HeuristicParams

__all__ = ['MAX_LEVELS', 'Shape', 'despeckle', 'pool', 'shape_terms']


# ---------------------------------------------------------------------------------------------
# Window primitives. All return arrays indexed by window corner (j0, i0).


def run_max(a: np.ndarray, w: int, axis: int) -> np.ndarray:
    """The largest entry of every run of w consecutive entries along axis (n - w + 1 of them);
    for a boolean array, whether the run holds a True.

    By doubling: after k steps m[i] is the largest of a[i : i + 2**k]; the two runs of the
    largest power of two p <= w that start at i and at i + w - p cover a[i : i + w]. That is
    log2(w) elementwise maxima instead of the w-wide reduction of a sliding window view, and
    exactly the same values.
    """
    if w < 1 or w > a.shape[axis]:
        raise PalletizerError(f'run_max: window {w} on an axis of {a.shape[axis]}')
    m = np.moveaxis(a, axis, 0)
    n = m.shape[0] - w + 1
    p = 1
    while 2 * p <= w:
        m = np.maximum(m[:-p], m[p:])
        p *= 2
    out = m[:n] if p == w else np.maximum(m[:n], m[w - p : w - p + n])
    return np.moveaxis(out, 0, axis)


def _sliding_max(a: np.ndarray, wy: int, wx: int) -> np.ndarray:
    return run_max(run_max(a, wx, 1), wy, 0)


def _integral(a: np.ndarray) -> np.ndarray:
    c = np.zeros((a.shape[0] + 1, a.shape[1] + 1))
    c[1:, 1:] = np.asarray(a, dtype=float).cumsum(0).cumsum(1)
    return c


def _window_sum(a: np.ndarray, wy: int, wx: int) -> np.ndarray:
    c = _integral(a)
    return cast(np.ndarray, c[wy:, wx:] - c[:-wy, wx:] - c[wy:, :-wx] + c[:-wy, :-wx])


def _first_true(p: np.ndarray, axis: int) -> np.ndarray:
    """Index of the first True at or after each position along axis (size when none)."""
    n = p.shape[axis]
    idx = np.arange(n).reshape([-1 if k == axis else 1 for k in range(p.ndim)])
    v = np.where(p, idx, n)
    return np.flip(np.minimum.accumulate(np.flip(v, axis), axis=axis), axis)


def _last_true(p: np.ndarray, axis: int) -> np.ndarray:
    """Index of the last True at or before each position along axis (-1 when none)."""
    n = p.shape[axis]
    idx = np.arange(n).reshape([-1 if k == axis else 1 for k in range(p.ndim)])
    return np.maximum.accumulate(np.where(p, idx, -1), axis=axis)


def pool(heightmap: HeightMap, cell: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Heights and observed mask at the planning cell; a finer map is max-pooled."""
    cells = np.asarray(heightmap.cells)
    obs = np.asarray(heightmap.observed)
    ratio = cell / heightmap.cell_size
    k = round(ratio)
    if abs(ratio - k) > 1e-6 or k < 1:
        raise PalletizerError(
            f'heightmap.cell_size = {heightmap.cell_size}; expected the planning cell {cell} '
            'or an integer fraction of it'
        )
    if k == 1:
        return cells, obs, heightmap.cell_size
    ny, nx = cells.shape[0] // k, cells.shape[1] // k
    h = np.where(obs, cells, -np.inf)[: ny * k, : nx * k].reshape(ny, k, nx, k).max(axis=(1, 3))
    seen = np.isfinite(h)
    return np.where(seen, h, 0.0), seen, cell


def despeckle(h: np.ndarray, amplitude: float) -> np.ndarray:
    """The map with its lone high cells lowered by at most `amplitude` [m].

    A grey opening with a 2 x 2 element (each cell becomes the highest of the lowest cells of
    the 2 x 2 blocks that contain it) keeps every feature at least two cells wide in both
    directions, a carton's lid and edges among them, and lowers what stands above all of its
    neighbours in every block: the camera map's noise spikes. A base is a window's highest
    cell, so on a 0.55 x 0.36 m footprint one spike 6 mm above the deck's other readings left
    some 45 % of the deck outside support_tol and rejected the slot (level 33 seed 24, cameras).
    Lowering is capped at `amplitude` so a real edge cell the cameras saw alone stays.
    """
    if amplitude <= 0.0 or min(h.shape) < 2:
        return h
    low = np.minimum.reduce([h[:-1, :-1], h[1:, :-1], h[:-1, 1:], h[1:, 1:]])
    lp = np.pad(low, 1, constant_values=-np.inf)
    opened = np.maximum.reduce([lp[:-1, :-1], lp[1:, :-1], lp[:-1, 1:], lp[1:, 1:]])
    return np.maximum(opened, h - amplitude)


# ---------------------------------------------------------------------------------------------
# Per-footprint quantities.

# Above this many distinct window bases (a noisy sensor map), bases closer than a quarter of
# the support tolerance are evaluated together at the group's highest base.
MAX_LEVELS = 48


def _levels(zb: np.ndarray, tol: float) -> list[tuple[float, np.ndarray]]:
    """(base height, windows evaluated at it) for the per-level quantities.

    Exact per distinct base on clean maps. On noisy maps the bases are grouped in bins of
    tol / 4 and evaluated at the bin's highest base, which can only under-count support
    (conservative) by cells within tol / 4 of the tolerance edge.
    """
    values = np.unique(zb)
    if len(values) <= MAX_LEVELS or tol <= 0.0:
        return [(float(v), zb == v) for v in values]
    key = np.floor(zb / (tol / 4.0)).astype(np.int64)
    out = []
    for k in np.unique(key):
        sel = key == k
        out.append((float(zb[sel].max()), sel))
    return out


@dataclass(frozen=True)
class Shape:
    """Per-footprint (yaw-independent up to the CoG) window quantities, each (Ny, Nx) by
    window corner (j0, i0).

    fx, fy: the footprint in cells along X and Y; ex, ey: the same in m. zb: the base [m above
    deck], the highest cell under the footprint. cnt: the supported cells (within support_tol
    of the base); cmin, cmax, rmin, rmax: the first and last footprint column (row) touching
    support, relative to the window corner. collision, unobserved: the clearance ring's filters
    (RejectReason). terms: the yaw-independent score terms by name (TERMS).
    """

    fx: int
    fy: int
    ex: float
    ey: float
    zb: np.ndarray
    cnt: np.ndarray
    cmin: np.ndarray
    cmax: np.ndarray
    rmin: np.ndarray
    rmax: np.ndarray
    collision: np.ndarray
    unobserved: np.ndarray
    terms: dict[str, np.ndarray]


def shape_terms(
    h: np.ndarray,
    obs: np.ndarray,
    cell: float,
    fx: int,
    fy: int,
    height: float,
    short_side: float,
    p: HeuristicParams,
    deck_z: float,
    tool_margin: tuple[int, int] = (0, 0),
) -> Shape:
    """The window quantities of an fx x fy footprint on the map h (heights [m above deck])
    with observed mask obs at cell [m]; height [m] and short_side [m] are the carton's.
    tool_margin: the cells (x, y) the tool body reaches past the window on each side
    (core.planning.tool); a cell there above the new lid by more than support_tol is a
    collision too."""
    ny, nx = h.shape
    tol = p.support_tol
    n = fx * fy
    nc = math.ceil(p.clearance / cell - 1e-9)
    npx = max(1, math.ceil(p.proximity_band / cell - 1e-9))
    Ny, Nx = ny - fy + 1, nx - fx + 1
    zb = _sliding_max(h, fy, fx)

    # Ring of the clearance band: the map padded with -inf (off-map is empty, the rim is fine).
    hp = np.pad(h, nc, constant_values=-np.inf)
    collision = _sliding_max(hp, fy + 2 * nc, fx + 2 * nc) > zb + tol
    mx, my = tool_margin
    if mx > 0 or my > 0:
        ht = np.pad(h, ((my, my), (mx, mx)), constant_values=-np.inf)
        collision |= _sliding_max(ht, fy + 2 * my, fx + 2 * mx) > zb + height + tol
    unobs_p = np.pad(~obs, nc, constant_values=False)
    unobserved = _window_sum(unobs_p, fy + 2 * nc, fx + 2 * nc) > 0.5

    wsum = _window_sum(h, fy, fx)
    wsum2 = _window_sum(h * h, fy, fx)

    cnt = np.zeros((Ny, Nx))
    cmin = np.zeros((Ny, Nx), dtype=int)
    cmax = np.zeros((Ny, Nx), dtype=int)
    rmin = np.zeros((Ny, Nx), dtype=int)
    rmax = np.zeros((Ny, Nx), dtype=int)
    bridge = np.zeros((Ny, Nx))
    waste = np.zeros((Ny, Nx))
    useful = p.useful_gap if p.useful_gap > 0.0 else short_side
    colmax = run_max(h, fy, 0)  # (Ny, nx)
    rowmax = run_max(h, fx, 1)  # (ny, Nx)
    i0 = np.arange(Nx)[None, :]
    j0 = np.arange(Ny)[:, None]
    qx, qy = max(1, fx // 4), max(1, fy // 4)

    for v, sel in _levels(zb, tol):
        s = h >= v - tol
        cnt[sel] = _window_sum(s, fy, fx)[sel]
        # (Ny, nx): the column touches support; (ny, Nx): the row does.
        pc = run_max(s, fy, 0)
        pr = run_max(s, fx, 1)
        c0 = _first_true(pc, 1)[:, :Nx] - i0
        c1 = _last_true(pc, 1)[:, fx - 1 : fx - 1 + Nx] - i0
        r0 = _first_true(pr, 0)[:Ny, :] - j0
        r1 = _last_true(pr, 0)[fy - 1 : fy - 1 + Ny, :] - j0
        cmin[sel], cmax[sel], rmin[sel], rmax[sel] = c0[sel], c1[sel], r0[sel], r1[sel]
        ncol = _window_sum(pc, 1, fx)
        nrow = _window_sum(pr, fy, 1)
        bx = (fx >= 3) & (c0 < qx) & (c1 >= fx - qx) & (ncol < c1 - c0 + 1)
        by = (fy >= 3) & (r0 < qy) & (r1 >= fy - qy) & (nrow < r1 - r0 + 1)
        bridge[sel] = (bx | by)[sel]

        # Gap waste: distance to the first blocking cell on each side (edge = no clearance).
        bc = colmax > v + tol  # (Ny, nx)
        br = rowmax > v + tol  # (ny, Nx)
        last_c = np.pad(_last_true(bc, 1), ((0, 0), (1, 0)), constant_values=-1)[:, :Nx]
        first_c = np.pad(_first_true(bc, 1), ((0, 0), (0, 1)), constant_values=nx)[:, fx:]
        last_r = np.pad(_last_true(br, 0), ((1, 0), (0, 0)), constant_values=-1)[:Ny, :]
        first_r = np.pad(_first_true(br, 0), ((0, 1), (0, 0)), constant_values=ny)[fy:, :]
        sides = (
            (i0 - last_c - 1, last_c < 0),
            (first_c - (i0 + fx), first_c >= nx),
            (j0 - last_r - 1, last_r < 0),
            (first_r - (j0 + fy), first_r >= ny),
        )
        total = np.zeros((Ny, Nx))
        for dist, at_edge in sides:
            gap = dist * cell - np.where(at_edge, 0.0, p.clearance)
            total += np.where(gap < useful - 1e-9, np.clip(gap, 0.0, None), 0.0)
        waste[sel] = (total / 4.0)[sel]

    terms: dict[str, np.ndarray] = {}
    terms['support_ratio'] = cnt / n
    world_base = deck_z + zb
    terms['lowness'] = np.clip(1.0 - world_base / (deck_z + p.lowness_scale), 0.0, 1.0)
    void_mean = np.clip((n * zb - wsum) / n, 0.0, None)
    terms['void_fill'] = np.where(
        zb <= tol, 1.0, np.clip(1.0 - void_mean / np.maximum(zb, cell), 0.0, 1.0)
    )
    total_n = h.size
    t = zb + height
    s1 = h.sum() - wsum + n * t
    s2 = (h * h).sum() - wsum2 + n * t * t
    std = np.sqrt(np.clip(s2 / total_n - (s1 / total_n) ** 2, 0.0, None))
    terms['levelness'] = 1.0 / (1.0 + std / p.levelness_scale)
    top = float(h[obs].max()) if obs.any() else 0.0
    terms['peak_penalty'] = np.clip(1.0 - np.clip(t - top, 0.0, None) / height, 0.0, 1.0)

    # Lateral proximity: something taller than the base in the band beyond the clearance gap,
    # or the side lies near the pallet rim.
    pad = nc + npx
    hq = np.pad(h, pad, constant_values=-np.inf)
    bx_max = _sliding_max(hq, fy, npx)
    by_max = _sliding_max(hq, npx, fx)
    left = bx_max[pad : pad + Ny, 0:Nx]
    right = bx_max[pad : pad + Ny, fx + nc + pad : fx + nc + pad + Nx]
    down = by_max[0:Ny, pad : pad + Nx]
    up = by_max[fy + nc + pad : fy + nc + pad + Ny, pad : pad + Nx]
    near = pad - 1
    hits = (
        ((left > zb + tol) | (i0 <= near)).astype(float)
        + ((right > zb + tol) | (nx - (i0 + fx) <= near))
        + ((down > zb + tol) | (j0 <= near))
        + ((up > zb + tol) | (ny - (j0 + fy) <= near))
    )
    terms['lateral_proximity'] = hits / 4.0

    # Edge flush: at each footprint corner, does the surface step against an outside neighbour?
    step = np.abs(np.diff(h, axis=1)) > tol  # between (j, i) and (j, i + 1)
    dl = np.pad(step, ((0, 0), (1, 0)), constant_values=False)
    dr = np.pad(step, ((0, 0), (0, 1)), constant_values=False)
    step_y = np.abs(np.diff(h, axis=0)) > tol
    dd = np.pad(step_y, ((1, 0), (0, 0)), constant_values=False)
    du = np.pad(step_y, ((0, 1), (0, 0)), constant_values=False)
    js, ie = slice(0, Ny), slice(0, Nx)
    jt, ir = slice(fy - 1, fy - 1 + Ny), slice(fx - 1, fx - 1 + Nx)
    corners = (
        (dl[js, ie] | dd[js, ie]).astype(float)
        + (dr[js, ir] | dd[js, ir])
        + (dl[jt, ie] | du[jt, ie])
        + (dr[jt, ir] | du[jt, ir])
    )
    terms['edge_flush'] = corners / 4.0

    # Seam break: fraction of each non-rim side where the inside is higher than the outside.
    rise = np.diff(h, axis=1)  # h[j, i + 1] - h[j, i]
    el = np.pad(rise > tol, ((0, 0), (1, 0)), constant_values=False)  # inside at i, outside i-1
    er = np.pad(-rise > tol, ((0, 0), (0, 1)), constant_values=False)
    rise_y = np.diff(h, axis=0)
    ed = np.pad(rise_y > tol, ((1, 0), (0, 0)), constant_values=False)
    eu = np.pad(-rise_y > tol, ((0, 1), (0, 0)), constant_values=False)
    seam_sides = (
        (_window_sum(el, fy, 1)[:, :Nx] / fy, i0 > 0),
        (_window_sum(er, fy, 1)[:, fx - 1 : fx - 1 + Nx] / fy, i0 + fx < nx),
        (_window_sum(ed, 1, fx)[:Ny, :] / fx, j0 > 0),
        (_window_sum(eu, 1, fx)[fy - 1 : fy - 1 + Ny, :] / fx, j0 + fy < ny),
    )
    seam_sum = np.zeros((Ny, Nx))
    n_inner = np.zeros((Ny, Nx))
    for frac, inner in seam_sides:
        seam_sum += np.where(inner, frac, 0.0)
        n_inner += inner
    terms['seam_break'] = np.where(n_inner > 0, 1.0 - seam_sum / np.maximum(n_inner, 1.0), 1.0)

    # Overhang: how far the footprint sticks out beyond its supported extent. The reference took
    # the Manhattan distance of every unsupported cell, which also charged bridge gaps that the
    # bridge term rewards; the cantilever length is the physical quantity.
    out = np.maximum.reduce([cmin, fx - 1 - cmax, rmin, fy - 1 - rmax]).clip(0) * cell
    terms['overhang'] = np.where(cnt > 0, np.clip(1.0 - out / max(fx, fy) / cell, 0.0, 1.0), 0.0)
    terms['bridge'] = bridge
    terms['gap_waste'] = np.clip(1.0 - waste / useful, 0.0, 1.0)
    return Shape(
        fx, fy, fx * cell, fy * cell, zb, cnt, cmin, cmax, rmin, rmax, collision, unobserved, terms
    )
