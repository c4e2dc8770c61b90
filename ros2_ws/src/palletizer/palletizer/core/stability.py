"""Support polygons, stability margin, overhang, placement error and quasi-static stack checks.

Why one file of this length: the planners' margin and the referee's checks must compute support
the same way, so the polygon arithmetic and the stack model that uses it share this module.
"""

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
    'StackModel',
    'box_corners',
    'collapsed',
    'convex_hull',
    'envelope',
    'overhang',
    'placement_error',
    'polygon_overlap',
    'rect_overlap',
    'stability_margin',
    'support_hull',
    'support_polygon',
    'support_ratio',
    'validate_stack',
    'yaw_error',
]

# Lateral acceleration, in g, the stack must withstand in transport (Platform SDK pallet.py,
# docs/measurement.md §7.3): a CoG at height h tips under a/g once a/g > d/h, so the margin left is
# d - 0.28 h. 0.28 g sits between a forklift bump (0.30) and gentle vehicle acceleration (0.15).
TRANSPORT_ACCEL_G = 0.28

# A rect is (x0, x1, y0, y1) [m]; a base box is (x, y, dx, dy[, yaw]) [m, rad].
Rect = tuple[float, float, float, float]


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Convex hull by Andrew's monotone chain.

    points: (N, 2) [m]. Returns (M, 2) hull vertices counter-clockwise, without collinear points
    and without repeating the first vertex; fewer than 3 rows when the points are degenerate.
    """
    # Python floats: the chain walks a handful of points, where numpy's per-element indexing
    # and np.unique cost more than the arithmetic (the same doubles either way).
    pts = sorted(set(map(tuple, np.asarray(points, dtype=float).reshape(-1, 2).tolist())))
    if len(pts) < 3:
        return np.array(pts, dtype=float).reshape(-1, 2)
    return np.array(_chain(pts), dtype=float)


def _chain(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The monotone chain over sorted distinct points (3 or more): the CCW hull vertices."""

    def cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower: list[tuple[float, float]] = []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0.0:
            lower.pop()
        lower.append(p)
    upper: list[tuple[float, float]] = []
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0.0:
            upper.pop()
        upper.append(p)
    return lower[:-1] + upper[:-1]


def box_corners(x: float, y: float, dx: float, dy: float, yaw: float = 0.0) -> np.ndarray:
    """The 4 corners (4, 2) [m] of a dx x dy rectangle centred at (x, y), rotated by yaw [rad]."""
    c, s = math.cos(yaw), math.sin(yaw)
    local = np.array([[-dx, -dy], [dx, -dy], [dx, dy], [-dx, dy]]) / 2.0
    return np.asarray(local @ np.array([[c, s], [-s, c]]) + np.array([x, y]))


def _base_points(base: Iterable[Sequence[float]]) -> np.ndarray:
    pts = [box_corners(b[0], b[1], b[2], b[3], b[4] if len(b) > 4 else 0.0) for b in base]
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
    b = np.concatenate((hull[1:], hull[:1]))
    edge = b - a
    length = np.hypot(edge[:, 0], edge[:, 1])
    cross = edge[:, 0] * (y - a[:, 1]) - edge[:, 1] * (x - a[:, 0])
    return float(np.min(cross / length))


# A hull as its edges (ax, ay, ex, ey, length): vertex a, edge vector e to the next vertex [m].
Edges = list[tuple[float, float, float, float, float]]


