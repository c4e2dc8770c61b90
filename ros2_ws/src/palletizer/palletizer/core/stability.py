"""Support polygons, stability margin, overhang, placement error and quasi-static stack checks."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import Placement

__all__ = [
    'TRANSPORT_ACCEL_G',
    'StackBox',
    'StackCheck',
    'box_corners',
    'collapsed',
    'convex_hull',
    'envelope',
    'overhang',
    'placement_error',
    'rect_overlap',
    'stability_margin',
    'support_hull',
    'support_polygon',
    'support_ratio',
    'validate_stack',
    'yaw_error',
]

# Lateral acceleration, in g, the stack must withstand in transport (Platform SDK pallet.py,
# cell-facts §7.3): a CoG at height h tips under a/g once a/g > d/h, so the margin left is
# d - 0.28 h. 0.28 g sits between a forklift bump (0.30) and gentle vehicle acceleration (0.15).
TRANSPORT_ACCEL_G = 0.28

# A rect is (x0, x1, y0, y1) [m]; a base box is (x, y, dx, dy[, yaw]) [m, rad].
Rect = tuple[float, float, float, float]


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Convex hull by Andrew's monotone chain.

    points: (N, 2) [m]. Returns (M, 2) hull vertices counter-clockwise, without collinear points
    and without repeating the first vertex; fewer than 3 rows when the points are degenerate.
    """
    pts = np.unique(np.asarray(points, dtype=float).reshape(-1, 2), axis=0)
    if len(pts) < 3:
        return pts

    def cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
        return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))

    lower: list[np.ndarray] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0.0:
            lower.pop()
        lower.append(p)
    upper: list[np.ndarray] = []
    for p in pts[::-1]:
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0.0:
            upper.pop()
        upper.append(p)
    return np.array(lower[:-1] + upper[:-1])


def box_corners(x: float, y: float, dx: float, dy: float, yaw: float = 0.0) -> np.ndarray:
    """The 4 corners (4, 2) [m] of a dx x dy rectangle centred at (x, y), rotated by yaw [rad]."""
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([[-dx, -dy], [dx, -dy], [dx, dy], [-dx, dy]]) / 2.0
    return local @ np.array([[c, s], [-s, c]]) + np.array([x, y])


def _base_points(base: Iterable[Sequence[float]]) -> np.ndarray:
    pts = [box_corners(*b[:4], b[4] if len(b) > 4 else 0.0) for b in base]
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def support_hull(base: Iterable[Sequence[float]]) -> np.ndarray:
    """Convex hull (M, 2) [m] of the corners of the base boxes (x, y, dx, dy[, yaw])."""
    return convex_hull(_base_points(base))


def support_polygon(base: Iterable[Sequence[float]]) -> Rect | None:
    """Axis-aligned bounds (x0, x1, y0, y1) [m] of the base corners; None for an empty base.

    Used for framing and overhang, not for the margin (which uses the hull).
    """
    pts = _base_points(base)
    if len(pts) == 0:
        return None
    return (
        float(pts[:, 0].min()),
        float(pts[:, 0].max()),
        float(pts[:, 1].min()),
        float(pts[:, 1].max()),
    )


def _hull_distance(hull: np.ndarray, x: float, y: float) -> float:
    """Signed distance [m] from (x, y) to the nearest edge line of a CCW hull; > 0 inside."""
    a = hull
    b = np.roll(hull, -1, axis=0)
    edge = b - a
    length = np.hypot(edge[:, 0], edge[:, 1])
    cross = edge[:, 0] * (y - a[:, 1]) - edge[:, 1] * (x - a[:, 0])
    return float(np.min(cross / length))


def stability_margin(
    cog_x: float, cog_y: float, cog_z: float, base: Iterable[Sequence[float]]
) -> float:
    """Tipping margin [m] under a 0.28 g lateral push (cell-facts §7.3).

    Signed distance of the CoG's XY projection to the nearest edge of the convex hull of the base
    boxes' corners (positive inside) minus TRANSPORT_ACCEL_G x cog_z. cog_z is the CoG height
    above the support plane [m]. An empty base or a degenerate hull gives 0.
    """
    hull = support_hull(base)
    if len(hull) < 3:
        return 0.0
    return _hull_distance(hull, cog_x, cog_y) - TRANSPORT_ACCEL_G * cog_z


