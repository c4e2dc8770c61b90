"""A lid's rectangle to a fraction of a pixel: a line fitted to the colour edge (or the depth
step) along each side of the rough rectangle (_refine, _Rect) with its sampling, peak and
line helpers, the pose (centre, yaw, sides) of the fitted quadrilateral (_rect_pose), and the
corner matching that tells how far the fit moved from the outline (_match).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import cv2
import numpy as np

from palletizer.core.detection.geometry import _bbox, _Geometry
from palletizer.core.detection.model import DetectorParams

__all__: list[str] = []


def _sample(img: np.ndarray, uv: np.ndarray) -> np.ndarray:
    """Bilinear samples of a float32 image (H, W) or (H, W, C) at pixels uv (..., 2):
    (...) or (..., C)."""
    shape = uv.shape[:-1]
    m = uv.reshape(-1, 1, 2).astype(np.float32)
    out = cv2.remap(img, m[..., 0], m[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    return out.reshape(*shape, *img.shape[2:])


def _fit_line(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Total least-squares line through pts (N, 2): point, unit direction, RMS residual."""
    c = pts.mean(axis=0)
    _, s, vt = np.linalg.svd(pts - c, full_matrices=False)
    return c, vt[0], float(s[1] / math.sqrt(len(pts)))


def _intersect(p1: np.ndarray, d1: np.ndarray, p2: np.ndarray, d2: np.ndarray) -> np.ndarray:
    A = np.column_stack([d1, -d2])
    t = np.linalg.solve(A, p2 - p1)
    return cast(np.ndarray, p1 + t[0] * d1)


# [px] a lid's colour edge lies this close to its depth step (the 5 x 5 median and a side face
# seen at a slant move the step by up to ~1.5 px; a lower lid's outline 2.7 px out is not taken).
_EDGE_TOL_PX = 2.0


@dataclass(frozen=True)
class _Rect:
    corners: np.ndarray  # (4, 2) world XY, in order round the rectangle
    residual: float  # [m]
    completeness: float


def _peak_offset(gn: np.ndarray, j: np.ndarray, offs: np.ndarray) -> np.ndarray:
    """Sub-pixel offsets [px] of the profile peaks at indices j (one per row of gn (N, M))."""
    r = np.arange(len(j))
    y0, y1, y2 = gn[r, j - 1], gn[r, j], gn[r, j + 1]
    den = y0 - 2 * y1 + y2
    sub = np.where(np.abs(den) > 1e-6, 0.5 * (y0 - y2) / np.where(den == 0, 1, den), 0.0)
    return cast(np.ndarray, offs[j] + np.clip(sub, -0.5, 0.5) * (offs[1] - offs[0]))


