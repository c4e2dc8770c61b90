"""The held carton's label: which of its four sides carries it, from cameras that see the sides.

A shipping label is white paper on brown board: low saturation where the board is saturated,
whatever the light. With the carton in the cups, its box is known (the detection's footprint
and yaw, the lid's height from the arm, the height from the detection or the in-hand measure),
so each side's label region projects into every camera that faces it; the pixels whose depth
agrees with the face (nothing in front) are read. A face whose region reads as label carries
it. A type's label face kind is product data (an end or a long side, configs/catalogue.yaml);
which of the two it is, the carton's half turn, is what the cameras tell: where one face of the
pair was seen without a label, the label is on the other.

Faces are named in the observation's frame: +x along its yaw (the length), +y to the left.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.detection.held import held_top_z
from palletizer.core.detection.model import DetectorParams
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.views import CameraView

__all__ = ['FACES', 'LabelSeen', 'detect_label', 'face_normal', 'opposite', 'read_held_label']

FACES = ('+x', '-x', '+y', '-y')
# A face is read by a camera that sees it at most this far from head-on [deg].
_MAX_INCIDENCE_DEG = 75.0
# [m] a region pixel's depth this much nearer than the face: something stands in front.
_OCCLUSION_M = 0.02
# The label region: this share of the label's size, centred on the face (the label is printed
# centred; the margin absorbs the footprint's and the lid height's errors).
_REGION = 0.6
_SAMPLES = 9  # per side of the region's grid


def face_normal(face: str, yaw: float) -> tuple[float, float]:
    """World xy unit normal of an observation-frame face of a carton turned by `yaw` [rad]."""
    lx, ly = {'+x': (1.0, 0.0), '-x': (-1.0, 0.0), '+y': (0.0, 1.0), '-y': (0.0, -1.0)}[face]
    c, s = math.cos(yaw), math.sin(yaw)
    return (c * lx - s * ly, s * lx + c * ly)


def opposite(face: str) -> str:
    """The face across the carton ('+x' <-> '-x', '+y' <-> '-y')."""
    return ('-' if face[0] == '+' else '+') + face[1]


@dataclass(frozen=True)
class LabelSeen:
    """face: the label's face in the observation frame, '' when not known (with why in reason);
    shares: per face read, the share of its label region that reads as label; points: per face
    read, how many region pixels were read; how: 'seen' (the label itself) or 'other side' (the
    pair's other face was seen bare)."""

    face: str
    shares: dict[str, float] = field(default_factory=dict)
    points: dict[str, int] = field(default_factory=dict)
    how: str = ''
    reason: str = ''


def _region(face: str, dims: Sequence[float], label_size: Sequence[float]) -> np.ndarray:
    """(N, 3) points of the label region in the carton frame (centre at the origin)."""
    L, W, H = dims
    across = W if face[1] == 'x' else L
    w = _REGION * min(label_size[0], 0.9 * across)
    h = _REGION * min(label_size[1], 0.9 * H)
    a = np.linspace(-w / 2, w / 2, _SAMPLES)
    v = np.linspace(-h / 2, h / 2, _SAMPLES)
    aa, vv = (g.ravel() for g in np.meshgrid(a, v))
    sign = 1.0 if face[0] == '+' else -1.0
    if face[1] == 'x':
        return np.column_stack([np.full_like(aa, sign * L / 2), aa, vv])
    return np.column_stack([aa, np.full_like(aa, sign * W / 2), vv])


def _read(view: CameraView, pts: np.ndarray, p: DetectorParams) -> tuple[int, int]:
    """(label pixels, pixels read) of world points `pts` (N, 3) in one view."""
    if view.rgb is None:
        return 0, 0
    T = np.asarray(view.T_world_optical, dtype=float)
    cam = (pts - T[:3, 3]) @ T[:3, :3]  # world -> optical
    z = cam[:, 2]
    ok = z > 1e-3
    uv = (cam[ok] / z[ok, None]) @ np.asarray(view.K, dtype=float).T
    u = np.round(uv[:, 0]).astype(int)
    v = np.round(uv[:, 1]).astype(int)
    Hpx, Wpx = view.shape
    inside = (u >= 0) & (u < Wpx) & (v >= 0) & (v < Hpx)
    u, v, zf = u[inside], v[inside], z[ok][inside]
    d = np.asarray(view.depth, dtype=float)[v, u]
    # A pixel with no depth return is read on colour alone; one with a nearer return is hidden.
    seen = ~(np.isfinite(d) & (d > 0) & (d < zf - _OCCLUSION_M))
    if not seen.any():
        return 0, 0
    rgb = np.asarray(view.rgb, dtype=float)[v[seen], u[seen]]
    hi, lo = rgb.max(axis=1), rgb.min(axis=1)
    sat = np.where(hi > 0, (hi - lo) / np.maximum(hi, 1e-9), 1.0)
    white = (sat <= p.label_max_saturation) & (hi >= 40.0)
    return int(white.sum()), int(seen.sum())


def detect_label(
    views: Sequence[CameraView],
    observation: Observation,
    top_z: float,
    kind: str,
    label_size: Sequence[float],
    p: DetectorParams,
) -> LabelSeen:
    """The label face of the held carton (observation's footprint and yaw, its lid at `top_z`
    [m]); kind: 'x' (an end carries it), 'y' (a long side) or '' (not known: only a label seen
    decides)."""
    L, W, H = observation.dims_guess
    x, y, _ = observation.position
    yaw = observation.yaw
    centre = np.array([x, y, top_z - H / 2.0])
    c, s = math.cos(yaw), math.sin(yaw)
    R = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    cos_max = math.cos(math.radians(_MAX_INCIDENCE_DEG))
    shares: dict[str, float] = {}
    points: dict[str, int] = {}
    for face in FACES:
        pts = centre + _region(face, (L, W, H), label_size) @ R.T
        nx, ny = face_normal(face, yaw)
        n = np.array([nx, ny, 0.0])
        white = read = 0
        for view in views:
            cam = np.asarray(view.T_world_optical, dtype=float)[:3, 3]
            to_cam = cam - pts.mean(axis=0)
            if float(n @ to_cam) < cos_max * float(np.linalg.norm(to_cam)):
                continue  # the camera sees the face edge-on or from behind
            got, count = _read(view, pts, p)
            white, read = white + got, read + count
        if read >= p.label_min_points:
            shares[face] = round(white / read, 3)
            points[face] = read
    if shares:
        best = max(shares, key=lambda f: shares[f])
        if shares[best] >= p.label_share:
            return LabelSeen(best, shares, points, how='seen')
    pair = ('+x', '-x') if kind == 'x' else ('+y', '-y') if kind == 'y' else ()
    bare = [f for f in pair if shares.get(f, 1.0) <= p.label_clear]
    if len(bare) == 1:
        return LabelSeen(opposite(bare[0]), shares, points, how='other side')
    why = (
        'no side of the carton was seen'
        if not shares
        else f'no label seen on {", ".join(sorted(shares))}'
        + (f' and both {kind} faces bare or unseen' if pair else '')
    )
    return LabelSeen('', shares, points, reason=why)


def read_held_label(
    views: Sequence[CameraView],
    observation: Observation,
    body: RobotBody,
    q: np.ndarray,
    cup_gap: float,
    catalogue: Any,
    type_name: str,
    p: DetectorParams,
) -> LabelSeen:
    """detect_label on the carton in the cups: its lid's height from the arm's joints `q`, its
    label face kind from the catalogue's `type_name` (the type its barcode names)."""
    kind = catalogue.rules(type_name).label
    return detect_label(
        views,
        observation,
        held_top_z(body, q, cup_gap),
        '' if kind == 'none' else kind[1],
        catalogue.label_size_m,
        p,
    )
