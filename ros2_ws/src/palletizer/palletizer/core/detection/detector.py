"""The detector's entry points: the lids at a table or conveyor station and the one to pick
there (detect_station), and the carton the truck source presents, by the source's tie rule
(detect_truck, _truck_choice).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from palletizer.core.config.cell import TruckConfig
from palletizer.core.detection.geometry import _geometry, _roi
from palletizer.core.detection.lids import _carton_shaped, _detect
from palletizer.core.detection.model import (
    Detection,
    DetectionError,
    DetectorParams,
    DetectResult,
)
from palletizer.core.views import CameraView

__all__ = ['detect_station', 'detect_truck']


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
    bay: TruckConfig,
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
    x0, y0 = bay.origin
    sx, sy = bay.size
    floor = bay.floor
    band = bay.tie_band
    tx, ty = bay.tie_point
    m = params.bay_margin
    last = DetectResult((), None, False, 'no carton in the trailer')
    z_hi = floor + bay.max_stack_height + _TALLEST
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
