"""Score heuristic: every window of the height map scored by 14 terms, vectorised.

Rules and values: docs/planners.md §6.2-6.5.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from palletizer.core.contracts import (
    HeightMap,
    PackageSpec,
    PalletGeometry,
    PalletState,
    Placement,
    PlacementPlan,
    PlanResult,
)
from palletizer.core.errors import PalletizerError
from palletizer.core.measure import measure_placement, world_to_pallet
from palletizer.core.planning.base import LayerBook, PlannerKind
from palletizer.core.planning.params import TERMS, HeuristicParams
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.stack import stack_from_placements
from palletizer.core.stability import StackBox, validate_stack

__all__ = ['REJECT_REASONS', 'Candidates', 'ScorePlanner', 'score_candidates']

# Hard filters in precedence order: a candidate failing several reports the first.
REJECT_REASONS: tuple[str, ...] = (
    'collision',
    'unobserved',
    'com_unsupported',
    'out_of_reach',
    'max_stack_height',
    'min_support_ratio',
)
_T = {name: k for k, name in enumerate(TERMS)}


@dataclass(frozen=True)
class Candidates:
    """Every valid candidate of one carton, best first (tie-break already applied).

    Arrays are (K,): score, z_base [m above deck], x, y [world, m], yaw [rad], i0, j0 (window
    corner cells along X and Y), support; terms is (K, 14) in TERMS order.
    reject_summary counts the invalid candidates per reason; n_total counts all of them.
    reach_state (K,) int8, only when reach is checked lazily: 1 reachable, -1 not, 0 not asked
    yet (ScorePlanner asks the oracle in rank order and fills it in).
    """

    score: np.ndarray
    z_base: np.ndarray
    x: np.ndarray
    y: np.ndarray
    yaw: np.ndarray
    i0: np.ndarray
    j0: np.ndarray
    support: np.ndarray
    terms: np.ndarray
    reject_summary: dict[str, int]
    n_total: int
    reach_state: np.ndarray | None = None


# ---------------------------------------------------------------------------------------------
# Window primitives. All return arrays indexed by window corner (j0, i0).


def _sliding_max(a: np.ndarray, wy: int, wx: int) -> np.ndarray:
    m = sliding_window_view(a, wx, axis=1).max(axis=-1)
    return sliding_window_view(m, wy, axis=0).max(axis=-1)


def _integral(a: np.ndarray) -> np.ndarray:
    c = np.zeros((a.shape[0] + 1, a.shape[1] + 1))
    c[1:, 1:] = np.asarray(a, dtype=float).cumsum(0).cumsum(1)
    return c


def _window_sum(a: np.ndarray, wy: int, wx: int) -> np.ndarray:
    c = _integral(a)
    return c[wy:, wx:] - c[:-wy, wx:] - c[wy:, :-wx] + c[:-wy, :-wx]


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


def _pool(heightmap: HeightMap, cell: float) -> tuple[np.ndarray, np.ndarray, float]:
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


# ---------------------------------------------------------------------------------------------


# Above this many distinct window bases (a noisy sensor map), bases closer than a quarter of
# the support tolerance are evaluated together at the group's highest base.
_MAX_LEVELS = 48


def _levels(zb: np.ndarray, tol: float) -> list[tuple[float, np.ndarray]]:
    """(base height, windows evaluated at it) for the per-level quantities.

    Exact per distinct base on clean maps. On noisy maps the bases are grouped in bins of
    tol / 4 and evaluated at the bin's highest base, which can only under-count support
    (conservative) by cells within tol / 4 of the tolerance edge.
    """
    values = np.unique(zb)
    if len(values) <= _MAX_LEVELS or tol <= 0.0:
        return [(float(v), zb == v) for v in values]
    key = np.floor(zb / (tol / 4.0)).astype(np.int64)
    out = []
    for k in np.unique(key):
        sel = key == k
        out.append((float(zb[sel].max()), sel))
    return out


@dataclass(frozen=True)
class _Shape:
    """Per-footprint (yaw-independent up to the CoG) window quantities."""

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


def _shape_terms(
    h: np.ndarray,
    obs: np.ndarray,
    cell: float,
    fx: int,
    fy: int,
    height: float,
    short_side: float,
    p: HeuristicParams,
    deck_z: float,
) -> _Shape:
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
    colmax = sliding_window_view(h, fy, axis=0).max(axis=-1)  # (Ny, nx)
    rowmax = sliding_window_view(h, fx, axis=1).max(axis=-1)  # (ny, Nx)
    i0 = np.arange(Nx)[None, :]
    j0 = np.arange(Ny)[:, None]
    qx, qy = max(1, fx // 4), max(1, fy // 4)

    for v, sel in _levels(zb, tol):
        s = h >= v - tol
        cnt[sel] = _window_sum(s, fy, fx)[sel]
        pc = sliding_window_view(s, fy, axis=0).any(axis=-1)  # (Ny, nx) column touches support
        pr = sliding_window_view(s, fx, axis=1).any(axis=-1)  # (ny, Nx) row touches support
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
    return _Shape(
        fx, fy, fx * cell, fy * cell, zb, cnt, cmin, cmax, rmin, rmax, collision, unobserved, terms
    )


def score_candidates(
    spec: PackageSpec,
    heightmap: HeightMap,
    params: HeuristicParams,
    *,
    pallet_mass: float = 0.0,
    pallet_cog: Sequence[float] = (0.0, 0.0, 0.0),
    geometry: PalletGeometry | None = None,
    reach: ReachOracle | None = None,
) -> Candidates:
    """Enumerate, filter and score every window position of every yaw for one carton.

    pallet_mass [kg] and pallet_cog (3,) [m, pallet frame] describe the stack for pallet_com.
    reach: when the reachability weight is > 0, every otherwise-valid window asks the oracle
    (filter and term); with weight 0 the filter is left to the caller (reach_state, see
    Candidates) and the term reads 1.
    """
    geo = geometry or PalletGeometry()
    h, obs, cell = _pool(heightmap, params.cell)
    ny, nx = h.shape
    ox, oy = heightmap.origin
    L, W, H = spec.dims_m
    off = np.asarray(spec.cog_offset_m[:2])
    yaws = list(params.yaws)
    if np.hypot(*off) > 1e-9:
        # An off-centre CoG makes the half turn a different placement: the weight moves sides.
        yaws = sorted({*yaws, *((y + 180.0) % 360.0 for y in yaws)})
    weights = np.array([params.weights[t] for t in TERMS])
    wsum = float(np.abs(weights).sum())
    # The reach oracle is the expensive part. When reachability is scored every valid window
    # needs it; otherwise it is only a filter, asked lazily in rank order by the caller.
    eager_reach = reach is not None and params.weights['reachability'] > 0.0
    shapes: dict[tuple[int, int], _Shape | None] = {}
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ('score', 'zb', 'x', 'y', 'yaw', 'i0', 'j0', 'support', 'terms')
    }
    reasons = {r: 0 for r in REJECT_REASONS}
    n_total = 0
    for yaw_deg in yaws:
        quarter = round(yaw_deg / 90.0) % 2
        ex, ey = (W, L) if quarter else (L, W)
        # Whole cells that contain the box (the reference rounded, which let a 0.352 m box
        # stick 1 mm past the rim and into its neighbours' clearance).
        fx, fy = max(1, math.ceil(ex / cell - 1e-6)), max(1, math.ceil(ey / cell - 1e-6))
        if (fx, fy) not in shapes:
            ok = fx <= nx and fy <= ny
            shapes[(fx, fy)] = (
                _shape_terms(h, obs, cell, fx, fy, H, min(L, W), params, geo.deck_z)
                if ok
                else None
            )
        sh = shapes[(fx, fy)]
        if sh is None:
            continue
        yaw = math.radians(yaw_deg)
        c, s = math.cos(yaw), math.sin(yaw)
        cog_x = c * off[0] - s * off[1]
        cog_y = s * off[0] + c * off[1]
        Ny, Nx = sh.zb.shape
        n_total += Ny * Nx
        i0 = np.broadcast_to(np.arange(Nx)[None, :], (Ny, Nx))
        j0 = np.broadcast_to(np.arange(Ny)[:, None], (Ny, Nx))
        cx = ox + (i0 + fx / 2.0) * cell
        cy = oy + (j0 + fy / 2.0) * cell

        # CoG relative to the window corner [m] and its cell.
        px, py = fx * cell / 2.0 + cog_x, fy * cell / 2.0 + cog_y
        ci, cj = math.floor(px / cell), math.floor(py / cell)
        if 0 <= ci < fx and 0 <= cj < fy:
            cog_seen = obs[cj : cj + Ny, ci : ci + Nx]
            com_ok = (
                cog_seen
                & (sh.cnt > 0)
                & (sh.cmin <= ci)
                & (ci <= sh.cmax)
                & (sh.rmin <= cj)
                & (cj <= sh.rmax)
            )
        else:
            com_ok = np.zeros((Ny, Nx), dtype=bool)
        half_diag = 0.5 * math.hypot(ex, ey)
        edge = np.minimum.reduce(
            [
                px - sh.cmin * cell,
                (sh.cmax + 1) * cell - px,
                py - sh.rmin * cell,
                (sh.rmax + 1) * cell - py,
            ]
        )
        com_margin = np.where(com_ok, np.clip(edge / half_diag, 0.0, 1.0), 0.0)

        reason = np.full((Ny, Nx), -1)
        reason[sh.cnt / (fx * fy) < params.min_support_ratio - 1e-12] = 5
        reason[sh.zb + H > params.max_stack_height + 1e-12] = 4
        reach_term = np.ones((Ny, Nx))
        if reach is not None and eager_reach:
            need = ~sh.collision & com_ok & (params.allow_unobserved | ~sh.unobserved)
            reachable, reach_term = _reach(reach, cx, cy, sh.zb, H, yaw, need, params, geo)
            reason[need & ~reachable] = 3
        reason[~com_ok] = 2
        if not params.allow_unobserved:
            reason[sh.unobserved] = 1
        reason[sh.collision] = 0
        for k, name in enumerate(REJECT_REASONS):
            reasons[name] += int(np.count_nonzero(reason == k))
        valid = reason < 0
        if not valid.any():
            continue

        # New stack CoG in the pallet frame -> pallet_com.
        bx = cx[valid] - geo.centre_xy[0] + cog_x
        by = cy[valid] - geo.centre_xy[1] + cog_y
        m = spec.mass_kg
        tot = pallet_mass + m
        if tot > 0.0:
            gx = (pallet_mass * pallet_cog[0] + m * bx) / tot
            gy = (pallet_mass * pallet_cog[1] + m * by) / tot
        else:
            gx, gy = bx, by
        pallet_com = np.clip(1.0 - np.hypot(gx, gy) / geo.half_diagonal, 0.0, 1.0)

        k = int(valid.sum())
        tmat = np.empty((k, len(TERMS)))
        for name, arr in sh.terms.items():
            tmat[:, _T[name]] = arr[valid]
        tmat[:, _T['com_margin']] = com_margin[valid]
        tmat[:, _T['pallet_com']] = pallet_com
        tmat[:, _T['reachability']] = reach_term[valid]
        cols['score'].append(tmat @ weights / wsum)
        cols['zb'].append(sh.zb[valid])
        cols['x'].append(cx[valid])
        cols['y'].append(cy[valid])
        cols['yaw'].append(np.full(k, yaw))
        cols['i0'].append(i0[valid])
        cols['j0'].append(j0[valid])
        cols['support'].append(sh.cnt[valid] / (fx * fy))
        cols['terms'].append(tmat)

    summary = {r: n for r, n in reasons.items() if n > 0}
    lazy = reach is not None and not eager_reach
    if not cols['score']:
        empty = np.zeros(0)
        return Candidates(
            empty, empty, empty, empty, empty, empty.astype(int), empty.astype(int), empty,
            np.zeros((0, len(TERMS))), summary, n_total,
        )  # fmt: skip
    a = {k: np.concatenate(v) for k, v in cols.items()}
    q = np.floor(a['score'] / params.tie_eps + 0.5)
    order = np.lexsort((a['yaw'], a['x'], a['y'], a['zb'], -q))
    return Candidates(
        a['score'][order],
        a['zb'][order],
        a['x'][order],
        a['y'][order],
        a['yaw'][order],
        a['i0'][order].astype(int),
        a['j0'][order].astype(int),
        a['support'][order],
        a['terms'][order],
        summary,
        n_total,
        np.zeros(len(order), dtype=np.int8) if lazy else None,
    )


def _reach(
    reach: ReachOracle,
    cx: np.ndarray,
    cy: np.ndarray,
    zb: np.ndarray,
    height: float,
    yaw: float,
    need: np.ndarray,
    p: HeuristicParams,
    geo: PalletGeometry,
) -> tuple[np.ndarray, np.ndarray]:
    """(reachable, reachability term) for the windows in `need`; others reachable, term 1.

    Reachable: the release pose (and the approach pose, see _reachable). The term is the
    fraction of four release poses shifted by reach_probe along +-X and +-Y that are reachable:
    a slot deep inside the workspace keeps its neighbours reachable too.
    """
    reachable = np.ones(need.shape, dtype=bool)
    term = np.ones(need.shape)
    if not need.any():
        return reachable, term
    x, y = cx[need], cy[need]
    z = geo.deck_z + zb[need] + height + p.cup_gap + p.drop_clearance
    n = len(x)
    d = p.reach_probe
    # One oracle call: release poses, the four probes, then the approach poses if asked for.
    xs = [x, x + d, x - d, x, x]
    ys = [y, y, y, y + d, y - d]
    zs = [z] * 5
    if p.approach_height > 0.0:
        xs, ys, zs = [*xs, x], [*ys, y], [*zs, z + p.approach_height]
    m = len(xs)
    ok = reach.reachable(
        np.concatenate(xs), np.concatenate(ys), np.concatenate(zs), np.full(m * n, yaw)
    )
    ok = np.asarray(ok, dtype=bool).reshape(m, n)
    reachable[need] = ok[0] & ok[5] if m > 5 else ok[0]
    term[need] = ok[1:5].mean(axis=0)
    return reachable, term


def _reachable(
    reach: ReachOracle,
    x: np.ndarray,
    y: np.ndarray,
    z_tcp: np.ndarray,
    yaw: np.ndarray,
    p: HeuristicParams,
) -> np.ndarray:
    """The release pose, and the pose approach_height above it when that is > 0."""
    if p.approach_height <= 0.0:
        return np.asarray(reach.reachable(x, y, z_tcp, yaw), dtype=bool)
    n = len(x)
    ok = reach.reachable(
        np.concatenate([x, x]),
        np.concatenate([y, y]),
        np.concatenate([z_tcp, z_tcp + p.approach_height]),
        np.concatenate([yaw, yaw]),
    )
    ok = np.asarray(ok, dtype=bool)
    return ok[:n] & ok[n:]


class ScorePlanner:
    """The score heuristic as a Planner (docs/planners.md §6.2-6.5).

    Reads only the height map, the carton spec and measured placements, so it is not an oracle.
    With a reach oracle and a zero reachability weight, reach is asked lazily in rank order
    (the oracle is the expensive part): out_of_reach then counts the unreachable candidates
    examined, and candidates already failing a lower-precedence filter are not asked.
    The last scored candidate set is cached by (spec, map bytes, pallet state, recorded stack):
    a replan that only adds excluded slots walks further down the same ranking.
    `enumerations` counts full enumerations (for tests and benchmarks).
    """

    kind = PlannerKind.heuristic
    oracle = False

    def __init__(
        self,
        params: HeuristicParams | None = None,
        *,
        reach: ReachOracle | None = None,
        pallet: PalletGeometry | None = None,
    ) -> None:
        self.params = params or HeuristicParams()
        self.reach = reach
        self.pallet = pallet or PalletGeometry()
        self.book = LayerBook(self.pallet)
        self.enumerations = 0
        self._cache_key: tuple[object, ...] | None = None
        self._cache: Candidates | None = None

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None:
        """The heuristic has no lookahead; the forecast is ignored."""

    def record(self, placement: Placement) -> None:
        self.book.record(placement)

    def candidates(
        self, spec: PackageSpec, heightmap: HeightMap, pallet: PalletState | None
    ) -> Candidates:
        """The ranked valid candidates (cached, see the class docstring)."""
        key = (spec, heightmap.key(), pallet, self.book.version)
        if key != self._cache_key or self._cache is None:
            self._cache = self._score(spec, heightmap, pallet)
            self._cache_key = key
            self.enumerations += 1
        return self._cache

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
    ) -> PlanResult:
        self.book.remember(spec)
        cands = self.candidates(spec, heightmap, pallet)
        excluded = set(excluded_slots)
        near = _near_excluded(excluded, self.params.exclude_radius)
        n_excluded = 0
        unstable = 0
        chunk = 32
        tries = self.params.reserve_tries
        room: _Rooms | None = None  # the reserve box's slots on the map now
        best: PlacementPlan | None = None  # the best valid slot, if none tried keeps room
        crowded = 0
        for k in range(len(cands.score)):
            layer = self.book.layer(float(cands.z_base[k]))
            slot = f'score-L{layer}-{cands.i0[k]}x{cands.j0[k]}'
            if slot in excluded or (near and near(layer, int(cands.i0[k]), int(cands.j0[k]))):
                n_excluded += 1
                continue
            state = cands.reach_state
            if state is not None:
                if state[k] == 0:
                    self._ask_reach(spec, cands, k, chunk)
                    chunk = min(4 * chunk, 4096)  # the best is usually reachable: start small
                if state[k] < 0:
                    continue
            crowds = False  # the slot takes the reserve box's last room
            if tries > 0:
                if room is None:
                    room = self._reserve_rooms(heightmap, pallet)
                crowds = len(room.x) > 0 and not room.left_by(
                    float(cands.x[k]), float(cands.y[k]), float(cands.yaw[k]), spec.dims_m
                )
            if crowds and best is not None:
                crowded += 1
                if crowded >= tries:
                    break
                continue
            zc = self.pallet.deck_z + float(cands.z_base[k]) + spec.dims_m[2] / 2.0
            if self.params.stack_check and not self._stable(spec, cands, k, layer, zc):
                unstable += 1
                continue
            plan = PlacementPlan(
                position=(float(cands.x[k]), float(cands.y[k]), zc),
                yaw=float(cands.yaw[k]),
                layer=layer,
                slot=slot,
                score=float(cands.score[k]),
                predicted_support=float(min(1.0, cands.support[k])),
                breakdown={t: float(cands.terms[k, i]) for i, t in enumerate(TERMS)},
            )
            if crowds:
                best = plan
                crowded += 1
                if crowded >= tries:
                    break
                continue
            return PlanResult(plan, self._summary(cands))
        if best is not None:
            return PlanResult(best, self._summary(cands))
        summary = self._summary(cands)
        if n_excluded:
            summary['excluded'] = n_excluded
        if unstable:
            summary['unstable_stack'] = unstable
        return PlanResult(None, summary)

    def _score(
        self, spec: PackageSpec, heightmap: HeightMap, pallet: PalletState | None
    ) -> Candidates:
        mass, cog = (pallet.mass_kg, pallet.cog) if pallet is not None else self.book.state()
        return score_candidates(
            spec,
            heightmap,
            self.params,
            pallet_mass=mass,
            pallet_cog=cog,
            geometry=self.pallet,
            reach=self.reach,
        )

    def _room_for_reserve(self, heightmap: HeightMap, pallet: PalletState | None) -> bool:
        """Whether the map has a valid, reachable slot for a box of the reserve's size."""
        return len(self._reserve_rooms(heightmap, pallet).x) > 0

    def _reserve_rooms(self, heightmap: HeightMap, pallet: PalletState | None) -> _Rooms:
        """Every valid, reachable slot for a box of the reserve's size on the map."""
        L, W, H = self.params.reserve
        spec = PackageSpec('reserve', 'reserve', (L, W, H), 1.0)
        cands = self._score(spec, heightmap, pallet)
        ok = np.ones(len(cands.score), dtype=bool)
        if cands.reach_state is not None and len(ok):
            self._ask_reach(spec, cands, 0, len(ok))
            ok = cands.reach_state > 0
        c, s = np.abs(np.cos(cands.yaw[ok])), np.abs(np.sin(cands.yaw[ok]))
        # A box placed later must keep clear of the window and its ring; one cell more covers
        # the rasterised footprint.
        margin = self.params.clearance + heightmap.cell_size
        return _Rooms(
            cands.x[ok],
            cands.y[ok],
            (L * c + W * s) / 2.0 + margin,
            (L * s + W * c) / 2.0 + margin,
        )

    def _stable(self, spec: PackageSpec, cands: Candidates, k: int, layer: int, zc: float) -> bool:
        """Whether the stack as believed, plus `spec` at candidate k, stands quasi-statically:
        every box's load resultant inside its contact hull (min margin 0; support, overlaps and
        heights are the candidate filters' business)."""
        if not self.book.placements:
            return True
        pose = world_to_pallet(
            (float(cands.x[k]), float(cands.y[k]), zc, float(cands.yaw[k])), self.pallet
        )
        new = measure_placement(
            len(self.book.placements),
            spec,
            layer,
            pose,
            pose,
            self.book.placements,
            pallet=self.pallet,
        )
        stack = stack_from_placements([*self.book.placements, new], self.book.specs)
        stack = _seat(stack, self.params.support_tol + _CONTACT_TOL)
        check = validate_stack(stack, min_support=0.0, min_margin=0.0, check_overlaps=False)
        return check.ok or check.reason != 'margin'

    def _ask_reach(self, spec: PackageSpec, cands: Candidates, k: int, n: int) -> None:
        """Ask the oracle about up to n not-yet-asked candidates from rank k on."""
        state = cands.reach_state
        assert state is not None and self.reach is not None
        todo = np.flatnonzero(state[k:] == 0)[:n] + k
        z = self.pallet.deck_z + cands.z_base[todo] + spec.dims_m[2]
        z = z + self.params.cup_gap + self.params.drop_clearance
        ok = _reachable(self.reach, cands.x[todo], cands.y[todo], z, cands.yaw[todo], self.params)
        state[todo] = np.where(ok, 1, -1)

    @staticmethod
    def _summary(cands: Candidates) -> dict[str, int]:
        summary = dict(cands.reject_summary)
        if cands.reach_state is not None:
            unreachable = int(np.count_nonzero(cands.reach_state < 0))
            if unreachable:
                summary['out_of_reach'] = summary.get('out_of_reach', 0) + unreachable
        return summary


