"""From lid patches to scored detections: each patch's rectangle (cv2.minAreaRect, refined on
its side edges), the height of what it stands on (_support_z), the colour check
(_colour_agreement) and the confidence that multiplies the scores (_one_lid, _ramp), over every
patch in a region, highest first (_detect); _carton_shaped tells a carton's lid from a wall top
or a sliver.
"""

from __future__ import annotations

import math
from typing import cast

import cv2
import numpy as np

from palletizer.core.detection.fit import _match, _rect_pose, _refine
from palletizer.core.detection.geometry import _Geometry
from palletizer.core.detection.model import Detection, DetectorParams
from palletizer.core.detection.segment import _lid_patches, _split_on_edges

__all__: list[str] = []


def _ramp(v: float, lo: float, hi: float) -> float:
    return float(min(1.0, max(0.0, (v - lo) / (hi - lo))))


def _colour_agreement(
    rgb: np.ndarray, lid: np.ndarray, level: np.ndarray, poly_uv: np.ndarray, tol: float
) -> float:
    """IoU of the rectangle of the lid's colour segment with the rectangle poly_uv (4, 2) [px]."""
    h, w = lid.shape
    x0, y0, bw, bh = cv2.boundingRect(poly_uv.astype(np.float32))
    m = max(bw, bh) // 4 + 4
    xa, ya = max(0, x0 - m), max(0, y0 - m)
    xb, yb = min(w, x0 + bw + m), min(h, y0 + bh + m)
    # Float Lab (the 8-bit conversion is ~8x slower), L scaled to the 8-bit range colour_tol
    # was set in.
    sub = cast(
        np.ndarray, cv2.cvtColor(rgb[ya:yb, xa:xb].astype(np.float32) / 255.0, cv2.COLOR_RGB2LAB)
    )
    sub[..., 0] *= 2.55
    core = cv2.erode(lid[ya:yb, xa:xb].astype(np.uint8), np.ones((7, 7), np.uint8)).astype(bool)
    if core.sum() < 20:
        return 0.0
    ref = np.median(sub[core], axis=0)
    near = ((sub - ref) ** 2).sum(axis=2) < tol * tol
    same = (near & level[ya:yb, xa:xb]).astype(np.uint8)
    same = cast(np.ndarray, cv2.morphologyEx(same, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(same, connectivity=4)
    if n <= 1:
        return 0.0
    ids, cnt = np.unique(labels[core & (labels > 0)], return_counts=True)
    if ids.size == 0:
        return 0.0
    seg = labels == ids[np.argmax(cnt)]
    pts = cv2.findNonZero(seg.astype(np.uint8))
    box = cv2.boxPoints(cv2.minAreaRect(pts))
    a = np.zeros_like(same)
    b = np.zeros_like(same)
    cv2.fillConvexPoly(a, np.round(box).astype(np.int32), 1)
    cv2.fillConvexPoly(b, np.round(poly_uv - [xa, ya]).astype(np.int32), 1)
    inter = float(np.count_nonzero(a & b))
    union = float(np.count_nonzero(a | b))
    return inter / union if union > 0 else 0.0


def _support_z(g: _Geometry, corners: np.ndarray, top: float, floor_z: float) -> float:
    """Height [m] of what a lid stands on: the highest flat level in a ring round it, else floor."""
    c = corners.mean(axis=0)
    ring = []
    for grow in (0.02, 0.035, 0.05):
        for k in range(4):
            a, b = corners[k], corners[(k + 1) % 4]
            t = np.linspace(0.1, 0.9, 12)
            pts = a + t[:, None] * (b - a)
            out = pts - c
            out /= np.linalg.norm(out, axis=1, keepdims=True)
            ring.append(pts + grow * out)
    pts = np.concatenate(ring)
    uv = g.project(pts, top)
    h, w = g.Z.shape
    ok = (uv[:, 0] >= 0) & (uv[:, 0] < w - 1) & (uv[:, 1] >= 0) & (uv[:, 1] < h - 1)
    if not ok.any():
        return floor_z
    iu = np.round(uv[ok]).astype(int)
    z = g.Z[iu[:, 1], iu[:, 0]]
    z = z[(z > floor_z + 0.005) & (z < top - 0.03)]
    if z.size < 6:
        return floor_z
    hist, edges = np.histogram(z, bins=np.arange(floor_z, top, 0.01))
    best = [i for i in range(len(hist)) if hist[i] >= 6]
    if not best:
        return floor_z
    i = max(best)
    sel = z[(z >= edges[i] - 0.01) & (z < edges[i + 1] + 0.01)]
    return float(np.median(sel))


def _detect(
    g: _Geometry,
    rgb: np.ndarray | None,
    region: np.ndarray,
    floor_z: float,
    p: DetectorParams,
    known_surface: bool,
    depth_below_top: float | None = None,
) -> list[Detection]:
    """Lids in region, highest first; g and rgb (H, W, 3) cover the same pixel window. With
    depth_below_top [m], patches lower than that under the highest lid of a carton's shape are
    not looked at (the truck picks from the top)."""
    K = g.K
    zs = g.Z[::4, ::4][region[::4, ::4] & g.valid[::4, ::4]]
    dist = float(np.median(np.abs(g.c[2] - zs))) if zs.size else 1.5
    px_area = (dist / K[0, 0]) * (dist / K[1, 1])
    min_px = p.min_area_m2 / px_area * 0.5
    patches = _lid_patches(g, region, floor_z, p, min_px)
    if not patches:
        return []
    if rgb is None:
        rgb = np.zeros((*g.Z.shape, 3), np.uint8)
    out: list[Detection] = []
    top = math.inf
    for mask, z0 in patches:
        if depth_below_top is not None and top < math.inf and z0 < top - depth_below_top:
            break
        for part in _split_on_edges(mask, rgb, min_px):
            det = _one_lid(g, rgb, part, z0, floor_z, p, known_surface)
            if det is not None:
                out.append(det)
                if top == math.inf and _carton_shaped(det, p):
                    top = det.top_z
    return out


def _carton_shaped(det: Detection, p: DetectorParams) -> bool:
    """A lid whose sides could be a catalogue carton's (not a wall top or a sliver)."""
    return p.min_side * 0.8 <= det.width and det.length <= p.envelope[0] * 1.2


def _one_lid(
    g: _Geometry,
    rgb: np.ndarray,
    mask: np.ndarray,
    z0: float,
    floor_z: float,
    p: DetectorParams,
    known_surface: bool,
) -> Detection | None:
    cnts, _ = cv2.findContours(mask.astype(np.uint8), cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    if not cnts:
        return None
    cnt = max(cnts, key=cv2.contourArea)
    uv = cnt.reshape(-1, 2).astype(float)
    xy = g.to_plane(uv, z0).astype(np.float32)
    rect = cv2.minAreaRect(xy)
    corners0 = cv2.boxPoints(rect).astype(float)
    (rw, rh) = rect[1]
    # Patch area on the lid plane vs its rectangle (a pixel's footprint grows with distance).
    patch_area = abs(cv2.contourArea(xy))
    fill = patch_area / max(rw * rh, 1e-9)
    hgt, wid = g.Z.shape
    touches_border = bool(
        (uv[:, 0] <= 1).any()
        or (uv[:, 1] <= 1).any()
        or (uv[:, 0] >= wid - 2).any()
        or (uv[:, 1] >= hgt - 2).any()
    )
    ref = _refine(g, rgb, corners0, z0, p)
    corners = ref.corners if math.isfinite(ref.residual) else corners0
    x, y, yaw, length, width = _rect_pose(corners)
    # Lines more than a few px off the outline mean the fit latched on something else.
    shift = float(np.max(np.linalg.norm(corners - _match(corners0, corners), axis=1)))
    if known_surface:
        support = floor_z
    else:
        support = _support_z(g, corners, z0, floor_z)
    height = z0 - support
    poly_uv = g.project(corners, z0)
    # Pixels clearly below the lid are told apart by depth already: colour judges the rest.
    level = ~g.valid | (g.Z > z0 - 2.0 * p.flat_tol)
    colour = _colour_agreement(rgb, mask, level, poly_uv, p.colour_tol)
    plausible = (
        p.min_side <= width <= length <= p.envelope[0]
        and width <= p.envelope[1]
        and not touches_border
        and shift < 0.02
    )
    res_mm = 1000.0 * ref.residual
    conf = (
        _ramp(ref.completeness, 0.5, 0.85)
        * _ramp(p.max_residual_mm - res_mm, 0.0, 0.5 * p.max_residual_mm)
        * _ramp(fill, 0.85, 0.95)
        * _ramp(colour, 0.75, 0.9)
        * (1.0 if plausible else 0.0)
    )
    return Detection(
        x,
        y,
        z0,
        yaw,
        length,
        width,
        height,
        float(conf),
        res_mm if math.isfinite(res_mm) else 1e9,
        float(ref.completeness),
        float(colour),
        float(fill),
    )