def envelope(dims_xy: Sequence[float], yaw: float) -> tuple[float, float]:
    """Axis-aligned envelope (ex, ey) [m] of an L x W footprint rotated by yaw [rad]."""
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    length, width = float(dims_xy[0]), float(dims_xy[1])
    return (length * c + width * s, length * s + width * c)


def _rect(x: float, y: float, ex: float, ey: float) -> Rect:
    return (x - ex / 2.0, x + ex / 2.0, y - ey / 2.0, y + ey / 2.0)


def rect_overlap(a: Rect, b: Rect) -> float:
    """Overlap area [m^2] of two axis-aligned rects (x0, x1, y0, y1)."""
    w = min(a[1], b[1]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[2], b[2])
    return max(w, 0.0) * max(h, 0.0)


def support_ratio(footprint: Rect, supporters: Iterable[Rect]) -> float:
    """Summed overlap of the supporters with the footprint over its area, capped at 1."""
    area = (footprint[1] - footprint[0]) * (footprint[3] - footprint[2])
    if area <= 0.0:
        return 0.0
    return min(1.0, sum(rect_overlap(footprint, r) for r in supporters) / area)


def overhang(footprint: Rect, deck: Rect) -> float:
    """Largest protrusion [m] of a footprint rect beyond the deck rect (0 when inside)."""
    return max(
        0.0,
        deck[0] - footprint[0],
        footprint[1] - deck[1],
        deck[2] - footprint[2],
        footprint[3] - deck[3],
    )


def yaw_error(planned: float, actual: float, square: bool = False) -> float:
    """|actual - planned| [rad] wrapped with period pi (pi/2 for a square footprint).

    A box footprint looks the same after half a turn (a square one after a quarter turn).
    """
    period = math.pi / 2.0 if square else math.pi
    d = (actual - planned) % period
    return float(min(d, period - d))


def placement_error(
    planned_pose: Sequence[float], actual_pose: Sequence[float], dims_m: Sequence[float]
) -> tuple[float, float]:
    """(error_xy [m], error_yaw [rad]) between two (x, y, z, yaw) poses of one carton."""
    exy = math.hypot(actual_pose[0] - planned_pose[0], actual_pose[1] - planned_pose[1])
    square = abs(float(dims_m[0]) - float(dims_m[1])) <= 1e-6
    return exy, yaw_error(planned_pose[3], actual_pose[3], square)


def collapsed(previous: Iterable[Placement], current: Iterable[Placement]) -> list[str]:
    """Ids of cartons that were `placed` in the previous measurement and are not now."""
    now = {p.package_id: p.placed for p in current}
    return [p.package_id for p in previous if p.placed and not now.get(p.package_id, False)]


# ---------------------------------------------------------------------------------------------
# Quasi-static whole-stack check (cell-facts §6.7 validate_stack).


@dataclass(frozen=True)
class StackBox:
    """An axis-aligned box on the pallet for the quasi-static check (PALLET frame).

    x, y: footprint centre from the pallet centre [m]; z: bottom above the deck [m];
    ex, ey: axis-aligned footprint size [m]; h: height [m]; mass_kg [kg];
    cog: (3,) centre of mass in the pallet frame [m].
    """

    x: float
    y: float
    z: float
    ex: float
    ey: float
    h: float
    mass_kg: float
    cog: tuple[float, float, float]

    @property
    def top(self) -> float:
        return self.z + self.h

    @property
    def rect(self) -> Rect:
        return _rect(self.x, self.y, self.ex, self.ey)


@dataclass(frozen=True)
class StackCheck:
    """Result of validate_stack: ok, the first reason it is not, and per-box numbers.

    support: (N,) interface support ratio; margin: (N,) tipping margin of the load resultant
    over the contact hull [m]; both in the input order.
    """

    ok: bool
    reason: str
    support: np.ndarray
    margin: np.ndarray


