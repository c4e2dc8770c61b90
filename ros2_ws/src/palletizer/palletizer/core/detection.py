"""Carton detection at the pick: lids segmented in depth, rectangles refined on colour edges.

A lid is a flat patch of depth standing above the surface it rests on. Its rectangle starts as
cv2.minAreaRect of the patch's outline (projected onto the lid plane) and is refined by fitting
a line to the colour-image edge found along each side, to a fraction of a pixel. The
confidence multiplies four scores in [0, 1]: how much of each side showed an edge, the line-fit
residual, how well the patch fills its rectangle, and whether the colour segment of the lid has
the same rectangle as the depth one (a touching neighbour of the same colour does not). A lid
outside the catalogue envelope (two touching cartons read as one) scores 0.

Conventions: world frame, Z up, metres and radians. yaw is the direction of the longer side
(length), wrapped to (-pi/2, pi/2]: a rectangle is symmetric under a half turn, and catalogue
cartons have length >= width along their x axis, so the yaw equals the carton's own yaw modulo
pi. Near-square lids (length - width below `square_tol`) leave the quarter turn open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, cast

import cv2
import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.errors import PalletizerError, close_match
from palletizer.core.heightmap_fusion import RobotBody
from palletizer.core.views import CameraView

__all__ = [
    'DetectResult',
    'Detection',
    'DetectionError',
    'DetectorParams',
    'HeldMeasure',
    'detect_station',
    'detect_truck',
    'detection_errors',
    'held_height',
    'held_segment',
    'held_top_z',
    'measure_held_height',
]


class DetectionError(PalletizerError):
    """A detector setting or input the detector cannot use."""


@dataclass(frozen=True)
class Detection:
    """One carton lid.

    x, y: lid centre [m]; top_z: lid height [m]; yaw: direction of the length [rad] in
    (-pi/2, pi/2]; length >= width: lid sides [m]; height: top_z minus what the carton stands on
    [m]; confidence in [0, 1]; residual_mm: RMS distance of the edge points to their side lines
    [mm]; edge_completeness: fraction of side samples that found an edge; colour_agreement: IoU of
    the colour segment's rectangle and the depth one; fill: patch area / rectangle area.
    """

    x: float
    y: float
    top_z: float
    yaw: float
    length: float
    width: float
    height: float
    confidence: float
    residual_mm: float
    edge_completeness: float
    colour_agreement: float
    fill: float = 1.0

    def observation(self, package_id: str) -> Observation:
        """The pick contract: geometric centre (top_z - height / 2) and dims (L, W, H)."""
        return Observation(
            package_id,
            (self.x, self.y, self.top_z - self.height / 2.0),
            self.yaw,
            (self.length, self.width, self.height),
            self.confidence,
        )


@dataclass(frozen=True)
class DetectResult:
    """Every lid seen, the one to pick (None when there is no confident one), and why."""

    detections: tuple[Detection, ...]
    chosen: Detection | None
    ambiguous: bool
    reason: str


@dataclass(frozen=True)
class DetectorParams:
    """configs/perception.yaml `detector`. Lengths [m], angles [deg] where named so."""

    camera: str = 'station'
    truck_cameras: tuple[str, ...] = ('station',)
    min_confidence: float = 0.5
    station_radius: float = 0.45  # [m] lids farther from the station point are not looked at
    pick_radius: float = 0.20  # [m] the chosen lid's centre lies this close to the station point
    min_height: float = 0.03  # [m] above the surface to count as a carton
    flat_tol: float = 0.012  # [m] lid depth band; a half of it between neighbours parts lids
    min_area_m2: float = 0.008  # smallest lid (catalogue pouch_xs: 0.14 x 0.11 = 0.015)
    envelope: tuple[float, float] = (0.56, 0.41)  # [m] largest length, width (catalogue + 1 cm)
    min_side: float = 0.09  # [m]
    edge_search_px: float = 6.0  # [px] either side of the depth outline
    edge_min_grad: float = 6.0  # [levels / px, norm over RGB] weakest step counted as an edge
    max_residual_mm: float = 2.5  # [mm] residual score falls to 0 here
    colour_tol: float = 28.0  # [Lab units] colour distance from the lid's median
    square_tol: float = 0.01  # [m] length - width below this: yaw open by a quarter turn
    # Truck ties (cell.yaml truck.tie_band and tie_point set the rule, shared with the source).
    tie_margin: float = 0.003  # [m] a top this close to the band's edge is too close to call
    tie_near: float = 0.01  # [m] two band lids this close in distance to tie_point: too close
    bay_margin: float = 0.012  # [m] bay strip along the walls not looked at (the load keeps 0.02)
    # In-hand height (measure_held_height).
    held_cameras: tuple[str, ...] = ('truck_side',)
    held_margin: float = 0.004  # [m] footprint grown by this on each side
    held_gap: float = 0.03  # [m] air this tall below the carton ends it
    held_pct: float = 1.0  # [%] the bottom is this low percentile of the carton's points

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> DetectorParams:
        """From the `detector` mapping; unknown keys are errors naming the valid ones."""
        names = [f.name for f in fields(cls)]
        kw: dict[str, Any] = {}
        for key, value in cfg.items():
            if key not in names:
                raise DetectionError(
                    f'detector.{key}: unknown key; expected one of {", ".join(names)}'
                    f'{close_match(str(key), names)}'
                )
            if value is None:  # an optional key left out of the file: the default
                continue
            if key in ('truck_cameras', 'held_cameras'):
                kw[key] = tuple(str(v) for v in value)
            elif key == 'envelope':
                kw[key] = (float(value[0]), float(value[1]))
            elif key == 'camera':
                kw[key] = str(value)
            else:
                kw[key] = float(value)
        return cls(**kw)


def detection_errors(
    det: Detection,
    true_pos: Sequence[float],
    true_yaw: float,
    true_dims: Sequence[float],
) -> dict[str, float]:
    """Errors of a detection against truth: centre (3,) [m], yaw [rad], dims (L, W, H) [m].

    pos_mm: XY distance of the lid centres; z_mm: centre height; yaw_deg: modulo a half turn,
    or a quarter turn when the true footprint is square within 1 cm; dims_mm: worst of L, W, H
    with the true sides sorted (length >= width).
    """
    tp = np.asarray(true_pos, dtype=float)
    L, W = sorted((float(true_dims[0]), float(true_dims[1])), reverse=True)
    H = float(true_dims[2])
    period = math.pi / 2 if L - W < 0.01 else math.pi
    dyaw = (det.yaw - true_yaw + period / 2) % period - period / 2
    dims = (abs(det.length - L), abs(det.width - W), abs(det.height - H))
    return {
        'pos_mm': 1000.0 * math.hypot(det.x - tp[0], det.y - tp[1]),
        'z_mm': 1000.0 * abs(det.top_z - det.height / 2 - tp[2]),
        'yaw_deg': abs(math.degrees(dyaw)),
        'dims_mm': 1000.0 * max(dims),
        'lw_mm': 1000.0 * max(dims[:2]),
        'h_mm': 1000.0 * dims[2],
    }


# ---------------------------------------------------------------------------------------------
# Geometry of one view.


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


# ---------------------------------------------------------------------------------------------
# Lids.


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


def _bbox(uv: np.ndarray, w: int, h: int, pad: int) -> tuple[int, int, int, int]:
    """(x0, y0, x1, y1) of pixels uv (N, 2) grown by pad, clipped to a w x h image."""
    x0 = int(np.clip(math.floor(uv[:, 0].min()) - pad, 0, w))
    y0 = int(np.clip(math.floor(uv[:, 1].min()) - pad, 0, h))
    x1 = int(np.clip(math.ceil(uv[:, 0].max()) + pad + 1, 0, w))
    y1 = int(np.clip(math.ceil(uv[:, 1].max()) + pad + 1, 0, h))
    return x0, y0, x1, y1


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


# ---------------------------------------------------------------------------------------------
# Entry points.

_TALLEST = 0.6  # [m] above its surface no carton's lid lies (catalogue.yaml: tallest 0.30)


def _crop(rgb: np.ndarray | None, roi: tuple[int, int, int, int]) -> np.ndarray | None:
    u0, v0, u1, v1 = roi
    return None if rgb is None else np.ascontiguousarray(rgb[v0:v1, u0:u1])


def detect_station(
    view: CameraView,
    params: DetectorParams,
    surface_z: float,
    station_xy: tuple[float, float],
) -> DetectResult:
    """Lids on a table or conveyor top at surface_z [m]; chosen: the confident lid nearest the
    station point station_xy [m] within pick_radius. None (ambiguous) when the nearest lid there
    is not confident."""
    sx, sy = station_xy
    r = params.station_radius
    roi = _roi(view, (sx - r, sy - r), (sx + r, sy + r), surface_z, surface_z + _TALLEST)
    g = _geometry(view, roi)
    region = (np.abs(g.X - sx) < r) & (np.abs(g.Y - sy) < r)
    dets = _detect(g, _crop(view.rgb, roi), region, surface_z, params, known_surface=True)
    dets.sort(key=lambda d: math.hypot(d.x - sx, d.y - sy))
    near = [d for d in dets if math.hypot(d.x - sx, d.y - sy) < params.pick_radius]
    if not near:
        return DetectResult(tuple(dets), None, False, 'no carton at the station')
    best = near[0]
    if best.confidence < params.min_confidence:
        return DetectResult(
            tuple(dets),
            None,
            True,
            f'the lid at the station is not one clear rectangle (confidence {best.confidence:.2f})',
        )
    return DetectResult(tuple(dets), best, False, 'ok')


def detect_truck(
    views: Sequence[CameraView],
    params: DetectorParams,
    bay: Mapping[str, Any],
) -> DetectResult:
    """The carton the truck source presents (configs/cell.yaml `truck`: origin, size, floor,
    tie_band, tie_point [m]).

    The rule is the source's: the highest lid, and of the lids within tie_band of it, the one
    whose centre is nearest tie_point. Ambiguous (nothing chosen) when a lid's top lies within
    tie_margin of the band's edge and it would win the tie (the choice depends on which side
    of the edge it is), when the two nearest band lids are within tie_near of each other in
    distance, or when the chosen lid is not confident. Of several views the first that
    sees a lid decides.
    """
    if not views:
        raise DetectionError('detect_truck: no views; expected at least one camera view')
    x0, y0 = (float(v) for v in bay['origin'])
    sx, sy = (float(v) for v in bay['size'])
    floor = float(bay.get('floor', 0.02))
    band = float(bay.get('tie_band', 0.030))
    tx, ty = (float(v) for v in bay.get('tie_point', (0.60, -0.72)))
    m = params.bay_margin
    last = DetectResult((), None, False, 'no carton in the trailer')
    z_hi = floor + float(bay.get('max_stack_height', 1.0)) + _TALLEST
    for view in views:
        roi = _roi(view, (x0 + m, y0 + m), (x0 + sx - m, y0 + sy - m), floor, z_hi)
        g = _geometry(view, roi)
        region = (g.X > x0 + m) & (g.X < x0 + sx - m) & (g.Y > y0 + m) & (g.Y < y0 + sy - m)
        dets = _detect(
            g,
            _crop(view.rgb, roi),
            region,
            floor,
            params,
            False,
            depth_below_top=band + 2 * params.tie_margin,
        )
        lids = sorted((d for d in dets if _carton_shaped(d, params)), key=lambda d: -d.top_z)
        if not lids:
            continue
        return _truck_choice(tuple(dets), lids, params, band, (tx, ty))
    return last


def _truck_choice(
    dets: tuple[Detection, ...],
    lids: list[Detection],
    p: DetectorParams,
    band: float,
    tie_point: tuple[float, float],
) -> DetectResult:
    """The tie rule on lids sorted highest first (see detect_truck)."""
    edge = lids[0].top_z - band

    def dist(d: Detection) -> float:
        return math.hypot(d.x - tie_point[0], d.y - tie_point[1])

    def key(d: Detection) -> tuple[float, float]:
        return (dist(d), d.x)

    # A lid within tie_margin of the band's edge may be in the tie or not; it matters only
    # when it would win the tie (nearer tie_point than every lid surely in it).
    sure = [d for d in lids if d.top_z >= edge + p.tie_margin]
    close = [d for d in lids[1:] if abs(d.top_z - edge) < p.tie_margin]
    first = min(sure, key=key) if sure else None
    deciding = [d for d in close if first is None or key(d) < key(first)]
    if deciding:
        return DetectResult(
            dets,
            None,
            True,
            f'a lid {1000 * (lids[0].top_z - deciding[0].top_z):.1f} mm below the highest and '
            f'nearer the robot: too close to the {1000 * band:.0f} mm tie band to call',
        )
    tied = sorted(sure + close, key=key)
    best = tied[0]
    if len(tied) > 1 and dist(tied[1]) - dist(best) < p.tie_near:
        return DetectResult(
            dets,
            None,
            True,
            f'{len(tied)} lids equally high and within {1000 * p.tie_near:.0f} mm equally near '
            'the robot',
        )
    if best.confidence < p.min_confidence:
        return DetectResult(
            dets,
            None,
            True,
            f'the lid to pick is not one clear rectangle (confidence {best.confidence:.2f})',
        )
    reason = 'ok' if len(tied) == 1 else f'{len(tied)} lids equally high: the nearest the robot'
    return DetectResult(dets, best, False, reason)


# ---------------------------------------------------------------------------------------------
# The held carton's height.


@dataclass(frozen=True)
class HeldMeasure:
    """The height of a carton in the cups [m] (0 when not measured), confidence in [0, 1], why;
    bottom: the carton's bottom [m, world z]; points: how many carton points were seen."""

    height: float
    confidence: float
    reason: str
    bottom: float = 0.0
    points: int = 0