def _near_excluded(
    excluded: Collection[str], radius: int
) -> Callable[[int, int, int], bool] | None:
    """(layer, i0, j0) -> whether a window lies within `radius` cells (both ways) of an
    excluded slot of its layer (names score-L<layer>-<i0>x<j0>); None when there is none."""
    if radius <= 0:
        return None
    spots: dict[int, list[tuple[int, int]]] = {}
    for name in excluded:
        m = _SLOT.fullmatch(name)
        if m:
            spots.setdefault(int(m[1]), []).append((int(m[2]), int(m[3])))
    if not spots:
        return None

    def near(layer: int, i0: int, j0: int) -> bool:
        return any(
            abs(i0 - i) <= radius and abs(j0 - j) <= radius for i, j in spots.get(layer, ())
        )

    return near


_SLOT = re.compile(r'score-L(\d+)-(\d+)x(\d+)')


@dataclass(frozen=True)
class _Rooms:
    """The reserve box's slots: centres x, y [world, m] and the half extents hx, hy [m] of the
    region a later box must keep out of for the slot to stay valid (window, ring, a cell)."""

    x: np.ndarray
    y: np.ndarray
    hx: np.ndarray
    hy: np.ndarray

    def left_by(self, x: float, y: float, yaw: float, dims: tuple[float, float, float]) -> bool:
        """Whether a slot stays free of a box of `dims` centred at (x, y) [world, m], turned
        by yaw [rad]. A slot the new box creates on its own lid is not counted (conservative)."""
        L, W, _ = dims
        c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
        ex, ey = (L * c + W * s) / 2.0, (L * s + W * c) / 2.0
        hit = (np.abs(self.x - x) < self.hx + ex) & (np.abs(self.y - y) < self.hy + ey)
        return not bool(hit.all())


