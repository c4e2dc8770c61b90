"""The camera geometry of one view for the detector: the pixel window a world box projects into
(_roi), the view's depth median-filtered and unprojected to world X, Y, Z per pixel (_geometry,
_Geometry, which also meets pixel rays with a plane and projects plane points back), and the
pixel box round projected points (_bbox).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import cv2
import numpy as np

from palletizer.core.views import CameraView

__all__: list[str] = []


@dataclass(frozen=True)
class _Geometry:
    """Per-pixel rays and unprojected points of one view (all (H, W) float32 unless noted)."""

    R: np.ndarray  # (3, 3) R_world_optical
    c: np.ndarray  # (3,) camera centre [m]
    K: np.ndarray
    X: np.ndarray  # world x [m]
    Y: np.ndarray
    Z: np.ndarray
    valid: np.ndarray  # bool

    def to_plane(self, uv: np.ndarray, z0: float) -> np.ndarray:
        """World XY (N, 2) [m] where pixel rays uv (N, 2) [px] meet the plane z = z0."""
        K = self.K
        d = np.stack(
            [(uv[:, 0] - K[0, 2]) / K[0, 0], (uv[:, 1] - K[1, 2]) / K[1, 1], np.ones(len(uv))]
        )
        r = self.R @ d
        t = (z0 - self.c[2]) / r[2]
        return cast(np.ndarray, (self.c[:2, None] + r[:2] * t).T)

    def project(self, xy: np.ndarray, z0: float) -> np.ndarray:
        """Pixels (N, 2) of world points (N, 2) on the plane z = z0."""
        P = np.column_stack([xy, np.full(len(xy), z0)]) - self.c
        p = P @ self.R  # R^T (P - c), row-wise
        K = self.K
        return np.column_stack(
            [K[0, 0] * p[:, 0] / p[:, 2] + K[0, 2], K[1, 1] * p[:, 1] / p[:, 2] + K[1, 2]]
        )


_MIN_RANGE = 0.1  # [m] nearer depth is no return (the D415 sees from ~0.3 m)


def _roi(
    view: CameraView, xy_lo: Sequence[float], xy_hi: Sequence[float], z_lo: float, z_hi: float
) -> tuple[int, int, int, int]:
    """Pixel window (u0, v0, u1, v1) that holds the world box [xy_lo, xy_hi] x [z_lo, z_hi] [m],
    grown by a few pixels for the edge search and the filters."""
    K = np.asarray(view.K, dtype=float)
    T = np.asarray(view.T_world_optical, dtype=float)
    xs, ys, zs = (xy_lo[0], xy_hi[0]), (xy_lo[1], xy_hi[1]), (z_lo, z_hi)
    P = np.array([(x, y, z) for x in xs for y in ys for z in zs]) - T[:3, 3]
    p = P @ T[:3, :3]
    h, w = view.shape
    if (p[:, 2] <= 1e-6).any():  # the box reaches behind the camera: the whole image
        return 0, 0, w, h
    u = K[0, 0] * p[:, 0] / p[:, 2] + K[0, 2]
    v = K[1, 1] * p[:, 1] / p[:, 2] + K[1, 2]
    pad = 12
    u0 = int(np.clip(math.floor(u.min()) - pad, 0, w))
    v0 = int(np.clip(math.floor(v.min()) - pad, 0, h))
    u1 = int(np.clip(math.ceil(u.max()) + pad + 1, 0, w))
    v1 = int(np.clip(math.ceil(v.max()) + pad + 1, 0, h))
    return u0, v0, u1, v1


def _geometry(view: CameraView, roi: tuple[int, int, int, int] | None = None) -> _Geometry:
    """The view's geometry, inside the pixel window roi (u0, v0, u1, v1) when given: pixel
    coordinates are then the window's, K shifted to match."""
    depth = np.asarray(view.depth, dtype=np.float32)
    K = np.asarray(view.K, dtype=float).copy()
    if roi is not None:
        u0, v0, u1, v1 = roi
        depth = depth[v0:v1, u0:u1]
        K[0, 2] -= u0
        K[1, 2] -= v0
    # Lost returns read 0 (or, with noise on top, a few mm): nearer than _MIN_RANGE is none.
    depth = np.where(np.isfinite(depth) & (depth > _MIN_RANGE), depth, 0.0).astype(np.float32)
    # 5 x 5 median: sensor noise down, lost returns (0) filled from their neighbours.
    med = cv2.medianBlur(depth, 5)
    d = np.where(depth > 0, med, 0.0).astype(np.float32)
    d = np.where((d == 0) & (med > 0), med, d)
    h, w = d.shape
    T = np.asarray(view.T_world_optical, dtype=float)
    R, c = T[:3, :3], T[:3, 3]
    a = ((np.arange(w, dtype=np.float32) - K[0, 2]) / K[0, 0])[None, :]
    b = ((np.arange(h, dtype=np.float32) - K[1, 2]) / K[1, 1])[:, None]
    xc, yc = d * a, d * b
    Rf = R.astype(np.float32)
    X = Rf[0, 0] * xc + Rf[0, 1] * yc + Rf[0, 2] * d + np.float32(c[0])
    Y = Rf[1, 0] * xc + Rf[1, 1] * yc + Rf[1, 2] * d + np.float32(c[1])
    Z = Rf[2, 0] * xc + Rf[2, 1] * yc + Rf[2, 2] * d + np.float32(c[2])
    return _Geometry(R, c, K, X, Y, Z, d > 0)


def _bbox(uv: np.ndarray, w: int, h: int, pad: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of pixels uv (N, 2) grown by pad, clipped to a w x h image."""
    x0 = int(np.clip(math.floor(uv[:, 0].min()) - pad, 0, w))
    y0 = int(np.clip(math.floor(uv[:, 1].min()) - pad, 0, h))
    x1 = int(np.clip(math.ceil(uv[:, 0].max()) + pad + 1, 0, w))
    y1 = int(np.clip(math.ceil(uv[:, 1].max()) + pad + 1, 0, h))
    return x0, y0, x1, y1