def _rect_hull(rects: Iterable[Sequence[float]]) -> Edges:
    """The edges of support_hull over the rects' _patch_box boxes, the same doubles (the corners
    as box_corners gives them at yaw 0: centre -/+ half size); [] when fewer than 3 vertices.

    The stack checks take a hull of contact patches per box and per candidate: Python floats
    here, where the numpy path paid for a dozen tiny arrays each time."""
    rects = list(rects)
    if len(rects) == 1:
        # One patch: its corners are the hull, CCW from the low corner as the chain leaves
        # them; hypot(d, 0) is |d| (C Annex F).
        x0, x1, y0, y1 = (
            float(rects[0][0]),
            float(rects[0][1]),
            float(rects[0][2]),
            float(rects[0][3]),
        )
        cx, cy = 0.5 * (x0 + x1), 0.5 * (y0 + y1)
        hx, hy = (x1 - x0) / 2.0, (y1 - y0) / 2.0
        lx, ux, ly, uy = cx - hx, cx + hx, cy - hy, cy + hy
        if lx < ux and ly < uy:
            w, h = ux - lx, uy - ly
            return [
                (lx, ly, w, 0.0, w),
                (ux, ly, 0.0, h, h),
                (ux, uy, lx - ux, 0.0, w),
                (lx, uy, 0.0, ly - uy, h),
            ]
    seen: set[tuple[float, float]] = set()
    for r in rects:
        x0, x1, y0, y1 = float(r[0]), float(r[1]), float(r[2]), float(r[3])
        cx, cy = 0.5 * (x0 + x1), 0.5 * (y0 + y1)
        hx, hy = (x1 - x0) / 2.0, (y1 - y0) / 2.0
        seen.update(
            ((cx - hx, cy - hy), (cx + hx, cy - hy), (cx + hx, cy + hy), (cx - hx, cy + hy))
        )
    if len(seen) < 3:
        return []
    verts = _chain(sorted(seen))
    m = len(verts)
    if m < 3:
        return []
    ex = [verts[(k + 1) % m][0] - verts[k][0] for k in range(m)]
    ey = [verts[(k + 1) % m][1] - verts[k][1] for k in range(m)]
    # np.hypot, as _hull_distance: math.hypot may round differently.
    length = np.hypot(ex, ey).tolist()
    return [(verts[k][0], verts[k][1], ex[k], ey[k], length[k]) for k in range(m)]


def _edges_distance(edges: Edges, x: float, y: float) -> float:
    """_hull_distance over a hull given as _rect_hull's edges (the same double); -inf for []."""
    if not edges:
        return -math.inf
    best = math.inf
    for ax, ay, ex, ey, length in edges:
        d = (ex * (y - ay) - ey * (x - ax)) / length
        if d < best:
            best = d
    return best


def stability_margin(
    cog_x: float, cog_y: float, cog_z: float, base: Iterable[Sequence[float]]
) -> float:
    """Tipping margin [m] under a 0.28 g lateral push (docs/measurement.md §7.3).

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


def _shoelace(poly: np.ndarray) -> float:
    if len(poly) < 3:
        return 0.0
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def polygon_overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Overlap area [m^2] of two convex polygons, (N, 2) and (M, 2) vertices counter-clockwise.

    Sutherland-Hodgman: a is clipped by each edge of b in turn.
    """
    out = [np.asarray(p, dtype=float) for p in np.asarray(a, dtype=float).reshape(-1, 2)]
    clip = np.asarray(b, dtype=float).reshape(-1, 2)
    for k in range(len(clip)):
        if not out:
            return 0.0
        p0, p1 = clip[k], clip[(k + 1) % len(clip)]
        ex, ey = p1 - p0

        def side(q: np.ndarray, p0: np.ndarray = p0, ex: float = ex, ey: float = ey) -> float:
            return float(ex * (q[1] - p0[1]) - ey * (q[0] - p0[0]))  # > 0: left of the edge

        pts, out = out, []
        for i, cur in enumerate(pts):
            prev = pts[i - 1]
            sc, sp = side(cur), side(prev)
            if sc >= 0.0:
                if sp < 0.0:
                    out.append(prev + (cur - prev) * (sp / (sp - sc)))
                out.append(cur)
            elif sp >= 0.0:
                out.append(prev + (cur - prev) * (sp / (sp - sc)))
    return _shoelace(np.array(out)) if len(out) >= 3 else 0.0


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
    planned_pose: Sequence[float],
    actual_pose: Sequence[float],
    dims_m: Sequence[float],
    square_m: float = 1e-6,
) -> tuple[float, float]:
    """(error_xy [m], error_yaw [rad]) between two (x, y, z, yaw) poses of one carton.

    A footprint whose sides differ by at most square_m [m] counts as square: its yaw error is
    taken modulo a quarter turn, which moves each side by at most square_m / 2.
    """
    exy = math.hypot(actual_pose[0] - planned_pose[0], actual_pose[1] - planned_pose[1])
    square = abs(float(dims_m[0]) - float(dims_m[1])) <= square_m
    return exy, yaw_error(planned_pose[3], actual_pose[3], square)