# [m] stability's own contact tolerance (core.stability.validate_stack's default).
_CONTACT_TOL = 0.004


def _stamped(
    heightmap: HeightMap, plan: PlacementPlan, spec: PackageSpec, deck_z: float
) -> HeightMap:
    """The map with the cells whose centre lies under the planned box raised to its top
    (deck_z: the deck's world height [m])."""
    cells = np.array(heightmap.cells, dtype=float, copy=True)
    cs = heightmap.cell_size
    ox, oy = heightmap.origin
    L, W, H = spec.dims_m
    c, s = abs(math.cos(plan.yaw)), abs(math.sin(plan.yaw))
    ex, ey = L * c + W * s, L * s + W * c
    x, y, z = plan.position
    ny, nx = cells.shape
    i0 = max(0, math.ceil((x - ex / 2 - ox) / cs - 0.5 - 1e-9))
    i1 = min(nx, math.floor((x + ex / 2 - ox) / cs - 0.5 + 1e-9) + 1)
    j0 = max(0, math.ceil((y - ey / 2 - oy) / cs - 0.5 - 1e-9))
    j1 = min(ny, math.floor((y + ey / 2 - oy) / cs - 0.5 + 1e-9) + 1)
    top = z + H / 2 - deck_z
    cells[j0:j1, i0:i1] = np.maximum(cells[j0:j1, i0:i1], top)
    return HeightMap(cells, heightmap.observed, heightmap.origin, cs)


def _seat(boxes: Sequence[StackBox], tol: float) -> list[StackBox]:
    """The boxes with each base moved onto the highest top under it (another box's, or the
    deck) when it lies within `tol` above or below it: bases planned on the camera map carry
    its error (a few mm), which would leave a believed box floating or sunk."""
    out: list[StackBox] = []
    for b in sorted(boxes, key=lambda b: b.z):
        tops = [0.0] + [
            o.top
            for o in out
            if abs(o.x - b.x) < (o.ex + b.ex) / 2
            and abs(o.y - b.y) < (o.ey + b.ey) / 2
            and o.top <= b.z + tol
        ]
        top = max(tops)
        out.append(dataclasses.replace(b, z=top) if abs(b.z - top) <= tol else b)
    return out