def _refine(
    g: _Geometry, rgb: np.ndarray, corners: np.ndarray, z0: float, p: DetectorParams
) -> _Rect:
    """Fit a line to the colour edge along each side of the rectangle (world corners (4, 2)).

    Along each side's normal the depth step of the lid is found first; the colour edge taken is
    the innermost one within _EDGE_TOL_PX of it. Farther out lie edges that are not the lid's:
    a lower neighbour's outline, the bottom of a side face seen off the optical axis (their
    contrast is often the strongest in reach, and the strongest used to be taken: up to 18 mm
    wide). A side with too few colour edges (a lower lid of the same colour next to it) falls
    back to the depth step, scaled so that a min_height step reads as a strong edge.
    """
    h, w = g.Z.shape
    x0, y0, x1, y1 = _bbox(g.project(corners, z0), w, h, int(p.edge_search_px) + 4)
    win = (slice(y0, y1), slice(x0, x1))
    step = np.clip((g.Z[win] - (z0 - p.min_height)) / p.min_height, 0.0, 1.0) * 255.0
    step = np.where(g.valid[win], step, 0.0).astype(np.float32)
    hx = cv2.Sobel(step, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    hy = cv2.Sobel(step, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    # Per-channel gradients: two lids of one brightness and different hue (orange on yellow)
    # barely differ in grey, and their edge is the one the lid's side is measured on.
    f = rgb[win].astype(np.float32)
    gx = cv2.Sobel(f, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(f, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    hw, hh = x1 - x0, y1 - y0
    centre = corners.mean(axis=0)
    uvc = g.project(centre[None, :], z0)[0] - (x0, y0)
    offs = np.arange(-p.edge_search_px, p.edge_search_px + 0.25, 0.5)
    lines: list[tuple[np.ndarray, np.ndarray] | None] = []
    found = total = 0
    res2 = []
    for k in range(4):
        a, b = corners[k], corners[(k + 1) % 4]
        n_s = max(8, int(np.linalg.norm(b - a) / 0.004))
        t = np.linspace(0.08, 0.92, n_s)
        pts = a + t[:, None] * (b - a)
        uv = g.project(pts, z0) - (x0, y0)
        # Image normal of the side, pointing out of the lid.
        e = uv[-1] - uv[0]
        nrm = np.array([-e[1], e[0]]) / (np.linalg.norm(e) + 1e-12)
        if np.dot(uv.mean(axis=0) - uvc, nrm) < 0:
            nrm = -nrm
        prof_uv = uv[:, None, :] + offs[None, :, None] * nrm
        inside = (
            (prof_uv[..., 0] >= 1)
            & (prof_uv[..., 0] <= hw - 2)
            & (prof_uv[..., 1] >= 1)
            & (prof_uv[..., 1] <= hh - 2)
        ).all(axis=1)
        total += len(uv)
        gd = np.abs(_sample(hx, prof_uv) * nrm[0] + _sample(hy, prof_uv) * nrm[1])
        jd = np.clip(np.argmax(gd, axis=1), 1, len(offs) - 2)
        d_ok = inside & (gd[np.arange(len(jd)), jd] >= p.edge_min_grad)
        od = _peak_offset(gd, jd, offs)
        # Where a sample saw no depth step, the side's median step stands in.
        od = np.where(d_ok, od, float(np.median(od[d_ok])) if d_ok.any() else 0.0)
        # The step is blocky (the sensor's edge returns, the median): the side's median locates
        # the lid's edge along the whole side.
        o_side = float(np.median(od))
        gc = np.linalg.norm(_sample(gx, prof_uv) * nrm[0] + _sample(gy, prof_uv) * nrm[1], axis=-1)
        peak = np.zeros_like(gc, dtype=bool)
        peak[:, 1:-1] = (
            (gc[:, 1:-1] >= gc[:, :-2])
            & (gc[:, 1:-1] > gc[:, 2:])
            & (gc[:, 1:-1] >= p.edge_min_grad)
        )
        peak &= np.abs(offs - o_side)[None, :] <= _EDGE_TOL_PX
        c_ok = inside & peak.any(axis=1)
        jc = np.clip(np.argmax(peak, axis=1), 1, len(offs) - 2)  # the innermost
        if c_ok.sum() >= 0.5 * len(uv):
            ok, off = c_ok, _peak_offset(gc, jc, offs)
        else:
            ok, off = d_ok, od
        if ok.sum() < 4:
            lines.append(None)
            continue
        edge_uv = uv[ok] + off[ok, None] * nrm + (x0, y0)
        xy = g.to_plane(edge_uv, z0)
        # One pass of outlier rejection: a corner of a neighbour or a stray edge.
        c0, d0, _ = _fit_line(xy)
        dist = np.abs((xy - c0) @ np.array([-d0[1], d0[0]]))
        keep = dist < max(3.0 * np.median(dist) * 1.4826, 0.0015)
        if keep.sum() < 4:
            lines.append(None)
            continue
        found += int(keep.sum())
        c1, d1, _ = _fit_line(xy[keep])
        nd = np.array([-d1[1], d1[0]])
        res2.append(((xy[keep] - c1) @ nd) ** 2)
        lines.append((c1, d1))
    completeness = found / max(total, 1)
    sides = [ln for ln in lines if ln is not None]
    if len(sides) < len(lines):
        return _Rect(corners, math.inf, completeness)
    out = np.array([_intersect(*sides[(k - 1) % 4], *sides[k]) for k in range(4)])
    rms = float(math.sqrt(np.concatenate(res2).mean())) if res2 else math.inf
    return _Rect(out, rms, completeness)


def _rect_pose(corners: np.ndarray) -> tuple[float, float, float, float, float]:
    """(x, y, yaw, length, width) of a quadrilateral (4, 2) taken as a rectangle."""
    s = [corners[(k + 1) % 4] - corners[k] for k in range(4)]
    da, db = s[0] - s[2], s[1] - s[3]  # opposite sides run opposite ways round the loop
    la, lb = 0.5 * np.linalg.norm(da), 0.5 * np.linalg.norm(db)
    if la < lb:
        da, db, la, lb = db, da, lb, la
    # The short pair turned a quarter, on the long pair's side, averages both directions.
    perp = np.array([db[1], -db[0]])
    if np.dot(perp, da) < 0:
        perp = -perp
    d = da / max(la, 1e-12) + perp / max(lb, 1e-12)
    yaw = (math.atan2(d[1], d[0]) + math.pi / 2) % math.pi - math.pi / 2
    if yaw <= -math.pi / 2 + 1e-12:
        yaw += math.pi
    cx, cy = corners.mean(axis=0)
    return float(cx), float(cy), float(yaw), float(la), float(lb)


def _match(ref: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """ref's corners reordered to lie nearest pts' corners (same cyclic order, any start)."""
    best, best_d = ref, math.inf
    for s in range(4):
        for r in (ref, ref[::-1]):
            cand = np.roll(r, s, axis=0)
            d = float(np.sum(np.linalg.norm(cand - pts, axis=1)))
            if d < best_d:
                best, best_d = cand, d
    return best
