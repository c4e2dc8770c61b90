"""The height of the carton held in the cups, measured from cameras that see it from the side
(measure_held_height, HeldMeasure), for a picked observation (held_height); the lid's height
from the arm (held_top_z) and the carton's points cut at the first air gap (held_segment).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.detection.lids import _ramp
from palletizer.core.detection.model import DetectionError, DetectorParams
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.views import CameraView

__all__ = [
    'HeldMeasure',
    'held_height',
    'held_bottom',
    'held_segment',
    'held_top_z',
    'measure_held_height',
    'world_points',
]


@dataclass(frozen=True)
class HeldMeasure:
    """The height of a carton in the cups [m] (0 when not measured), confidence in [0, 1], why;
    bottom: the carton's bottom [m, world z]; points: how many carton points were seen;
    hidden: the lowest points seen end where something nearer the camera stands in front of
    the carton (its bottom may lie lower: the height is then at least `height`)."""

    height: float
    confidence: float
    reason: str
    bottom: float = 0.0
    points: int = 0
    hidden: bool = False


def world_points(view: CameraView) -> np.ndarray:
    """(N, 3) world points [m] of a view's valid depth pixels (depth > 0 and finite)."""
    d = np.asarray(view.depth, dtype=np.float32)
    d = np.where(np.isfinite(d), d, 0.0).astype(np.float32)
    K = np.asarray(view.K, dtype=float)
    T = np.asarray(view.T_world_optical, dtype=float)
    v, u = np.nonzero(d > 0)
    z = d[v, u].astype(float)
    pc = np.stack([(u - K[0, 2]) / K[0, 0] * z, (v - K[1, 2]) / K[1, 1] * z, z], axis=1)
    return np.asarray(pc @ T[:3, :3].T + T[:3, 3])


def held_top_z(body: RobotBody, q: np.ndarray, cup_gap: float) -> float:
    """The held lid's height [m]: the TCP (the cup faces, body.gripper[2] along the flange z
    from the flange) less the cup gap at sealing."""
    F = body.frames(np.asarray(q, dtype=float))[-1]
    return float(F[2, 3] + F[2, 2] * body.gripper[2] - cup_gap)


def held_segment(z: np.ndarray, gap: float, stray: int = 3, sparse: float = 0.0) -> np.ndarray:
    """The carton's points: z [m] sorted from the lid down, cut at the first air gap.

    Air is a band `gap` [m] tall below a point that holds fewer than max(1, sparse x the
    points above it) points: with sparse 0, an empty band. The depth camera's stray returns
    scatter a few points through the air under a held carton (level 33 seed 8: 6-10 per 3 cm
    against about 1000 on the carton's side), and an empty-band rule then runs on through
    them to the column below and reads the carton 0.18 m too tall. The band test trips a
    little above the edge; the segment then runs on while points lie closer than gap / 6.

    A run of at most `stray` points before a gap is dropped first: flying pixels at the lid's
    edge (the cups and the arm around them are filtered out) once left a single point above a
    gap, and the measure read that point as the whole carton (a graph run of level 31 seed 2).
    """
    z = np.asarray(z, dtype=float)
    while True:
        n = z.size
        if n < 2:
            return z
        ascending = z[::-1]
        # Points at or above z[i] - gap, less the i + 1 from the lid down to z[i]: the band.
        band = n - np.searchsorted(ascending, z - gap, side='left') - np.arange(1, n + 1)
        limit = np.maximum(1.0, sparse * np.arange(1, n + 1))
        cuts = np.flatnonzero(band[:-1] < limit[:-1])
        if not cuts.size:
            return z
        if cuts[0] + 1 > stray:
            # The band test trips a little above the carton's edge, where the side's last
            # points are already fewer than the limit: run on over that closely spaced rest.
            end = cuts[0] + 1
            while end < n and z[end - 1] - z[end] < gap / 6:
                end += 1
            return z[:end]
        z = z[cuts[0] + 1 :]


