"""The detector's settings (configs/perception.yaml `detector`) and its error.

Kept below core/config and core/detection: the config builds DetectorParams at load, and the
detector reads them; neither import runs upward.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from palletizer.core.errors import PalletizerError, close_match

__all__ = ['DetectionError', 'DetectorParams']


class DetectionError(PalletizerError):
    """A detector setting or input the detector cannot use."""


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
    tie_margin: float = 0.002  # [m] a top this close to the band's edge is too close to call
    tie_near: float = 0.005  # [m] two band lids this close in distance to tie_point: too close
    bay_margin: float = 0.012  # [m] bay strip along the walls not looked at (the load keeps 0.02)
    # In-hand height (measure_held_height).
    held_cameras: tuple[str, ...] = ('truck_side',)
    held_margin: float = 0.004  # [m] footprint grown by this on each side
    held_gap: float = 0.03  # [m] air this tall below the carton ends it
    held_sparse: float = 0.01  # a held_gap band with fewer points than this x those above is air
    held_edge_band: float = 0.0025  # [m] the bottom is the lowest band this tall ...
    held_edge_frac: float = 0.25  # ... that holds this x the points of an average band
    held_hidden_max: float = 0.03  # [m] a hidden bottom: the detected height if this near
    # A set-aside carton's lid, before it is taken back (measure_lid).
    lid_cameras: tuple[str, ...] = ('top', 'station')
    lid_margin: float = 0.02  # [m] footprint shrunk by this on each side
    lid_band: float = 0.05  # [m] points up to this above the believed lid count
    lid_min_points: float = 50.0  # fewer lid points: not measured
    # The held carton's label (core/detection/label.py): the cameras that look at its sides,
    # the share of a face's label region that must read as label for the label to be there,
    # the share below which a seen face shows none, the saturation below which a pixel reads
    # as label (white paper against brown board) and the fewest region pixels a face needs.
    label_cameras: tuple[str, ...] = ('truck_side', 'label_a')
    label_share: float = 0.5
    label_clear: float = 0.15
    label_max_saturation: float = 0.25
    label_min_points: float = 12.0

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
            if key in ('truck_cameras', 'held_cameras', 'lid_cameras', 'label_cameras'):
                kw[key] = tuple(str(v) for v in value)
            elif key == 'envelope':
                kw[key] = (float(value[0]), float(value[1]))
            elif key == 'camera':
                kw[key] = str(value)
            else:
                kw[key] = float(value)
        return cls(**kw)
