"""Shared helper: place a plan exactly, as a measured placement in the pallet frame."""

from __future__ import annotations

from palletizer.core.contracts import PackageSpec, Placement, PlacementPlan
from palletizer.core.measure import measure_placement, world_to_pallet


def place_exactly(seq: int, spec: PackageSpec, plan: PlacementPlan, before) -> Placement:
    pose = world_to_pallet((*plan.position, plan.yaw))
    return measure_placement(seq, spec, plan.layer, pose, pose, before)