def collapsed(previous: Iterable[Placement], current: Iterable[Placement]) -> list[str]:
    """Ids of cartons that were `placed` in the previous measurement and are not now."""
    now = {p.package_id: p.placed for p in current}
    return [p.package_id for p in previous if p.placed and not now.get(p.package_id, False)]


# ---------------------------------------------------------------------------------------------
# Quasi-static whole-stack check (docs/planners.md §6.7 validate_stack).


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
    over the contact hull [m]; failed: (N,) bool, the box breaks a rule (enforced or not); all
    in the input order.
    """

    ok: bool
    reason: str
    support: np.ndarray
    margin: np.ndarray
    failed: np.ndarray


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
    enforce: Sequence[bool] | None = None,
    stop_early: bool = True,
) -> StackCheck:
    """Quasi-static check of a whole stack (docs/planners.md §6.7).

    Boxes are processed top-down; each one rests on the boxes whose top is within contact_tol of
    its bottom (or on the deck); its support ratio is the contact area over its footprint; the
    load resultant (own weight at its CoG plus loads passed down from above) must lie at least
    min_margin [m] inside the convex hull of the contact patches; the load then passes to the
    supporters in proportion to contact area, applied at each contact's centroid.
    check_overlaps=False skips the O(N^2) pairwise overlap test when the caller guarantees it.
    enforce: per box, whether its failures count (default all); a measured stack that already
    breaks a rule should not veto every further move, so planners enforce only the boxes that
    passed before plus the new one. stop_early=False fills support and margin for every box.
    """
    n = len(boxes)
    support = np.ones(n)
    margin = np.full(n, np.inf)
    enforced = [True] * n if enforce is None else [bool(e) for e in enforce]
    first: list[str] = []
    failed = np.zeros(n, dtype=bool)

    def flag(i: int, reason: str) -> None:
        failed[i] = True
        if enforced[i] and not first:
            first.append(reason)

    if sum(b.mass_kg for b in boxes) > max_mass_kg:
        first.append('mass')
    hx, hy = pallet_size[0] / 2.0, pallet_size[1] / 2.0
    for i, b in enumerate(boxes):
        r = b.rect
        if r[0] < -hx - 1e-9 or r[1] > hx + 1e-9 or r[2] < -hy - 1e-9 or r[3] > hy + 1e-9:
            flag(i, 'bounds')
        if b.top > max_height_m + 1e-9:
            flag(i, 'height')
    for i in range(n if check_overlaps else 0):
        for j in range(i + 1, n):
            a, b = boxes[i], boxes[j]
            vz = min(a.top, b.top) - max(a.z, b.z)
            if vz > overlap_tol and rect_overlap(a.rect, b.rect) > overlap_tol * overlap_tol:
                flag(i if enforced[i] else j, 'overlap')
    if first and stop_early:
        return StackCheck(False, first[0], support, margin, failed)
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
            flag(i, 'support')
        margin[i] = _edges_distance(_rect_hull(r for _, r in patches), rx, ry)
        if margin[i] < min_margin - 1e-12:
            flag(i, 'margin')
        if first and stop_early:
            return StackCheck(False, first[0], support, margin, failed)
        for j, r in patches:
            if j < 0:
                continue
            share = m * (r[1] - r[0]) * (r[3] - r[2]) / contact
            load[j] += (share, share * 0.5 * (r[0] + r[1]), share * 0.5 * (r[2] + r[3]))
    return StackCheck(not first, first[0] if first else '', support, margin, failed)


def _intersect(a: Rect, b: Rect) -> Rect | None:
    r = (max(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), min(a[3], b[3]))
    return r if r[1] - r[0] > 1e-9 and r[3] - r[2] > 1e-9 else None


class StackModel:
    """A stack checked once, then asked "what if one more box goes on top?" incrementally.

    Same rules as validate_stack. A new box never carries anything, so only the boxes on its
    load path change; loads pass down linearly (shares by contact area, applied at contact
    centroids), so the extra load is propagated alone. Boxes that already break a rule are not
    enforced (see validate_stack's `enforce`). add() agrees with validate_stack on the stack
    plus the box (tested).
    """

    def __init__(
        self,
        boxes: Sequence[StackBox],
        pallet_size: tuple[float, float] = (1.20, 0.80),
        *,
        min_support: float = 0.62,
        min_margin: float = 0.008,
        max_mass_kg: float = 350.0,
        max_height_m: float = 1.35,
        contact_tol: float = 0.004,
    ) -> None:
        self.boxes = list(boxes)
        self.pallet_size = pallet_size
        self.min_support, self.min_margin = min_support, min_margin
        self.max_mass_kg, self.max_height_m = max_mass_kg, max_height_m
        self.contact_tol = contact_tol
        n = len(self.boxes)
        self.mass = sum(b.mass_kg for b in self.boxes)
        # Python floats: a stack holds a dozen boxes, and add() runs per candidate.
        self._rects = [b.rect for b in self.boxes]
        self._top = [b.top for b in self.boxes]
        self._z = [b.z for b in self.boxes]
        # Per base height: the boxes whose top is within contact_tol of it (index, rect).
        self._levels: dict[float, list[tuple[int, Rect]]] = {}
        self._patches = [self._contacts(b, exclude=i) for i, b in enumerate(self.boxes)]
        self._contact = [sum((r[1] - r[0]) * (r[3] - r[2]) for _, r in p) for p in self._patches]
        self._hulls = [_rect_hull(r for _, r in p) for p in self._patches]
        # The boxes breaking a rule as measured: validate_stack's `failed` with no overlap
        # check, nothing enforced and no early stop (the same patches, loads and doubles; the
        # tests hold add() to it), in the pass that sums the loads.
        failed = np.zeros(n, dtype=bool)
        hx, hy = pallet_size[0] / 2.0, pallet_size[1] / 2.0
        for i, (b, r) in enumerate(zip(self.boxes, self._rects, strict=True)):
            if r[0] < -hx - 1e-9 or r[1] > hx + 1e-9 or r[2] < -hy - 1e-9 or r[3] > hy + 1e-9:
                failed[i] = True
            if b.top > max_height_m + 1e-9:
                failed[i] = True
        # Loads from above [mass, moment x, moment y] per box, as in validate_stack.
        self._load = [[0.0, 0.0, 0.0] for _ in range(n)]
        for i in sorted(range(n), key=lambda k: -self.boxes[k].z):
            b = self.boxes[i]
            held = self._load[i]
            own = (
                b.mass_kg + held[0],
                b.mass_kg * b.cog[0] + held[1],
                b.mass_kg * b.cog[1] + held[2],
            )
            if own[0] > 0.0:
                area = b.ex * b.ey
                ratio = min(1.0, self._contact[i] / area) if area > 0 else 0.0
                if ratio < min_support - 1e-9:
                    failed[i] = True
                rx = (b.mass_kg * b.cog[0] + held[1]) / own[0]
                ry = (b.mass_kg * b.cog[1] + held[2]) / own[0]
                if _edges_distance(self._hulls[i], rx, ry) < min_margin - 1e-12:
                    failed[i] = True
            self._pass_down(i, own, self._load)
        self.failed = failed
        self._failed = failed.tolist()

    def _contacts(self, b: StackBox, exclude: int = -1) -> list[tuple[int, Rect]]:
        if b.z <= self.contact_tol:
            return [(-1, b.rect)]
        r = b.rect
        level = self._levels.get(b.z)
        if level is None:
            z, tol = b.z, self.contact_tol
            level = [(j, s) for j, s in enumerate(self._rects) if abs(self._top[j] - z) <= tol]
            self._levels[b.z] = level
        out: list[tuple[int, Rect]] = []
        for j, s in level:
            if j == exclude:
                continue
            x0, x1 = max(r[0], s[0]), min(r[1], s[1])
            y0, y1 = max(r[2], s[2]), min(r[3], s[3])
            if x1 - x0 > 1e-9 and y1 - y0 > 1e-9:
                out.append((j, (x0, x1, y0, y1)))
        return out

    def _pass_down(
        self,
        i: int,
        load: Sequence[float],
        into: list[list[float]] | dict[int, list[float]],
    ) -> None:
        contact = self._contact[i]
        for j, r in self._patches[i]:
            if j < 0 or contact <= 0:
                continue
            share = load[0] * (r[1] - r[0]) * (r[3] - r[2]) / contact
            a0, a1, a2 = share, share * 0.5 * (r[0] + r[1]), share * 0.5 * (r[2] + r[3])
            if isinstance(into, dict) and j not in into:
                into[j] = [0.0 + a0, 0.0 + a1, 0.0 + a2]
            else:
                got = into[j]
                got[0] += a0
                got[1] += a1
                got[2] += a2

    def add(self, box: StackBox) -> StackCheck:
        """Check the stack plus `box` resting on top; support/margin arrays cover the new box
        only (index 0)."""
        reason, support, margin = self.verdict(box)
        return StackCheck(
            not reason, reason, np.array([support]), np.array([margin]), np.array([bool(reason)])
        )

    def verdict(self, box: StackBox) -> tuple[str, float, float]:
        """add() as (reason, support ratio, tipping margin) of the new box: reason '' when the
        stack plus `box` is valid; support 1 and margin inf where the check stopped before."""
        support, margin = 1.0, math.inf
        if self.mass + box.mass_kg > self.max_mass_kg:
            return 'mass', support, margin
        hx, hy = self.pallet_size[0] / 2.0, self.pallet_size[1] / 2.0
        r = box.rect
        if r[0] < -hx - 1e-9 or r[1] > hx + 1e-9 or r[2] < -hy - 1e-9 or r[3] > hy + 1e-9:
            return 'bounds', support, margin
        if box.top > self.max_height_m + 1e-9:
            return 'height', support, margin
        patches = self._contacts(box)
        area = box.ex * box.ey
        contact = sum((q[1] - q[0]) * (q[3] - q[2]) for _, q in patches)
        support = min(1.0, contact / area) if area > 0 else 0.0
        if support < self.min_support - 1e-9:
            return 'support', support, margin
        margin = _edges_distance(_rect_hull(q for _, q in patches), box.cog[0], box.cog[1])
        if margin < self.min_margin - 1e-12:
            return 'margin', support, margin
        extra: dict[int, list[float]] = {}
        mass = box.mass_kg
        for j, q in patches:
            if j >= 0:
                share = mass * (q[1] - q[0]) * (q[3] - q[2]) / contact
                a = (share, share * 0.5 * (q[0] + q[1]), share * 0.5 * (q[2] + q[3]))
                got = extra.get(j, [0.0, 0.0, 0.0])
                extra[j] = [got[0] + a[0], got[1] + a[1], got[2] + a[2]]
        z = self._z
        while extra:
            j = max(extra, key=z.__getitem__)
            add = extra.pop(j)
            b = self.boxes[j]
            held = self._load[j]
            m = b.mass_kg + (held[0] + add[0])
            rx = (b.mass_kg * b.cog[0] + (held[1] + add[1])) / m
            ry = (b.mass_kg * b.cog[1] + (held[2] + add[2])) / m
            mj = _edges_distance(self._hulls[j], rx, ry)
            if not self._failed[j] and mj < self.min_margin - 1e-12:
                return 'margin', support, margin
            self._pass_down(j, add, extra)
        return '', support, margin