def validate_stack(
    boxes: Sequence[StackBox],
    pallet_size: tuple[float, float] = (1.20, 0.80),
    *,
    min_support: float = 0.62,
    min_margin: float = 0.008,
    max_mass_kg: float = 350.0,
    max_height_m: float = 1.35,
    contact_tol: float = 0.004,
    overlap_tol: float = 0.003,
    check_overlaps: bool = True,
) -> StackCheck:
    """Quasi-static check of a whole stack (cell-facts §6.7).

    Boxes are processed top-down; each one rests on the boxes whose top is within contact_tol of
    its bottom (or on the deck); its support ratio is the contact area over its footprint; the
    load resultant (own weight at its CoG plus loads passed down from above) must lie at least
    min_margin [m] inside the convex hull of the contact patches; the load then passes to the
    supporters in proportion to contact area, applied at each contact's centroid.
    check_overlaps=False skips the O(N^2) pairwise overlap test when the caller guarantees it.
    """
    n = len(boxes)
    support = np.ones(n)
    margin = np.full(n, np.inf)

    def fail(reason: str) -> StackCheck:
        return StackCheck(False, reason, support, margin)

    if sum(b.mass_kg for b in boxes) > max_mass_kg:
        return fail('mass')
    hx, hy = pallet_size[0] / 2.0, pallet_size[1] / 2.0
    for b in boxes:
        r = b.rect
        if r[0] < -hx - 1e-9 or r[1] > hx + 1e-9 or r[2] < -hy - 1e-9 or r[3] > hy + 1e-9:
            return fail('bounds')
        if b.top > max_height_m + 1e-9:
            return fail('height')
    for i in range(n if check_overlaps else 0):
        for j in range(i + 1, n):
            a, b = boxes[i], boxes[j]
            vz = min(a.top, b.top) - max(a.z, b.z)
            if vz > overlap_tol and rect_overlap(a.rect, b.rect) > overlap_tol * overlap_tol:
                return fail('overlap')
    # Loads [kg, moment x, moment y] accumulated from above, per box.
    load = np.zeros((n, 3))
    for i in sorted(range(n), key=lambda k: -boxes[k].z):
        b = boxes[i]
        m = b.mass_kg + load[i, 0]
        if m <= 0.0:
            continue
        rx = (b.mass_kg * b.cog[0] + load[i, 1]) / m
        ry = (b.mass_kg * b.cog[1] + load[i, 2]) / m
        patches: list[tuple[int, Rect]] = []
        if b.z <= contact_tol:
            patches.append((-1, b.rect))
        else:
            for j, s in enumerate(boxes):
                if j != i and abs(s.top - b.z) <= contact_tol:
                    o = _intersect(b.rect, s.rect)
                    if o is not None:
                        patches.append((j, o))
        area = b.ex * b.ey
        contact = sum((r[1] - r[0]) * (r[3] - r[2]) for _, r in patches)
        support[i] = min(1.0, contact / area) if area > 0 else 0.0
        if support[i] < min_support - 1e-9:
            return fail('support')
        hull = support_hull(
            [
                (0.5 * (r[0] + r[1]), 0.5 * (r[2] + r[3]), r[1] - r[0], r[3] - r[2])
                for _, r in patches
            ]
        )
        margin[i] = _hull_distance(hull, rx, ry) if len(hull) >= 3 else -np.inf
        if margin[i] < min_margin - 1e-12:
            return fail('margin')
        for j, r in patches:
            if j < 0:
                continue
            share = m * (r[1] - r[0]) * (r[3] - r[2]) / contact
            load[j] += (share, share * 0.5 * (r[0] + r[1]), share * 0.5 * (r[2] + r[3]))
    return StackCheck(True, '', support, margin)


def _intersect(a: Rect, b: Rect) -> Rect | None:
    r = (max(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), min(a[3], b[3]))
    return r if r[1] - r[0] > 1e-9 and r[3] - r[2] > 1e-9 else None
