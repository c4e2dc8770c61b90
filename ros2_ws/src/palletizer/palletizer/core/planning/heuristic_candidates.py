"""Score heuristic, candidates: every window of every yaw filtered, scored and ranked.

Candidates (the ranked valid windows of one carton) and score_candidates, which applies the
hard filters (RejectReason, in precedence order) and the 14 score terms; the eager reach check
when reachability is scored. Rules and values: docs/planners.md §6.2-6.4.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import HeightMap, PackageSpec, PalletGeometry
from palletizer.core.params.planning import TERMS, HeuristicParams
from palletizer.core.planning.heuristic_rejects import NOT_REJECTED, RejectReason
from palletizer.core.planning.heuristic_windows import Shape, despeckle, pool, shape_terms
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.tool import GripperGeometry, tcp_shifts, tool_half_extents

__all__ = [
    'REACH_NOT_ASKED',
    'REACHABLE',
    'UNREACHABLE',
    'Candidates',
    'score_candidates',
]

# Candidates.reach_state, when reach is asked lazily: reachable, not, not asked yet.
REACHABLE = 1
UNREACHABLE = -1
REACH_NOT_ASKED = 0

_T = {name: k for k, name in enumerate(TERMS)}


@dataclass(frozen=True)
class Candidates:
    """Every valid candidate of one carton, best first (tie-break already applied).

    Arrays are (K,): score, z_base [m above deck], x, y [world, m], yaw [rad], i0, j0 (window
    corner cells along X and Y), support; terms is (K, 14) in TERMS order.
    reject_summary counts the invalid candidates per reason (RejectReason names, in precedence
    order, only those > 0); n_total counts all of them.
    reach_state (K,) int8, only when reach is checked lazily: REACHABLE, UNREACHABLE or
    REACH_NOT_ASKED (ScorePlanner asks the oracle in rank order and fills it in).
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


