"""Lid segmentation: flat patches of depth standing above the surface, cut where the depth
steps between neighbouring pixels (_lid_patches), and a patch cut along the chromaticity edges
inside it, the seam between touching lids (_split_on_edges, _chroma_edges).
"""

from __future__ import annotations

from typing import cast

import cv2
import numpy as np

from palletizer.core.detection.geometry import _Geometry
from palletizer.core.detection.model import DetectorParams

__all__: list[str] = []


def _lid_patches(
    g: _Geometry, region: np.ndarray, floor_z: float, p: DetectorParams, min_px: float
) -> list[tuple[np.ndarray, float]]:
    """Flat patches (mask, height [m]) standing above floor_z inside region, highest first.

    A patch is a connected stretch of depth without a step of flat_tol / 2 between neighbouring
    pixels: a lid ends where the depth falls to a lower lid, a visible side face (a step of
    ~20 mm per pixel) or the floor. Cutting at steps, not at height bands, keeps a lid whole
    when another lid is less than a band lower (bands cut such a lid into noise-drawn pieces).
    """
    Z = g.Z
    above = region & g.valid & (Z > floor_z + p.min_height)
    if not above.any():
        return []
    thr = p.flat_tol / 2.0
    dx = np.abs(np.diff(Z, axis=1)) > thr
    dy = np.abs(np.diff(Z, axis=0)) > thr
    step = np.zeros_like(above)
    step[:, 1:] |= dx
    step[:, :-1] |= dx
    step[1:, :] |= dy
    step[:-1, :] |= dy
    n, lab, stats, _ = cv2.connectedComponentsWithStats(
        (above & ~step).astype(np.uint8), connectivity=4
    )
    out: list[tuple[np.ndarray, float]] = []
    kernel = np.ones((3, 3), np.uint8)
    for k in range(1, n):
        if stats[k, cv2.CC_STAT_AREA] < min_px:
            continue
        x, y, bw, bh = (int(v) for v in stats[k, :4])
        win = (slice(max(0, y - 2), y + bh + 2), slice(max(0, x - 2), x + bw + 2))
        m = lab[win] == k
        zk = float(np.median(Z[win][m]))
        # The pixel ring the step cut off, given back where it lies at the lid's level.
        ring = cv2.dilate(m.astype(np.uint8), kernel).astype(bool) & ~m
        m |= ring & above[win] & (np.abs(Z[win] - zk) < p.flat_tol)
        full = np.zeros_like(above)
        full[win] = m
        out.append((full, zk))
    out.sort(key=lambda t: -t[1])
    return out


def _chroma_edges(rgb: np.ndarray) -> np.ndarray:
    """Edges (bool, like rgb's first two axes) of the chromaticity of rgb (H, W, 3) uint8.

    Lids are split only along chromaticity edges: a shadow (the arm waiting above the station)
    changes brightness, not hue, and used to cut a lid in two.
    """
    f = rgb.astype(np.float32) + 1.0
    chroma = np.clip(f / f.sum(axis=2, keepdims=True) * 3 * 85, 0, 255).astype(np.uint8)
    return cast(np.ndarray, cv2.Canny(cv2.GaussianBlur(chroma, (3, 3), 0), 30, 80) > 0)


def _split_on_edges(mask: np.ndarray, rgb: np.ndarray, min_px: float) -> list[np.ndarray]:
    """A patch cut along the colour edges inside it (a seam between touching lids); mask and
    rgb (H, W, 3) cover the same pixels, the colour is looked at only round the patch."""
    ys, xs = np.nonzero(mask)
    y0, x0 = max(0, int(ys.min()) - 2), max(0, int(xs.min()) - 2)
    win = (slice(y0, int(ys.max()) + 3), slice(x0, int(xs.max()) + 3))
    sub = mask[win]
    inner = cv2.erode(sub.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool)
    seam = _chroma_edges(rgb[win]) & inner
    if seam.sum() < 20:
        return [mask]
    seam = cv2.dilate(seam.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool)
    # 8-connected: what these pieces have always been measured with (a bare 4 in second place
    # went to the `labels` output argument and was ignored, so OpenCV's default applied).
    n, lab, stats, _ = cv2.connectedComponentsWithStats(
        (sub & ~seam).astype(np.uint8), connectivity=8
    )
    parts = [lab == k for k in range(1, n) if stats[k, cv2.CC_STAT_AREA] >= min_px]
    if len(parts) <= 1:
        return [mask]
    # Give the seam pixels back to the nearest part so each keeps its full outline.
    grown = []
    for m in parts:
        full = np.zeros_like(mask)
        full[win] = cv2.dilate(m.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool) & sub
        grown.append(full)
    return grown
