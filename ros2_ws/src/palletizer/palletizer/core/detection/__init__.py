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

Modules: model (settings, detections, results, errors against truth), geometry (one view's
pixel window and unprojected depth), segment (lid patches in depth, split on colour seams),
fit (a lid's rectangle refined on its side edges), lids (patches to scored detections),
detector (detect_station, detect_truck and the truck's tie rule), held (the height of the
carton in the cups). This package re-exports the public API.
"""

from __future__ import annotations

from palletizer.core.detection.detector import detect_station, detect_truck
from palletizer.core.detection.held import (
    HeldMeasure,
    held_bottom,
    held_height,
    held_segment,
    held_top_z,
    measure_held_height,
)
from palletizer.core.detection.model import (
    Detection,
    DetectionError,
    DetectorParams,
    DetectResult,
    detection_errors,
)
from palletizer.core.detection.set_aside import LidMeasure, measure_lid, remeasured

__all__ = [
    'DetectResult',
    'Detection',
    'DetectionError',
    'DetectorParams',
    'HeldMeasure',
    'LidMeasure',
    'detect_station',
    'detect_truck',
    'detection_errors',
    'held_bottom',
    'held_height',
    'held_segment',
    'held_top_z',
    'measure_held_height',
    'measure_lid',
    'remeasured',
]
