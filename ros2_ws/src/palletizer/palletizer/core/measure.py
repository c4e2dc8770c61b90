"""Per-placement measurement and pallet state from measured poses.

Rules: docs/measurement.md §7.1-7.2.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.contracts import PackageSpec, PalletGeometry, PalletState, Placement
from palletizer.core.stability import (
    box_corners,
    envelope,
    overhang,
    placement_error,
    polygon_overlap,
    rect_overlap,
    stability_margin,
    support_ratio,
)

__all__ = [
    'CONTACT_TOL_M',
    'Tolerances',
    'measure_placement',
    'pallet_state',
    'pallet_to_world',
    'resting_support',
    'world_to_pallet',
]

# A carton rests on a top (or on the deck) when its measured bottom is within this of it [m].
# Measured gaps: -0.3 mm on the deck and -0.15 mm carton on carton after a 2 mm drop and 0.5 s
# of physics (contact penetration); +2.0 mm in fast-forward episodes (the 2 mm release height,
# motion.drop_clearance; level 23 seed 1, every carton). Random cartons are at least 80 mm tall
# and their heights come in 1 mm steps, so 4 mm never reaches a neighbouring layer and counts
# two tops a few millimetres apart as one level, as the stack model does (validate_stack's
# contact_tol, the beam planner's level_tol: 4 mm).
CONTACT_TOL_M = 0.004


@dataclass(frozen=True)
class Tolerances:
    """When a carton counts as `placed` (docs/levels.md §2.4), and when it rests on a top.

    xy_m: centre error [m]; yaw_rad: yaw error [rad] (0.10 ~ 5.7 deg); overhang_m: beyond the
    deck [m]; square_m: a footprint whose sides differ by at most this is square, its yaw
    error taken modulo a quarter turn [m]; contact_m: gap between a carton's bottom and a top
    it rests on [m].
    """

    xy_m: float = 0.020
    yaw_rad: float = 0.10
    overhang_m: float = 0.020
    square_m: float = 0.010
    contact_m: float = CONTACT_TOL_M


def world_to_pallet(
    pose: Sequence[float], pallet: PalletGeometry | None = None
) -> tuple[float, float, float, float]:
    """World (x, y, z, yaw) -> pallet frame: XY from the pallet centre, z above the deck."""
    p = pallet or PalletGeometry()
    return (
        float(pose[0]) - p.centre_xy[0],
        float(pose[1]) - p.centre_xy[1],
        float(pose[2]) - p.deck_z,
        float(pose[3]),
    )


def pallet_to_world(
    pose: Sequence[float], pallet: PalletGeometry | None = None
) -> tuple[float, float, float, float]:
    """Pallet frame (x, y, z, yaw) -> world."""
    p = pallet or PalletGeometry()
    return (
        float(pose[0]) + p.centre_xy[0],
        float(pose[1]) + p.centre_xy[1],
        float(pose[2]) + p.deck_z,
        float(pose[3]),
    )


def _rect(pose: Sequence[float], dims: Sequence[float]) -> tuple[float, float, float, float]:
    """Pessimistic axis-aligned envelope of a yawed footprint (x0, x1, y0, y1) [m]."""
    ex, ey = envelope(dims[:2], pose[3])
    return (pose[0] - ex / 2, pose[0] + ex / 2, pose[1] - ey / 2, pose[1] + ey / 2)


def _deck(pallet: PalletGeometry) -> tuple[float, float, float, float]:
    hx, hy = pallet.size_xy[0] / 2.0, pallet.size_xy[1] / 2.0
    return (-hx, hx, -hy, hy)


def resting_support(
    pose: Sequence[float],
    dims_m: Sequence[float],
    others: Sequence[Placement],
    *,
    package_id: str = '',
    pallet: PalletGeometry | None = None,
    contact_m: float = CONTACT_TOL_M,
) -> float:
    """Share of a carton's bottom footprint that rests on something, as the stack holds it.

    pose: (x, y, z, yaw) of the carton centre, PALLET frame [m, rad]; dims_m: L, W, H [m].
    Whatever carries it is the deck, when its bottom is within contact_m of the deck top, and
    every carton in `others` (except `package_id`) whose measured top is within contact_m of its
    bottom, whatever their planned layers. Areas are those of the true yawed footprints, summed
    and capped at 1 (tops at one height cannot overlap).
    """
    p = pallet or PalletGeometry()
    x, y, z, yaw = (float(v) for v in pose[:4])
    length, width, height = (float(v) for v in dims_m[:3])
    area = length * width
    if area <= 0.0:
        return 0.0
    base = z - height / 2.0
    foot = box_corners(x, y, length, width, yaw)
    held = 0.0
    if abs(base) <= contact_m:
        held += polygon_overlap(foot, box_corners(0.0, 0.0, p.size_xy[0], p.size_xy[1]))
    for o in others:
        if o.package_id == package_id or abs(o.top_z - base) > contact_m:
            continue
        ox, oy, _, oyaw = o.actual_pose
        held += polygon_overlap(foot, box_corners(ox, oy, o.dims_m[0], o.dims_m[1], oyaw))
    return min(1.0, held / area)


def measure_placement(
    seq: int,
    spec: PackageSpec,
    layer: int,
    planned_pose: Sequence[float],
    actual_pose: Sequence[float],
    others: Sequence[Placement] = (),
    *,
    pallet: PalletGeometry | None = None,
    tolerances: Tolerances | None = None,
) -> Placement:
    """Measure one settled carton (all poses in the PALLET frame, (x, y, z, yaw)).

    others: the cartons that may carry it (the episode passes those attempted before it).
    support_ratio: resting_support, what actually carries the carton whatever its planned layer.
    support_ratio_layer, the reference's rule (docs/measurement.md §7.1): overlap with the deck for
    layer 1, else with the envelopes of the cartons of the previous planned layer in `others`
    (actual poses), summed, over the footprint envelope, capped at 1. A layer-3 carton standing
    on a layer-1 carton gets 0 from it.
    """
    p = pallet or PalletGeometry()
    tol = tolerances or Tolerances()
    rect = _rect(actual_pose, spec.dims_m)
    if layer <= 1:
        by_layer = support_ratio(rect, [_deck(p)])
    else:
        below = [_rect(o.actual_pose, o.dims_m) for o in others if o.layer == layer - 1]
        by_layer = support_ratio(rect, below)
    support = resting_support(
        actual_pose,
        spec.dims_m,
        others,
        package_id=spec.package_id,
        pallet=p,
        contact_m=tol.contact_m,
    )
    exy, eyaw = placement_error(planned_pose, actual_pose, spec.dims_m, tol.square_m)
    over = overhang(rect, _deck(p))
    return Placement(
        seq=seq,
        package_id=spec.package_id,
        package_type=spec.type_name,
        mass_kg=spec.mass_kg,
        dims_m=spec.dims_m,
        layer=layer,
        planned_pose=tuple(planned_pose),  # type: ignore[arg-type]  # a 4-pose (x, y, z, yaw)
        actual_pose=tuple(actual_pose),  # type: ignore[arg-type]  # a 4-pose (x, y, z, yaw)
        error_xy_m=exy,
        error_yaw_rad=eyaw,
        support_ratio=support,
        overhang_m=over,
        placed=exy <= tol.xy_m and eyaw <= tol.yaw_rad and over <= tol.overhang_m,
        support_ratio_layer=by_layer,
    )


def pallet_state(
    after_seq: int,
    placements: Sequence[Placement],
    cog_offsets: Mapping[str, Sequence[float]] | None = None,
    *,
    settle_drift_m: float = 0.0,
    pallet: PalletGeometry | None = None,
) -> PalletState:
    """The stack made of every attempted carton whose envelope touches the deck rect.

    Out-of-tolerance cartons still weigh; cartons left at the source are simply not passed in.
    cog_offsets: package_id -> (3,) CoG offset from the geometric centre in the package frame [m]
    (missing ids count as centred). The margin uses the layer-1 cartons' true rotated footprints.
    layer_flatness = top-height spread of the cartons in the highest planned layer [m].
    """
    p = pallet or PalletGeometry()
    offsets = cog_offsets or {}
    deck = _deck(p)
    on = [q for q in placements if rect_overlap(_rect(q.actual_pose, q.dims_m), deck) > 0.0]
    if not on:
        return PalletState(after_seq, 0.0, (0.0, 0.0, 0.0), 0.0, 0.0, settle_drift_m, 0.0)
    mass = np.array([q.mass_kg for q in on])
    cogs = []
    for q in on:
        x, y, z, yaw = q.actual_pose
        off = np.asarray(offsets.get(q.package_id, (0.0, 0.0, 0.0)), dtype=float)
        c, s = math.cos(yaw), math.sin(yaw)
        cogs.append((x + c * off[0] - s * off[1], y + s * off[0] + c * off[1], z + off[2]))
    cogs_arr = np.array(cogs)
    total = float(mass.sum())
    cog = (mass @ cogs_arr) / total if total > 0 else cogs_arr.mean(axis=0)
    base = [
        (q.actual_pose[0], q.actual_pose[1], q.dims_m[0], q.dims_m[1], q.actual_pose[3])
        for q in on
        if q.layer == 1
    ]
    margin = stability_margin(float(cog[0]), float(cog[1]), float(cog[2]), base)
    rects = np.array([_rect(q.actual_pose, q.dims_m) for q in on])
    top = max(q.top_z for q in on)
    bbox = (rects[:, 1].max() - rects[:, 0].min()) * (rects[:, 3].max() - rects[:, 2].min())
    volume = sum(q.dims_m[0] * q.dims_m[1] * q.dims_m[2] for q in on)
    fill = volume / (bbox * top) if bbox * top > 0 else 0.0
    high = max(q.layer for q in on)
    tops = [q.top_z for q in on if q.layer == high]
    return PalletState(
        after_seq=after_seq,
        mass_kg=total,
        cog=(float(cog[0]), float(cog[1]), float(cog[2])),
        stability_margin_m=margin,
        fill_ratio=min(1.0, fill),
        settle_drift_m=settle_drift_m,
        layer_flatness=max(tops) - min(tops),
    )
