"""The detector's data: its settings (DetectorParams, configs/perception.yaml `detector`), one
lid it reports (Detection), the result of one look (DetectResult), its error (DetectionError)
and a detection's errors against truth (detection_errors).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.errors import PalletizerError, close_match

__all__ = ['DetectResult', 'Detection', 'DetectionError', 'DetectorParams', 'detection_errors']


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
