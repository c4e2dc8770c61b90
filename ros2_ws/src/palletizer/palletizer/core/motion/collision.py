"""Swept-volume checks of the tool and carried carton against a height field and cell boxes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from palletizer.core.contracts import EUR_DECK_Z
from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.errors import MotionError

__all__ = ['AABB', 'CarriedLoad', 'CollisionWorld', 'HeightField', 'first_collision', 'placed_box']


@dataclass(frozen=True)
class AABB:
    """Axis-aligned static obstacle in the world: lower and upper corners [m]."""

    lo: tuple[float, float, float]
    hi: tuple[float, float, float]
    name: str = 'box'

    def __post_init__(self) -> None:
        if (
            len(self.lo) != 3
            or len(self.hi) != 3
            or any(a > b for a, b in zip(self.lo, self.hi, strict=True))
        ):
            raise MotionError(f'AABB {self.name!r}: lo {self.lo!r} must be <= hi {self.hi!r}')


@dataclass(frozen=True, eq=False)
class HeightField:
    """Heights above the deck on a grid (the pallet height map).

    heights: (ny, nx) [m] above deck_z; world X along axis 1, Y along axis 0.
    origin: world XY of the (-x, -y) grid corner [m]; cell_size [m]; deck_z: world z of the deck.
    """

    heights: np.ndarray
    origin: tuple[float, float] = (0.0, -0.4)
    cell_size: float = 0.01
    deck_z: float = EUR_DECK_Z

    def __post_init__(self) -> None:
        h = np.array(self.heights, dtype=float)
        if h.ndim != 2 or h.size == 0 or not np.all(np.isfinite(h)):
            raise MotionError(f'HeightField.heights shape {h.shape}; expected finite (ny, nx)')
        if not self.cell_size > 0:
            raise MotionError(f'HeightField.cell_size = {self.cell_size!r}; expected > 0')
        h.flags.writeable = False
        object.__setattr__(self, 'heights', h)

    @classmethod
    def from_height_map(
        cls, height_map: Any, deck_z: float = EUR_DECK_Z, margin: float = 0.0
    ) -> HeightField:
        """From any map with .cells (ny, nx) above deck, .origin and .cell_size (core contract),
        lowered by `margin` [m] (the map's measured error; never below the deck)."""
        cells = np.asarray(height_map.cells, dtype=float)
        if margin > 0:
            cells = np.clip(cells - margin, 0.0, None)
        return cls(cells, tuple(height_map.origin), height_map.cell_size, deck_z)

    @property
    def top_z(self) -> float:
        """World z of the highest cell [m]."""
        return self.deck_z + float(self.heights.max())

    def max_under(self, cx: float, cy: float, hx: float, hy: float, yaw: float) -> float:
        """Highest world z [m] of cells touching a rectangle (centre, half-sizes, yaw).

        Conservative: a cell counts when its centre lies within the rectangle grown by half a
        cell diagonal. Returns -inf when the rectangle misses the grid.
        """
        top = kern.max_under(
            self.heights,
            float(self.origin[0]),
            float(self.origin[1]),
            float(self.cell_size),
            float(cx),
            float(cy),
            float(hx),
            float(hy),
            float(yaw),
        )
        return self.deck_z + float(top)


@dataclass(frozen=True)
class CarriedLoad:
    """A carton held under the cups: dims (L along tool x, W along tool y, H) [m].

    offset: carton centre relative to the tool axis in the tool frame (x, y) [m]; with the cup
    block centred on the lid this is the block offset.
    """

    dims: tuple[float, float, float]
    offset: tuple[float, float] = (0.0, 0.0)


@dataclass(frozen=True)
class CollisionWorld:
    """What a tool-down motion must clear: an optional height field and static boxes.

    placed: cartons placed since the height map was taken (their planned boxes), obstacles
    like the static boxes and part of the stack's top. arm_boxes: furniture the arm's forearm
    and wrist links must clear (the pick surface too, which the tool and carton touch).
    """

    height_field: HeightField | None = None
    boxes: tuple[AABB, ...] = field(default_factory=tuple)
    placed: tuple[AABB, ...] = field(default_factory=tuple)
    arm_boxes: tuple[AABB, ...] = field(default_factory=tuple)

    def stack_top(self, deck_z: float) -> float:
        """Highest point of the stack [m]: the height field's top and the placed cartons'."""
        top = self.height_field.top_z if self.height_field is not None else deck_z
        return max([top, *(b.hi[2] for b in self.placed)])

    def corridor_top(self, deck_z: float, path: list[tuple[float, float]], radius: float) -> float:
        """Highest point [m] of the stack within `radius` [m] of the polyline `path` (x, y):
        the height field's cells under each leg's rectangle (the leg grown by radius on every
        side) and the placed cartons whose box comes that near; deck_z where none does."""
        if not path:
            raise MotionError('corridor_top: empty path; expected at least one (x, y) point')
        top = deck_z
        legs = list(zip(path, path[1:], strict=False)) or [(path[0], path[0])]
        for (ax, ay), (bx, by) in legs:
            if self.height_field is not None:
                ln = math.hypot(bx - ax, by - ay)
                yaw = math.atan2(by - ay, bx - ax) if ln > 1e-9 else 0.0
                cx, cy = (ax + bx) / 2, (ay + by) / 2
                top = max(top, self.height_field.max_under(cx, cy, ln / 2 + radius, radius, yaw))
            for b in self.placed:
                if _segment_box_xy(ax, ay, bx, by, b) <= radius:
                    top = max(top, b.hi[2])
        return top


def _segment_box_xy(ax: float, ay: float, bx: float, by: float, box: AABB) -> float:
    """Distance [m] in the XY plane from the segment (a, b) to the box's footprint; 0 when
    they touch. Apart, the nearest pair has an end of the segment or a corner of the box."""
    x0, y0, x1, y1 = box.lo[0], box.lo[1], box.hi[0], box.hi[1]
    # Liang-Barsky: does the segment enter the rectangle?
    t0, t1 = 0.0, 1.0
    for p, q in ((ax - bx, ax - x0), (bx - ax, x1 - ax), (ay - by, ay - y0), (by - ay, y1 - ay)):
        if abs(p) < 1e-12:
            if q < 0:
                t0, t1 = 1.0, 0.0
                break
            continue
        t = q / p
        if p < 0:
            t0 = max(t0, t)
        else:
            t1 = min(t1, t)
    if t0 <= t1:
        return 0.0

    def to_box(px: float, py: float) -> float:
        return math.hypot(max(x0 - px, 0.0, px - x1), max(y0 - py, 0.0, py - y1))

    def to_segment(px: float, py: float) -> float:
        dx, dy = bx - ax, by - ay
        n = dx * dx + dy * dy
        t = 0.0 if n < 1e-18 else min(1.0, max(0.0, ((px - ax) * dx + (py - ay) * dy) / n))
        return math.hypot(ax + t * dx - px, ay + t * dy - py)

    corners = ((x0, y0), (x0, y1), (x1, y0), (x1, y1))
    return min(to_box(ax, ay), to_box(bx, by), *(to_segment(cx, cy) for cx, cy in corners))


def placed_box(x: float, y: float, z: float, yaw: float, dims: tuple[float, float, float]) -> AABB:
    """The axis-aligned box around a carton centred at (x, y, z) with yaw and dims (L, W, H)."""
    L, W, H = dims
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    hx, hy = (c * L + s * W) / 2, (s * L + c * W) / 2
    return AABB((x - hx, y - hy, z - H / 2), (x + hx, y + hy, z + H / 2), 'placed_carton')


def first_collision(
    poses: np.ndarray,
    world: CollisionWorld,
    tool_body: tuple[float, float, float],
    cup_gap: float,
    load: CarriedLoad | None,
    tolerance: float,
    grow: float = 0.0,
) -> tuple[int, str] | None:
    """Index of the first tool-down pose (n, 4: x, y, z, yaw) whose swept boxes hit the world,
    with what was hit (a box's name or 'height_map'); None when nothing is hit.

    The tool body spans [z_tcp, z_tcp + body height] centred on the tool axis; the carton spans
    [z_tcp - cup_gap - H, z_tcp - cup_gap] centred at its tool-frame offset. A contact shallower
    than `tolerance` [m] is ignored; footprints are grown by `grow` [m] to cover the motion
    between successive samples. The test itself is kern.first_hit.
    """
    parts = [(0.0, 0.0, tool_body[0] / 2 + grow, tool_body[1] / 2 + grow, 0.0, tool_body[2])]
    if load is not None:
        L, W, H = load.dims
        ox, oy = load.offset
        parts.append((ox, oy, L / 2 + grow, W / 2 + grow, -cup_gap - H, -cup_gap))
    boxes = world.boxes + world.placed
    lo = np.array([b.lo for b in boxes], dtype=float).reshape(-1, 3)
    hi = np.array([b.hi for b in boxes], dtype=float).reshape(-1, 3)
    hf = world.height_field
    if hf is None:
        # Read-only like a HeightField's, so the kernel keeps one compiled signature.
        heights, geom = np.zeros((1, 1)), np.zeros(5)
        heights.flags.writeable = False
    else:
        heights = hf.heights
        geom = np.array([hf.origin[0], hf.origin[1], hf.cell_size, hf.deck_z, 1.0])
    i, what = kern.first_hit(
        np.ascontiguousarray(poses, dtype=float),
        np.array(parts, dtype=float),
        lo,
        hi,
        np.ascontiguousarray(heights, dtype=float),
        geom,
        float(tolerance),
    )
    if i < 0:
        return None
    return int(i), ('height_map' if what < 0 else boxes[what].name)