def held_bottom(seg: np.ndarray, band: float, frac: float, min_points: int = 5) -> float:
    """The carton's bottom [m]: the lowest of its points `seg` (z [m], any order) whose band
    `band` [m] tall above holds at least `frac` x the points a band holds on average over the
    segment (and at least min_points).

    The side's points run densely to the bottom edge (level 32 seed 2: about 60 in the last
    2.5 mm, 115 per 2.5 mm over the side), so the first dense band is the edge; a low percentile
    instead stands above it by that share of the points (1 % read 0.2-5.1 mm short on levels
    31 and 32, the taller the carton the shorter). A few stray points below the edge fall short
    of the band count and are passed over.
    """
    a = np.sort(np.asarray(seg, dtype=float))
    if a.size == 0:
        raise DetectionError("held_bottom: no points; expected the carton's points")
    span = max(float(a[-1] - a[0]), band)
    need = max(float(min_points), frac * a.size * band / span)
    count = np.searchsorted(a, a + band, side='right') - np.arange(a.size)
    dense = np.flatnonzero(count >= need)
    return float(a[dense[0]] if dense.size else a[0])


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
    bottom is the first dense band of them (held_bottom: held_edge_band, held_edge_frac).
    q (6,) [rad] is the arm at the capture.
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
    pix: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # view, z, v, u of kept points
    for k, view in enumerate(views):
        d = np.asarray(view.depth, dtype=np.float32)
        v, u = np.nonzero(np.isfinite(d) & (d > 0))
        P = world_points(view)
        dx, dy = P[:, 0] - cx, P[:, 1] - cy
        inside = (
            (np.abs(c * dx + s * dy) <= hl)
            & (np.abs(-s * dx + c * dy) <= hw)
            & (P[:, 2] < top_z - 0.002)
            & (P[:, 2] > deepest)
        )
        P, v, u = P[inside], v[inside], u[inside]
        if len(P):
            keep = ~body.contains(P, q, None)
            P, v, u = P[keep], v[keep], u[keep]
        zs.append(P[:, 2])
        pix.append((k, P[:, 2], v, u))
    z = np.sort(np.concatenate(zs))[::-1] if zs else np.zeros(0)
    if z.size < 20:
        return HeldMeasure(0.0, 0.0, f'{z.size} points of the held carton seen; expected 20')
    # From the lid down to the first air gap.
    seg = held_segment(z, params.held_gap, sparse=params.held_sparse)
    if seg.size < 20:
        return HeldMeasure(0.0, 0.0, f'{seg.size} points below the lid before an air gap')
    if top_z - seg[0] > 0.08:
        return HeldMeasure(
            0.0, 0.0, f'nothing within 80 mm under the lid (first point {top_z - seg[0]:.3f} m)'
        )
    bottom = held_bottom(seg, params.held_edge_band, params.held_edge_frac)
    height = top_z - bottom
    hidden = _bottom_hidden(views, pix, bottom, params.held_edge_band)
    # How densely the lowest 2 cm are seen: a carton whose lower part is hidden reads short.
    low = int(np.count_nonzero(seg < bottom + 0.02))
    conf = _ramp(float(low), 5.0, 40.0) * _ramp(float(seg.size), 20.0, 200.0)
    return HeldMeasure(float(height), float(conf), 'ok', bottom, int(seg.size), hidden)


# Below a lowest point, up to this many image rows are looked at for the first return off the
# carton's face, one more than this nearer or farther than the point [m].
_BELOW_ROWS = 12
_NEARER = 0.02


def _bottom_hidden(
    views: Sequence[CameraView],
    pix: Sequence[tuple[int, np.ndarray, np.ndarray, np.ndarray]],
    bottom: float,
    band: float,
) -> bool:
    """Whether the carton's lowest points seen (from bottom up to 4 bands above it) end at an
    occluding edge: for most of them the first return down the image column that is off the
    carton's face is nearer the camera. At a true bottom edge it lies beyond the carton (or
    there is none)."""
    occluded = clear = 0
    for k, z, v, u in pix:
        low = (z >= bottom - 1e-9) & (z <= bottom + 4 * band)
        if not np.any(low):
            continue
        d = np.asarray(views[k].depth, dtype=np.float32)
        d = np.where(np.isfinite(d), d, 0.0)
        rows = d.shape[0]
        for vi, ui in zip(v[low], u[low], strict=True):
            d0 = d[vi, ui]
            below = d[vi + 1 : min(rows, vi + 1 + _BELOW_ROWS), ui]
            # The first return off the carton's face (within _NEARER of it: the face itself).
            off = below[(below > 0) & (np.abs(below - d0) > _NEARER)]
            if off.size and off[0] < d0:
                occluded += 1
            else:
                clear += 1
    return occluded > clear


def held_height(
    views: Sequence[CameraView],
    params: DetectorParams,
    body: RobotBody,
    q: np.ndarray,
    observation: Observation,
    tcp_offset: float,
    cup_gap: float,
    floor: float | None = None,
) -> HeldMeasure:
    """measure_held_height for a picked observation: its lid sides and yaw, centred on its
    x, y (the lift is straight up), the lid at the TCP (tcp_offset [m] past the flange) less
    cup_gap [m].

    floor [m]: the lowest the carton can have stood on at the pick (the trailer's floor), so
    that the observed lid less it bounds its height from above. A bottom hidden behind
    something nearer the camera bounds it from below: within held_hidden_max of each other
    the upper bound stands (the carton then drops at most that far at the place); otherwise,
    or without a floor, the measure is refused."""
    if abs(tcp_offset - body.gripper[2]) > 1e-9:
        body = RobotBody(
            body.base_pos, body.base_quat, body.dh, (*body.gripper[:2], tcp_offset), body.margin
        )
    L, W, H = observation.dims_guess
    x, y, _ = observation.position
    got = measure_held_height(
        views,
        params,
        body,
        q,
        (float(L), float(W)),
        float(observation.yaw),
        held_top_z(body, q, cup_gap),
        (float(x), float(y)),
    )
    if not got.hidden or got.height <= 0.0:
        return got
    # The bottom is hidden: the carton is at least got.height tall, and at most the observed
    # lid's height above the floor it stood on.
    upper = None if floor is None else observation.position[2] + float(H) / 2 - floor
    if upper is not None and 0.0 <= upper - got.height <= params.held_hidden_max:
        return dataclasses.replace(
            got,
            height=float(upper),
            reason=f'bottom hidden: {1000 * got.height:.0f} mm seen, the lid '
            f'{1000 * upper:.0f} mm above the floor',
        )
    bound = '' if upper is None else f', the lid {1000 * upper:.0f} mm above the floor'
    return HeldMeasure(
        0.0,
        0.0,
        f'the bottom is hidden behind something nearer the camera: at least '
        f'{1000 * got.height:.0f} mm tall{bound}',
        got.bottom,
        got.points,
        True,
    )
