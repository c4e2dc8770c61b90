"""Collision kernels: the height field's maximum under a footprint, the swept carton and
tool against the height field and boxes, and the arm's wrist and forearm capsules against the
mount and static boxes."""

from __future__ import annotations

import math

import numpy as np

from palletizer.core.motion._kernels._jit import njit
from palletizer.core.motion._kernels.kinematics import _dh_into, _mul_into

__all__ = ['arm_box_hits', 'first_hit', 'max_under', 'wrists_near_mount']


@njit
def max_under(
    heights: np.ndarray,
    ox: float,
    oy: float,
    cs: float,
    cx: float,
    cy: float,
    hx: float,
    hy: float,
    yaw: float,
) -> float:
    """Highest height (above the deck) of the grid cells (ny, nx; origin ox, oy; cell cs)
    touching a rectangle (centre, half-sizes, yaw): a cell counts when its centre lies within
    the rectangle grown by half a cell diagonal. -inf when none does."""
    ny, nx = heights.shape
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    ex, ey = c * hx + s * hy, s * hx + c * hy  # AABB half-sizes of the rotated rectangle
    grow = cs * math.sqrt(0.5)
    i0 = max(0, math.floor((cx - ex - grow - ox) / cs))
    i1 = min(nx, math.ceil((cx + ex + grow - ox) / cs))
    j0 = max(0, math.floor((cy - ey - grow - oy) / cs))
    j1 = min(ny, math.ceil((cy + ey + grow - oy) / cs))
    best = -math.inf
    cyaw, syaw = math.cos(yaw), math.sin(yaw)
    for j in range(j0, j1):
        y = oy + (j + 0.5) * cs - cy
        for i in range(i0, i1):
            x = ox + (i + 0.5) * cs - cx
            if heights[j, i] > best:
                u = x * cyaw + y * syaw
                v = -x * syaw + y * cyaw
                if abs(u) <= hx + grow and abs(v) <= hy + grow:
                    best = heights[j, i]
    return best


@njit
def first_hit(
    poses: np.ndarray,
    parts: np.ndarray,
    box_lo: np.ndarray,
    box_hi: np.ndarray,
    heights: np.ndarray,
    hf_geom: np.ndarray,
    tolerance: float,
) -> tuple[int, int]:
    """The first tool-down pose (n, 4: x, y, z, yaw) whose swept parts hit an obstacle:
    (pose index, what) with what the box index, or -1 for the height field; (-1, -1) when
    none is hit. Contacts shallower than `tolerance` [m] are ignored.

    parts (P, 6): per rigid part under the tool (tool body, carried carton), its centre offset
    in the tool frame (x, y), half-sizes (x, y) and z range relative to the TCP (lo, hi).
    box_lo, box_hi (B, 3): axis-aligned obstacles. heights (ny, nx) above the deck with
    hf_geom = (origin x, origin y, cell size, deck z, use it: 1 or 0). Per pose the parts are
    tested in order, each against the boxes in order then the height field (a separating-axis
    test in the plane where their z ranges overlap).
    """
    n = poses.shape[0]
    ox, oy, cs, deck_z = hf_geom[0], hf_geom[1], hf_geom[2], hf_geom[3]
    use_hf = hf_geom[4] > 0.0
    top_z = deck_z + heights.max() if use_hf else -math.inf
    # A vertical stretch repeats one footprint: keep the last height-field answer per part.
    last_key = np.full((parts.shape[0], 3), np.nan)
    last_top = np.zeros(parts.shape[0])
    for p in range(n):
        x, y, z, yaw = poses[p, 0], poses[p, 1], poses[p, 2], poses[p, 3]
        cyaw, syaw = math.cos(yaw), math.sin(yaw)
        c, s = abs(cyaw), abs(syaw)
        for k in range(parts.shape[0]):
            pox, poy, hx, hy = parts[k, 0], parts[k, 1], parts[k, 2], parts[k, 3]
            # Tool y runs against world y: world offset = rot_z(yaw) @ (ox, -oy).
            cx = x + cyaw * pox + syaw * poy
            cy = y + syaw * pox - cyaw * poy
            z_lo, z_hi = z + parts[k, 4], z + parts[k, 5]
            ex = c * hx + s * hy
            ey = s * hx + c * hy
            for b in range(box_lo.shape[0]):
                if min(z_hi, box_hi[b, 2]) - max(z_lo, box_lo[b, 2]) <= tolerance:
                    continue
                bhx = (box_hi[b, 0] - box_lo[b, 0]) / 2
                bhy = (box_hi[b, 1] - box_lo[b, 1]) / 2
                dx = cx - (box_lo[b, 0] + box_hi[b, 0]) / 2
                dy = cy - (box_lo[b, 1] + box_hi[b, 1]) / 2
                if abs(dx) > ex + bhx or abs(dy) > ey + bhy:
                    continue
                if abs(dx * cyaw + dy * syaw) > hx + (c * bhx + s * bhy):
                    continue
                if abs(-dx * syaw + dy * cyaw) > hy + (s * bhx + c * bhy):
                    continue
                return p, b
            if use_hf and z_lo + tolerance < top_z:
                if cx == last_key[k, 0] and cy == last_key[k, 1] and yaw == last_key[k, 2]:
                    top = last_top[k]
                else:
                    top = deck_z + max_under(heights, ox, oy, cs, cx, cy, hx, hy, yaw)
                    last_key[k, 0], last_key[k, 1], last_key[k, 2] = cx, cy, yaw
                    last_top[k] = top
                if top > z_lo + tolerance:
                    return p, -1
    return -1, -1


