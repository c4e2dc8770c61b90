"""From a depth view to world points: the image rectangle whose returns can land on the pallet
(_roi); a view's valid, upward-facing returns after the median, edge and normal filters, with
below-deck returns moved onto the deck plane (_view_points); and the raw returns above the deck
that the lid rectangles' extents are read from (_lid_points).
"""

from __future__ import annotations

from typing import Any, cast

import cv2
import numpy as np

from palletizer.core.params.fusion import FusionParams

__all__: list[str] = []


def _view_points(
    view: Any,
    params: FusionParams,
    R_keep: tuple[float, float, float, float, float, float],
    deck: float,
) -> np.ndarray:
    """World points (N, 3) float32 of a view's valid, upward-facing pixels inside the box
    R_keep = (x0, x1, y0, y1, z0, z1) [m]; deck: the deck plane's height [m].

    A return below the deck plane came through a gap between the deck boards (or is the
    deck's own noise): it becomes the point where its ray crosses the deck plane, at deck
    height. Those points skip the edge and normal filters, which the 17 mm board gaps would
    otherwise wipe out with a few pixels of the boards either side.
    """
    depth = np.asarray(view.depth, dtype=np.float32)
    K = np.asarray(view.K, dtype=np.float64)
    T = np.asarray(view.T_world_optical, dtype=np.float64)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    R = T[:3, :3].astype(np.float32)
    t = T[:3, 3].astype(np.float32)
    x0, x1, y0, y1, z0, z1 = R_keep
    # Only the image rectangle the keep box projects into is worked on (plus the filter
    # margins): the pallet fills about half of a pallet camera's image.
    r0, r1, c0, c1 = _roi(depth, K, T, R_keep, deck)
    if r1 - r0 < 8 or c1 - c0 < 8:
        return np.zeros((0, 3), np.float32)
    z = depth[r0:r1, c0:c1]
    z = np.nan_to_num(z, nan=0.0, posinf=0.0, neginf=0.0)
    valid = (z > params.depth_range[0]) & (z < params.depth_range[1])
    a = ((np.arange(c0, c1) - cx) / fx).astype(np.float32)[None, :]
    b = ((np.arange(r0, r1) - cy) / fy).astype(np.float32)[:, None]
    # World x, y, z of every pixel: p_world = R (a z, b z, z) + t.
    ra = R[:, 0:1, None] * a  # (3, 1, W)
    rb = R[:, 1:2, None] * b  # (3, H, 1)
    # The sensor's 1 mm depth unit makes a uint16 image of it exact, and cv2's 5 x 5 median is
    # fast on it. The median keeps edges where they are and cuts the per-pixel noise about
    # 2.5 x; that matters beyond the height: noise moves a point along its ray, so an oblique
    # view spills lid points over the carton edge by about the depth error.
    zmm = np.round(z * 1000.0).clip(0, 65535).astype(np.uint16)
    # Lost returns enter the median half as nearest, half as farthest (a checkerboard): as 0
    # alone they counted as nearest, and the sensor loses half the pixels at a depth step, so a
    # lid's median grew 1-2 px over its edge (lid heights on the cells beside it). A window
    # mostly lost is lost: otherwise a lid grows into the lost returns beside it.
    board = ((np.arange(r0, r1)[:, None] + np.arange(c0, c1)[None, :]) & 1).astype(bool)
    zmm[~valid] = np.where(board[~valid], np.uint16(65535), np.uint16(0))
    zmed = cv2.medianBlur(zmm, 5)
    n_valid = cv2.boxFilter(valid.astype(np.uint8), -1, (5, 5), normalize=False)
    zmed[(zmed == 65535) | (n_valid < 13)] = 0
    zs = zmed.astype(np.float32) * 0.001
    # Direction of every pixel's ray per unit planar depth, in the world.
    dz = ra[2] + rb[2] + R[2, 2]
    dx = ra[0] + rb[0] + R[0, 2]
    dy = ra[1] + rb[1] + R[1, 2]
    Wz = dz * zs + t[2]
    ok = valid & (zs > 0)
    below = ok & (Wz < deck) & (Wz >= deck - params.below_deck)
    # Pixels near a depth discontinuity are dropped: carton sides seen edge-on, flying pixels,
    # and edge cells that would otherwise take points of both surfaces.
    # Lost returns (0) are no step: the D415 loses the whole 17 mm gap between deck boards,
    # and counting that as a step took a further edge_px of the boards either side.
    kern = np.ones((2 * params.edge_px + 1,) * 2, np.uint8)
    zhi_ = cv2.dilate(zmed, kern)
    zlo_ = cv2.erode(np.where(zmed > 0, zmed, np.uint16(65535)), kern)
    span = zhi_.astype(np.int32) - zlo_.astype(np.int32)
    keep = ok & (span <= int(params.edge_jump * 1000.0)) & (Wz >= deck) & (Wz <= z1)
    # Normals over +-k pixels of the filtered depth; |n_z| in the world. The upward mask is
    # eroded by up_erode_px: the 5 x 5 median rounds a carton's top edge, so lid-high points
    # of the side face just below it pass as upward and land outside the footprint.
    k = params.normal_px
    Xs, Ys = zs * a, zs * b
    du = [M[k:-k, 2 * k :] - M[k:-k, : -2 * k] for M in (Xs, Ys, zs)]
    dv = [M[2 * k :, k:-k] - M[: -2 * k, k:-k] for M in (Xs, Ys, zs)]
    n0 = du[1] * dv[2] - du[2] * dv[1]
    n1 = du[2] * dv[0] - du[0] * dv[2]
    n2 = du[0] * dv[1] - du[1] * dv[0]
    nzw = R[2, 0] * n0 + R[2, 1] * n1 + R[2, 2] * n2
    nn = n0 * n0 + n1 * n1 + n2 * n2
    nz2 = nzw * nzw
    up = np.zeros(z.shape, dtype=bool)
    up[k:-k, k:-k] = nz2 >= (params.min_upward_nz**2) * nn
    keep &= up
    if params.up_erode_px > 0:
        side = np.zeros(z.shape, dtype=np.uint8)
        side[k:-k, k:-k] = (nz2 < 0.25 * nn) & (nn > 0)
        side = cast(np.ndarray, cv2.morphologyEx(side, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)))
        side = cast(
            np.ndarray, cv2.dilate(side, np.ones((2 * params.up_erode_px + 1,) * 2, np.uint8))
        )
        keep &= side == 0
    Wx = dx * zs + t[0]
    Wy = dy * zs + t[1]
    pz = Wz[keep]
    px, py = Wx[keep], Wy[keep]
    # Below-deck returns: where the ray crosses the deck plane, exact whatever the depth noise.
    s = (deck - t[2]) / dz[below]
    qx = t[0] + dx[below] * s
    qy = t[1] + dy[below] * s
    pts = np.concatenate(
        [
            np.stack([px, py, pz], axis=1),
            np.stack([qx, qy, np.full_like(qx, deck)], axis=1),
        ]
    )
    inside = (pts[:, 0] >= x0) & (pts[:, 0] < x1) & (pts[:, 1] >= y0) & (pts[:, 1] < y1)
    return pts[inside]


