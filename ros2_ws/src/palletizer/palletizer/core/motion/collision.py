"""Swept-volume checks of the tool and carried carton against a height field and cell boxes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from palletizer.core.motion.errors import MotionError

__all__ = ['AABB', 'CarriedLoad', 'CollisionWorld', 'HeightField', 'placed_box', 'swept_boxes']


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
    deck_z: float = 0.144

    def __post_init__(self) -> None:
        h = np.array(self.heights, dtype=float)
        if h.ndim != 2 or h.size == 0 or not np.all(np.isfinite(h)):
            raise MotionError(f'HeightField.heights shape {h.shape}; expected finite (ny, nx)')
        if not self.cell_size > 0:
            raise MotionError(f'HeightField.cell_size = {self.cell_size!r}; expected > 0')
        h.flags.writeable = False
        object.__setattr__(self, 'heights', h)

    @classmethod
    def from_height_map(cls, height_map: Any, deck_z: float = 0.144) -> HeightField:
        """From any map with .cells (ny, nx) above deck, .origin and .cell_size (core contract)."""
        return cls(
            np.asarray(height_map.cells), tuple(height_map.origin), height_map.cell_size, deck_z
        )

    @property
    def top_z(self) -> float:
        """World z of the highest cell [m]."""
        return self.deck_z + float(self.heights.max())

    def max_under(self, cx: float, cy: float, hx: float, hy: float, yaw: float) -> float:
        """Highest world z [m] of cells touching a rectangle (centre, half-sizes, yaw).

        Conservative: a cell counts when its centre lies within the rectangle grown by half a
        cell diagonal. Returns -inf when the rectangle misses the grid.
        """
        cs = self.cell_size
        ny, nx = self.heights.shape
        c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
        ex, ey = c * hx + s * hy, s * hx + c * hy  # AABB half-sizes of the rotated rectangle
        grow = cs * math.sqrt(0.5)
        i0 = max(0, math.floor((cx - ex - grow - self.origin[0]) / cs))
        i1 = min(nx, math.ceil((cx + ex + grow - self.origin[0]) / cs))
        j0 = max(0, math.floor((cy - ey - grow - self.origin[1]) / cs))
        j1 = min(ny, math.ceil((cy + ey + grow - self.origin[1]) / cs))
        if i0 >= i1 or j0 >= j1:
            return -math.inf
        xs = self.origin[0] + (np.arange(i0, i1) + 0.5) * cs - cx
        ys = self.origin[1] + (np.arange(j0, j1) + 0.5) * cs - cy
        cy_, sy_ = math.cos(yaw), math.sin(yaw)
        u = xs[None, :] * cy_ + ys[:, None] * sy_
        v = -xs[None, :] * sy_ + ys[:, None] * cy_
        inside = (np.abs(u) <= hx + grow) & (np.abs(v) <= hy + grow)
        if not inside.any():
            return -math.inf
        return self.deck_z + float(self.heights[j0:j1, i0:i1][inside].max())


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
    like the static boxes and part of the stack's top.
    """

    height_field: HeightField | None = None
    boxes: tuple[AABB, ...] = field(default_factory=tuple)
    placed: tuple[AABB, ...] = field(default_factory=tuple)

    def stack_top(self, deck_z: float) -> float:
        """Highest point of the stack [m]: the height field's top and the placed cartons'."""
        top = self.height_field.top_z if self.height_field is not None else deck_z
        return max([top, *(b.hi[2] for b in self.placed)])


def placed_box(x: float, y: float, z: float, yaw: float, dims: tuple[float, float, float]) -> AABB:
    """The axis-aligned box around a carton centred at (x, y, z) with yaw and dims (L, W, H)."""
    L, W, H = dims
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    hx, hy = (c * L + s * W) / 2, (s * L + c * W) / 2
    return AABB((x - hx, y - hy, z - H / 2), (x + hx, y + hy, z + H / 2), 'placed_carton')