def held_top_z(body: RobotBody, q: np.ndarray, cup_gap: float) -> float:
    """The held lid's height [m]: the TCP (the cup faces, body.gripper[2] along the flange z
    from the flange) less the cup gap at sealing."""
    F = body.frames(np.asarray(q, dtype=float))[-1]
    return float(F[2, 3] + F[2, 2] * body.gripper[2] - cup_gap)


def held_segment(z: np.ndarray, gap: float, stray: int = 3) -> np.ndarray:
    """The carton's points: z [m] sorted from the lid down, cut at the first air gap > gap [m].

    A run of at most `stray` points before a gap is dropped first: flying pixels at the lid's
    edge (the cups and the arm around them are filtered out) once left a single point above a
    gap, and the measure read that point as the whole carton (a graph run of level 31 seed 2).
    """
    z = np.asarray(z, dtype=float)
    while True:
        gaps = np.flatnonzero(-np.diff(z) > gap)
        if not gaps.size:
            return z
        if gaps[0] + 1 > stray:
            return z[: gaps[0] + 1]
        z = z[gaps[0] + 1 :]


def measure_held_height(
    views: Sequence[CameraView],
    params: DetectorParams,
    body: RobotBody,
    q: np.ndarray,
    lid_dims: tuple[float, float],
    carton_yaw: float,
    top_z: float,
    centre_xy: tuple[float, float] | None = None,
) -> HeldMeasure:
    """Height of the carton hanging in the cups, from cameras that see it from the side.

    Points inside the vertical prism of the lid (lid_dims L x W [m] at carton_yaw [rad],
    grown by held_margin, centred on centre_xy [m], default the TCP) and below the lid at top_z
    [m] are kept, the arm's (body.contains at q) dropped; from the lid down they run to the
    first air gap of held_gap (the lift leaves the column below at least 0.18 m clear); the
    bottom is their held_pct low percentile. q (6,) [rad] is the arm at the capture.
    """
    if not views:
        raise DetectionError('measure_held_height: no views; expected at least one camera view')
    q = np.asarray(q, dtype=float)
    if centre_xy is None:
        F = body.frames(q)[-1]
        tcp = F[:3, 3] + F[:3, 2] * body.gripper[2]
        centre_xy = (float(tcp[0]), float(tcp[1]))
    cx, cy = centre_xy
    c, s = math.cos(carton_yaw), math.sin(carton_yaw)
    hl = lid_dims[0] / 2 + params.held_margin
    hw = lid_dims[1] / 2 + params.held_margin
    deepest = top_z - 1.5 * params.envelope[0]  # no carton is taller than its longest side x 1.5
    zs = []
    for view in views:
        d = np.asarray(view.depth, dtype=np.float32)
        d = np.where(np.isfinite(d), d, 0.0).astype(np.float32)
        valid = d > 0
        K = np.asarray(view.K, dtype=float)
        T = np.asarray(view.T_world_optical, dtype=float)
        v, u = np.nonzero(valid)
        z = d[v, u].astype(float)
        pc = np.stack([(u - K[0, 2]) / K[0, 0] * z, (v - K[1, 2]) / K[1, 1] * z, z], axis=1)
        P = pc @ T[:3, :3].T + T[:3, 3]
        dx, dy = P[:, 0] - cx, P[:, 1] - cy
        inside = (
            (np.abs(c * dx + s * dy) <= hl)
            & (np.abs(-s * dx + c * dy) <= hw)
            & (P[:, 2] < top_z - 0.002)
            & (P[:, 2] > deepest)
        )
        P = P[inside]
        if len(P):
            P = P[~body.contains(P, q, None)]
        zs.append(P[:, 2])
    z = np.sort(np.concatenate(zs))[::-1] if zs else np.zeros(0)
    if z.size < 20:
        return HeldMeasure(0.0, 0.0, f'{z.size} points of the held carton seen; expected 20')
    # From the lid down to the first air gap.
    seg = held_segment(z, params.held_gap)
    if seg.size < 20:
        return HeldMeasure(0.0, 0.0, f'{seg.size} points below the lid before an air gap')
    if top_z - seg[0] > 0.08:
        return HeldMeasure(
            0.0, 0.0, f'nothing within 80 mm under the lid (first point {top_z - seg[0]:.3f} m)'
        )
    bottom = float(np.percentile(seg, params.held_pct))
    height = top_z - bottom
    # How densely the lowest 2 cm are seen: a carton whose lower part is hidden reads short.
    low = int(np.count_nonzero(seg < bottom + 0.02))
    conf = _ramp(float(low), 5.0, 40.0) * _ramp(float(seg.size), 20.0, 200.0)
    return HeldMeasure(float(height), float(conf), 'ok', bottom, int(seg.size))


def held_height(
    views: Sequence[CameraView],
    params: DetectorParams,
    body: RobotBody,
    q: np.ndarray,
    observation: Observation,
    tcp_offset: float,
    cup_gap: float,
) -> HeldMeasure:
    """measure_held_height for a picked observation: its lid sides and yaw, centred on its
    x, y (the lift is straight up), the lid at the TCP (tcp_offset [m] past the flange) less
    cup_gap [m]."""
    if abs(tcp_offset - body.gripper[2]) > 1e-9:
        body = RobotBody(
            body.base_pos, body.base_quat, body.dh, (*body.gripper[:2], tcp_offset), body.margin
        )
    L, W, _ = observation.dims_guess
    x, y, _ = observation.position
    return measure_held_height(
        views,
        params,
        body,
        q,
        (float(L), float(W)),
        float(observation.yaw),
        held_top_z(body, q, cup_gap),
        (float(x), float(y)),
    )