def score_candidates(
    spec: PackageSpec,
    heightmap: HeightMap,
    params: HeuristicParams,
    *,
    pallet_mass: float = 0.0,
    pallet_cog: Sequence[float] = (0.0, 0.0, 0.0),
    geometry: PalletGeometry | None = None,
    reach: ReachOracle | None = None,
    tool: GripperGeometry | None = None,
) -> Candidates:
    """Enumerate, filter and score every window position of every yaw for one carton.

    pallet_mass [kg] and pallet_cog (3,) [m, pallet frame] describe the stack for pallet_com
    (with no mass on the pallet the term reads 1).
    reach: when the reachability weight is > 0, every otherwise-valid window asks the oracle
    (filter and term); with weight 0 the filter is left to the caller (reach_state, see
    Candidates) and the term reads 1. tool: the gripper whose body must clear what stands
    beyond the carton at release (core.planning.tool; None: not checked).
    """
    geo = geometry or PalletGeometry()
    h, obs, cell = pool(heightmap, params.cell)
    h = despeckle(h, params.despeckle)
    ny, nx = h.shape
    ox, oy = heightmap.origin
    L, W, H = spec.dims_m
    off = np.asarray(spec.cog_offset_m[:2])
    yaws = list(params.yaws)
    if np.hypot(*off) > 1e-9 or spec.label_face:
        # An off-centre CoG makes the half turn a different placement: the weight moves sides;
        # so does a label read on one side: it faces the other way.
        yaws = sorted({*yaws, *((y + 180.0) % 360.0 for y in yaws)})
    weights = np.array([params.weights[t] for t in TERMS])
    wsum = float(np.abs(weights).sum())
    # The reach oracle is the expensive part. When reachability is scored every valid window
    # needs it; otherwise it is only a filter, asked lazily in rank order by the caller.
    eager_reach = reach is not None and params.weights['reachability'] > 0.0
    shapes: dict[tuple[int, int, int, int], Shape | None] = {}
    cols: dict[str, list[np.ndarray]] = {
        k: [] for k in ('score', 'zb', 'x', 'y', 'yaw', 'i0', 'j0', 'support', 'terms')
    }
    rejected = dict.fromkeys(RejectReason, 0)
    n_total = 0
    for yaw_deg in yaws:
        quarter = round(yaw_deg / 90.0) % 2
        ex, ey = (W, L) if quarter else (L, W)
        # Whole cells that contain the box (the reference rounded, which let a 0.352 m box
        # stick 1 mm past the rim and into its neighbours' clearance).
        fx, fy = max(1, math.ceil(ex / cell - 1e-6)), max(1, math.ceil(ey / cell - 1e-6))
        mx = my = 0
        if tool is not None:
            tx, ty = tool_half_extents(L, W, quarter, tool)
            mx = max(0, math.ceil((tx - fx * cell / 2) / cell - 1e-6))
            my = max(0, math.ceil((ty - fy * cell / 2) / cell - 1e-6))
        if (fx, fy, mx, my) not in shapes:
            ok = fx <= nx and fy <= ny
            shapes[(fx, fy, mx, my)] = (
                shape_terms(
                    h, obs, cell, fx, fy, H, min(L, W), params, geo.deck_z, tool_margin=(mx, my)
                )
                if ok
                else None
            )
        sh = shapes[(fx, fy, mx, my)]
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

        # The hard filters, lowest precedence first: each overwrites the reason of the windows
        # it fails, so a window failing several keeps the highest-precedence one.
        reason = np.full((Ny, Nx), NOT_REJECTED)
        support_ratio = sh.cnt / (fx * fy)
        reason[support_ratio < params.min_support_ratio - 1e-12] = RejectReason.min_support_ratio
        reason[sh.zb + H > params.max_stack_height + 1e-12] = RejectReason.max_stack_height
        reach_term = np.ones((Ny, Nx))
        if reach is not None and eager_reach:
            need = ~sh.collision & com_ok & (params.allow_unobserved | ~sh.unobserved)
            reachable, reach_term = _reach(
                reach, cx, cy, sh.zb, H, yaw, need, params, geo, (L, W, tool)
            )
            reason[need & ~reachable] = RejectReason.out_of_reach
        reason[~com_ok] = RejectReason.com_unsupported
        if not params.allow_unobserved:
            reason[sh.unobserved] = RejectReason.unobserved
        reason[sh.collision] = RejectReason.collision
        for r in RejectReason:
            rejected[r] += int(np.count_nonzero(reason == r))
        valid = reason == NOT_REJECTED
        if not valid.any():
            continue

        # New stack CoG in the pallet frame -> pallet_com. On an empty deck the stack's CoG
        # would be the carton's own: the term then reads 1 everywhere, as the first carton's
        # place decides nothing about the load's balance, and pulled to the deck's centre it
        # split the deck in two (docs/planners.md §6.4).
        bx = cx[valid] - geo.centre_xy[0] + cog_x
        by = cy[valid] - geo.centre_xy[1] + cog_y
        if pallet_mass > 0.0:
            m = spec.mass_kg
            tot = pallet_mass + m
            gx = (pallet_mass * pallet_cog[0] + m * bx) / tot
            gy = (pallet_mass * pallet_cog[1] + m * by) / tot
            pallet_com = np.clip(1.0 - np.hypot(gx, gy) / geo.half_diagonal, 0.0, 1.0)
        else:
            pallet_com = np.ones(len(bx))

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

    summary = {r.name: n for r, n in rejected.items() if n > 0}
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
        np.full(len(order), REACH_NOT_ASKED, dtype=np.int8) if lazy else None,
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
    carton: tuple[float, float, GripperGeometry | None] = (0.0, 0.0, None),
) -> tuple[np.ndarray, np.ndarray]:
    """(reachable, reachability term) for the windows in `need`; others reachable, term 1.

    Reachable: the release pose (and the approach pose, see _reachable), where the TCP stands
    for a carton (length, width, gripper) gripped off-centre (tool.tcp_shifts). The term is the
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
    length, width, gripper = carton
    shifts = tcp_shifts(length, width, np.full(n, yaw), gripper)
    if len(shifts) > 1:
        heights = [z] if p.approach_height <= 0.0 else [z, z + p.approach_height]
        sx = [x + dx for dx, _ in shifts for _ in heights]
        sy = [y + dy for _, dy in shifts for _ in heights]
        sz = [h for _ in shifts for h in heights]
        at = reach.reachable(
            np.concatenate(sx), np.concatenate(sy), np.concatenate(sz), np.full(len(sx) * n, yaw)
        )
        reachable[need] &= np.asarray(at, dtype=bool).reshape(len(sx), n).all(axis=0)
    return reachable, term
