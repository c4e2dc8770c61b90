"""The lid of a carton standing where the robot set it down (the set-aside buffer), measured
from cameras above it before the robot takes it back (measure_lid, LidMeasure).

The buffer knows where it put a carton, but its height is the in-hand measurement's (the truck
side camera's: p95 error 5.5 mm, docs/perception.md "Perception in a run"), and the cups seal
only within gripper.seal_band (4 mm) of the lid: a lid 3 mm lower than believed leaves the cups 4.5 mm
above it and the pick-back lifts nothing (levels 32 and 33: every `grasp_slip` of the seeds
1-50 heuristic run at a0089ec, one carton placed and two buffer moves). Standing on the
auxiliary table, whose top is known, the lid gives the carton's true height too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import Observation
from palletizer.core.detection.held import world_points
from palletizer.core.detection.lids import _ramp
from palletizer.core.detection.model import DetectionError, DetectorParams
from palletizer.core.heightmap_fusion.robot import RobotBody
from palletizer.core.views import CameraView

__all__ = ['LidMeasure', 'measure_lid', 'remeasured']


@dataclass(frozen=True)
class LidMeasure:
    """The lid's height [m, world z] (0 when not measured), confidence in [0, 1], why, and how
    many lid points were seen."""

    top_z: float
    confidence: float
    reason: str
    points: int = 0


def measure_lid(
    views: Sequence[CameraView],
    params: DetectorParams,
    observation: Observation,
    body: RobotBody | None = None,
    q: np.ndarray | None = None,
) -> LidMeasure:
    """The lid of the carton at `observation` (its centre, yaw and L x W x H as believed).

    Points inside the lid's footprint shrunk by lid_margin on each side (edge pixels mix the
    lid with what lies beyond) are kept from min_height above the believed bottom (the support,
    known: the table's top) to lid_band above the believed lid, the arm's dropped
    (body.contains at q, when given); the lid is their median. Seen from above, nothing but the
    lid shows inside its footprint, however wrong the believed height (in-hand readings were
    up to 22 mm tall); the arm is above the window, and the support below it (no carton is
    lower than 80 mm).
    """
    if not views:
        raise DetectionError('measure_lid: no views; expected at least one camera view')
    L, W, H = observation.dims_guess
    x, y, zc = observation.position
    lo, hi = zc - H / 2 + params.min_height, zc + H / 2 + params.lid_band
    hl = max(L / 2 - params.lid_margin, 0.005)
    hw = max(W / 2 - params.lid_margin, 0.005)
    c, s = np.cos(observation.yaw), np.sin(observation.yaw)
    zs = []
    for view in views:
        P = world_points(view)
        dx, dy = P[:, 0] - x, P[:, 1] - y
        inside = (
            (np.abs(c * dx + s * dy) <= hl)
            & (np.abs(-s * dx + c * dy) <= hw)
            & (P[:, 2] >= lo)
            & (P[:, 2] <= hi)
        )
        P = P[inside]
        if len(P) and body is not None and q is not None:
            P = P[~body.contains(P, np.asarray(q, dtype=float), None)]
        zs.append(P[:, 2])
    z = np.concatenate(zs)
    need = int(params.lid_min_points)
    if z.size < need:
        return LidMeasure(
            0.0,
            0.0,
            f'{z.size} lid points seen at z {lo:.3f}..{hi:.3f} m over the footprint; expected '
            f'{need}',
            int(z.size),
        )
    conf = _ramp(float(z.size), float(need), 10.0 * need)
    return LidMeasure(float(np.median(z)), float(conf), 'ok', int(z.size))


def remeasured(observation: Observation, top_z: float) -> Observation:
    """The observation of a carton standing on its support as believed, with its lid at top_z
    [m]: the support is where the believed bottom is, so the height is top_z less it."""
    L, W, H = observation.dims_guess
    x, y, zc = observation.position
    bottom = zc - H / 2
    height = top_z - bottom
    return Observation(
        observation.package_id,
        (x, y, bottom + height / 2),
        observation.yaw,
        (L, W, height),
        observation.confidence,
    )