@njit
def wrists_near_mount(
    q: np.ndarray,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
    pedestal_radius: float,
    base_radius: float,
    shoulder_height: float,
    link_radius: float,
) -> np.ndarray:
    """(n,) True where a wrist joint origin (frames 3, 4, 5 of the DH chain) of q (n, 6) lies
    below the shoulder and closer to the base axis than the base link (above z = 0) or the
    pedestal (below) allows, plus the wrist's own link radius [m]."""
    n = q.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    t = np.empty((4, 4))
    m = np.empty((4, 4))
    nxt = np.empty((4, 4))
    for p in range(n):
        _dh_into(t, q[p, 0], dh_a[0], dh_d[0], dh_alpha[0])
        for i in range(1, 5):
            _dh_into(m, q[p, i], dh_a[i], dh_d[i], dh_alpha[i])
            _mul_into(nxt, t, m)
            t[:, :] = nxt
            if i >= 2:
                z = t[2, 3]
                need = (pedestal_radius if z < 0.0 else base_radius) + link_radius
                if z < shoulder_height and math.hypot(t[0, 3], t[1, 3]) < need:
                    out[p] = True
    return out


@njit
def arm_box_hits(
    q: np.ndarray,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
    T_base_world: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    margin: float,
) -> np.ndarray:
    """(n,) index of the first box (lo, hi: (m, 3) world AABB corners [m]) that the forearm or
    a wrist link of q (n, 6) comes within `margin` [m] of; -1 where none does. The links are
    the capsules of the robot self-filter (heightmap_fusion.RobotBody.shapes, Menagerie's
    UR10e): forearm 0.058 m radius, 0.039 m out from the DH line; wrist 1 0.05 m; wrists 2
    and 3 0.046 m; each sampled along its axis every 4 cm at most. They hold the simulated
    arm's collision geoms (tests/sim/test_models.py)."""
    n = q.shape[0]
    m = lo.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    t = np.empty((4, 4))
    a = np.empty((4, 4))
    nxt = np.empty((4, 4))
    org = np.empty((7, 3))  # DH frame origins 0..6, world
    zax = np.empty((7, 3))  # their z axes, world
    seg = np.empty((4, 2, 3))
    rad = np.array((0.058, 0.05, 0.046, 0.046))
    for p in range(n):
        t[:, :] = T_base_world
        for c in range(3):
            org[0, c] = t[c, 3]
            zax[0, c] = t[c, 2]
        for i in range(6):
            _dh_into(a, q[p, i], dh_a[i], dh_d[i], dh_alpha[i])
            _mul_into(nxt, t, a)
            t[:, :] = nxt
            for c in range(3):
                org[i + 1, c] = t[c, 3]
                zax[i + 1, c] = t[c, 2]
        for c in range(3):
            ax = zax[1, c]  # joints 2-4 are parallel
            seg[0, 0, c] = org[2, c] + 0.039 * ax
            seg[0, 1, c] = org[3, c] + 0.039 * ax
            seg[1, 0, c] = org[3, c] + 0.025 * ax  # robot.py _WRIST_1_FROM
            seg[1, 1, c] = org[4, c] + 0.03 * zax[3, c]
            seg[2, 0, c] = org[4, c] - 0.056 * zax[4, c]  # robot.py _WRIST_2_BACK
            seg[2, 1, c] = org[5, c]
            seg[3, 0, c] = org[5, c] - 0.03 * zax[5, c]
            seg[3, 1, c] = org[6, c]
        for s_ in range(4):
            length = 0.0
            for c in range(3):
                length += (seg[s_, 1, c] - seg[s_, 0, c]) ** 2
            k = max(2, int(math.ceil(math.sqrt(length) / 0.04)) + 1)
            r = rad[s_] + margin
            for j in range(k):
                f = j / (k - 1)
                for b in range(m):
                    d2 = 0.0
                    for c in range(3):
                        v = seg[s_, 0, c] + f * (seg[s_, 1, c] - seg[s_, 0, c])
                        if v < lo[b, c]:
                            d2 += (lo[b, c] - v) ** 2
                        elif v > hi[b, c]:
                            d2 += (v - hi[b, c]) ** 2
                    if d2 < r * r:
                        out[p] = b
                        break
                if out[p] >= 0:
                    break
            if out[p] >= 0:
                break
    return out