def swept_boxes(
    poses: np.ndarray,
    tool_body: tuple[float, float, float],
    cup_gap: float,
    load: CarriedLoad | None,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Oriented boxes swept by the tool body and load at tool-down poses (n, 4: x, y, z, yaw).

    Returns per part (centre xy (n, 2), half-sizes (2,) as (n, 2), yaw (n,), z_lo (n,), z_hi (n,)).
    The tool body spans [z_tcp, z_tcp + body height] centred on the tool axis; the carton spans
    [z_tcp - cup_gap - H, z_tcp - cup_gap] centred at the tool-frame offset.
    """
    x, y, z, yaw = poses.T
    n = len(poses)
    parts = []
    half = np.tile([tool_body[0] / 2, tool_body[1] / 2], (n, 1))
    parts.append((np.stack([x, y], axis=1), half, yaw, z, z + tool_body[2]))
    if load is not None:
        ox, oy = load.offset
        c, s = np.cos(yaw), np.sin(yaw)
        # Tool y runs against world y: world offset = rot_z(yaw) @ (ox, -oy).
        cx = x + c * ox + s * oy
        cy = y + s * ox - c * oy
        half_l = np.tile([load.dims[0] / 2, load.dims[1] / 2], (n, 1))
        top = z - cup_gap
        parts.append((np.stack([cx, cy], axis=1), half_l, yaw, top - load.dims[2], top))
    return parts


def _obb_hits_aabb(
    centre: np.ndarray, half: np.ndarray, yaw: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """2D separating-axis test, vectorised over n rectangles against one axis-aligned box."""
    c, s = np.abs(np.cos(yaw)), np.abs(np.sin(yaw))
    bc = (lo + hi) / 2
    bh = (hi - lo) / 2
    d = centre - bc
    # World axes.
    ex = c * half[:, 0] + s * half[:, 1]
    ey = s * half[:, 0] + c * half[:, 1]
    sep = (np.abs(d[:, 0]) > ex + bh[0]) | (np.abs(d[:, 1]) > ey + bh[1])
    # Rectangle axes.
    cs, sn = np.cos(yaw), np.sin(yaw)
    du = np.abs(d[:, 0] * cs + d[:, 1] * sn)
    dv = np.abs(-d[:, 0] * sn + d[:, 1] * cs)
    bu = c * bh[0] + s * bh[1]
    bv = s * bh[0] + c * bh[1]
    sep |= (du > half[:, 0] + bu) | (dv > half[:, 1] + bv)
    return ~sep


def first_collision(
    poses: np.ndarray,
    world: CollisionWorld,
    tool_body: tuple[float, float, float],
    cup_gap: float,
    load: CarriedLoad | None,
    tolerance: float,
    grow: float = 0.0,
) -> tuple[int, str] | None:
    """Index of the first pose (n, 4) whose swept boxes hit the world, with what was hit.

    A contact shallower than `tolerance` [m] is ignored; footprints are grown by `grow` [m] to
    cover the motion between successive samples.
    """
    n = len(poses)
    hit = np.full(n, False)
    what = np.full(n, '', dtype=object)
    for centre, half, yaw, z_lo, z_hi in swept_boxes(poses, tool_body, cup_gap, load):
        half = half + grow
        for box in world.boxes + world.placed:
            lo, hi = np.asarray(box.lo), np.asarray(box.hi)
            z_overlap = np.minimum(z_hi, hi[2]) - np.maximum(z_lo, lo[2])
            cand = (z_overlap > tolerance) & ~hit
            if cand.any():
                idx = np.nonzero(cand)[0]
                h = _obb_hits_aabb(centre[idx], half[idx], yaw[idx], lo[:2], hi[:2])
                hit[idx[h]] = True
                what[idx[h]] = box.name
        hf = world.height_field
        if hf is not None:
            # Only samples low enough to touch the tallest cell need the per-cell test, and a
            # vertical segment repeats one footprint: test each distinct footprint once.
            cand = (z_lo + tolerance < hf.top_z) & ~hit
            if cand.any():
                idx = np.nonzero(cand)[0]
                keys = np.round(np.column_stack([centre[idx], yaw[idx]]), 6)
                uniq, inv = np.unique(keys, axis=0, return_inverse=True)
                tops = np.array(
                    [hf.max_under(u[0], u[1], half[0, 0], half[0, 1], u[2]) for u in uniq]
                )
                h = tops[inv.ravel()] > z_lo[idx] + tolerance
                hit[idx[h]] = True
                what[idx[h]] = 'height_map'
    if not hit.any():
        return None
    i = int(np.argmax(hit))
    return i, str(what[i])
