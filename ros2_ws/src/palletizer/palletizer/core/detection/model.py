"""The detector's data: its settings (DetectorParams, configs/perception.yaml `detector`), one
lid it reports (Detection), the result of one look (DetectResult), its error (DetectionError)
and a detection's errors against truth (detection_errors).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.params.detection import DetectionError, DetectorParams

__all__ = ['DetectResult', 'Detection', 'DetectionError', 'DetectorParams', 'detection_errors']


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