def _roi(
    depth: np.ndarray,
    K: np.ndarray,
    T_world_optical: np.ndarray,
    box: tuple[float, float, float, float, float, float],
    deck: float,
    step: int = 8,
) -> tuple[int, int, int, int]:
    """Image rows r0:r1 and columns c0:c1 [px] whose returns can land in the box's footprint:
    every step-th pixel is unprojected (a return below the deck at its deck-plane crossing),
    and the rectangle of those inside is widened by 2 step px."""
    h, w = depth.shape
    x0, x1, y0, y1, _, _ = box
    zc = np.nan_to_num(depth[::step, ::step].astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    u = (np.arange(0, w, step) - K[0, 2]) / K[0, 0]
    v = (np.arange(0, h, step) - K[1, 2]) / K[1, 1]
    R, t = T_world_optical[:3, :3], T_world_optical[:3, 3]
    d = R[:, 0, None, None] * u[None, None, :] + R[:, 1, None, None] * v[None, :, None]
    d = d + R[:, 2, None, None]  # (3, h', w') ray direction per unit planar depth
    zc = np.where(d[2] * zc + t[2] < deck, (deck - t[2]) / np.minimum(d[2], -1e-9), zc)
    px, py = d[0] * zc + t[0], d[1] * zc + t[1]
    ins = (zc > 0) & (px >= x0) & (px < x1) & (py >= y0) & (py < y1)
    if not ins.any():
        return 0, 0, 0, 0
    rows, cols = np.flatnonzero(ins.any(axis=1)), np.flatnonzero(ins.any(axis=0))
    r0 = max(int(rows[0] - 2) * step, 0)
    r1 = min(int(rows[-1] + 3) * step, h)
    c0 = max(int(cols[0] - 2) * step, 0)
    c1 = min(int(cols[-1] + 3) * step, w)
    return r0, r1, c0, c1


def _lid_points(
    view: Any, box: tuple[float, float, float, float, float, float], deck: float
) -> tuple[np.ndarray, np.ndarray]:
    """The view's returns above the deck (more than 2 cm) inside the box's footprint, from
    the depth as the sensor gave it (no median, no edge or normal filter: the filters eat the
    1-2 pixels at every lid edge, which is where a rectangle's extent is read), as world points
    (N, 3) float32 [m], with each return's pixel footprint (N,) [m] (planar depth / fx)."""
    depth = np.asarray(view.depth, dtype=np.float32)
    K = np.asarray(view.K, dtype=np.float64)
    T = np.asarray(view.T_world_optical, dtype=np.float64)
    r0, r1, c0, c1 = _roi(depth, K, T, box, deck)
    z = np.nan_to_num(depth[r0:r1, c0:c1], nan=0.0, posinf=0.0, neginf=0.0)
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    rows, cols = np.nonzero(z > 0)
    zz = z[rows, cols]
    a = ((cols + c0 - cx) / fx).astype(np.float32)
    b = ((rows + r0 - cy) / fy).astype(np.float32)
    R = T[:3, :3].astype(np.float32)
    t = T[:3, 3].astype(np.float32)
    P = np.stack([a * zz, b * zz, zz], axis=1) @ R.T + t
    x0, x1, y0, y1, _, z1 = box
    keep = (
        (P[:, 2] > deck + 0.02)
        & (P[:, 2] <= z1)
        & (P[:, 0] >= x0)
        & (P[:, 0] < x1)
        & (P[:, 1] >= y0)
        & (P[:, 1] < y1)
    )
    return P[keep], (zz[keep] / np.float32(fx)).astype(np.float32)
