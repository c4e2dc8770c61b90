"""Our metric planners on the integer bin: a thin adapter, no physics, a flat item model
(docs/bpp.md §10.6).

One cell is UNIT metres. The bin becomes a pallet of its footprint (deck at world height 0, its
(-x, -y) corner at the world origin), the container's heights a HeightMap at one cell per cell,
and each item a PackageSpec of uniform density with its CoG at its centre. The planners are the
project's own classes, built with parameters made here: no reach oracle, no clearance between
items, the bin's height as the cap; their code and configs are untouched.

A plan is snapped to the cell grid (its low corner and its yaw to a quarter turn) and judged by
the container's own rule. A refused plan is asked for again with its slot excluded (the
planners' replan path), at most `tries` times; then the item counts as not placed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from palletizer.core.bpp.container import BIN_SIZE, Container, Item, Pose, footprint
from palletizer.core.contracts import HeightMap, PackageSpec, PalletGeometry, Placement
from palletizer.core.params.planning import (
    DEFAULT_BEAM_WEIGHTS,
    DEFAULT_WEIGHTS,
    BeamParams,
    HeuristicParams,
)
from palletizer.core.planning.base import Planner
from palletizer.core.planning.beam import BeamPlanner
from palletizer.core.planning.heuristic import ScorePlanner
from palletizer.core.planning.stack import snap_quarter

__all__ = [
    'PLANNER_POLICIES',
    'UNIT',
    'PlannerPolicy',
    'beam_params',
    'bin_geometry',
    'heuristic_params',
]

# [m] per cell.
UNIT = 0.1
# [kg per cell^3] the flat item model's density (only ratios matter to the planners).
DENSITY = 0.1
# Snapped corners further than this from a whole cell are refused [cells].
_SNAP_TOL = 1e-3


def bin_geometry(size: tuple[int, int, int] = BIN_SIZE) -> PalletGeometry:
    """The bin as a pallet: its footprint, deck at world z 0, its (-x, -y) corner at the origin,
    its height as the height limit, and no mass limit that items of DENSITY could reach."""
    L, W, H = size
    return PalletGeometry(
        centre_xy=(L * UNIT / 2.0, W * UNIT / 2.0),
        size_xy=(L * UNIT, W * UNIT),
        deck_z=0.0,
        max_mass_kg=1e6,
        max_height_m=H * UNIT,
    )


def heuristic_params(
    size: tuple[int, int, int] = BIN_SIZE, *, cell_weights: bool = False
) -> HeuristicParams:
    """The score heuristic on the bin: one planning cell per bin cell, no clearance, the bin's
    height as both the cap and the lowness scale, the bin rule's 50 % support floor. The 14
    weights are the cell's (DEFAULT_WEIGHTS) with pallet_com off: it centres a pallet's load for
    transport, which a bin does not ask for (cell_weights: keep it, 0.8)."""
    H = size[2] * UNIT
    weights = dict(DEFAULT_WEIGHTS)
    if not cell_weights:
        weights['pallet_com'] = 0.0
    return HeuristicParams(
        weights=weights,
        cell=UNIT,
        clearance=0.0,
        proximity_band=UNIT,
        min_support_ratio=0.5,
        max_stack_height=H,
        lowness_scale=H,
        levelness_scale=2 * UNIT,
        reserve_tries=0,
        exclude_radius=0,
    )


def beam_params(
    size: tuple[int, int, int] = BIN_SIZE, *, cell_weights: bool = False
) -> BeamParams:
    """Beam search on the bin: no clearance, the bin's height, the 50 % support floor, any
    tipping margin >= 0; greedy (the setting shows one item at a time, no forecast). The six
    weights are the cell's (DEFAULT_BEAM_WEIGHTS) with centered_com off, as for the heuristic
    (cell_weights: keep it)."""
    weights = dict(DEFAULT_BEAM_WEIGHTS)
    if not cell_weights:
        weights['centered_com'] = 0.0
    return BeamParams(
        weights=weights,
        clearance=0.0,
        max_height_m=size[2] * UNIT,
        min_support_ratio=0.5,
        min_tipping_margin=0.0,
        surface_samples=(size[0], size[1]),
        reserve_tries=0,
    )


@dataclass
class _Counts:
    refusals: int = 0  # plans the container refused (each asked again)
    gave_up: int = 0  # items left unplaced after `tries` refusals


class PlannerPolicy:
    """A project planner as a bin-packing policy (a fresh planner per bin)."""

    def __init__(
        self,
        name: str,
        build: Callable[[PalletGeometry], Planner],
        *,
        size: tuple[int, int, int] = BIN_SIZE,
        tries: int = 10,
    ) -> None:
        self.name = name
        self._build = build
        self.size = size
        self.geometry = bin_geometry(size)
        self.tries = tries
        self.counts = _Counts()
        self.planner = build(self.geometry)
        self._n = 0

    def reset(self) -> None:
        """A new bin: a fresh planner."""
        self.planner = self._build(self.geometry)
        self._n = 0

    def spec(self, item: Item) -> PackageSpec:
        """The flat item model: (l, w, h) cells as metres, uniform density, centred CoG."""
        a, b, c = item
        return PackageSpec(
            f'item-{self._n:03d}',
            f'{a}x{b}x{c}',
            (a * UNIT, b * UNIT, c * UNIT),
            DENSITY * a * b * c,
        )

    def heightmap(self, container: Container) -> HeightMap:
        """The container's heights [m above the deck], (W, L) with world Y along axis 0."""
        return HeightMap(container.heights.T * UNIT, None, (0.0, 0.0), UNIT)

    def snap(self, item: Item, x: float, y: float, yaw: float) -> Pose | None:
        """The pose of a plan centred at world (x, y) [m] turned by yaw [rad]; None when its low
        corner is not on a whole cell."""
        rot = snap_quarter(yaw)
        ex, ey = footprint(item, rot)
        cx, cy = x / UNIT - ex / 2.0, y / UNIT - ey / 2.0
        ix, iy = round(cx), round(cy)
        if abs(cx - ix) > _SNAP_TOL or abs(cy - iy) > _SNAP_TOL:
            return None
        return Pose(int(ix), int(iy), rot)

    def choose(self, container: Container, item: Item) -> Pose | None:
        spec = self.spec(item)
        hm = self.heightmap(container)
        excluded: list[str] = []
        for _ in range(self.tries):
            res = self.planner.choose(spec, hm, None, excluded)
            plan = res.plan
            if plan is None:
                return None
            pose = self.snap(item, plan.position[0], plan.position[1], plan.yaw)
            if pose is not None:
                check = container.check(item, pose)
                base = plan.position[2] - item[2] * UNIT / 2.0 - self.geometry.deck_z
                if check.ok and abs(base / UNIT - check.z) < _SNAP_TOL:
                    self._record(spec, item, pose, check.z, plan.layer)
                    return pose
            self.counts.refusals += 1
            excluded.append(plan.slot)
        self.counts.gave_up += 1
        return None

    def _record(self, spec: PackageSpec, item: Item, pose: Pose, z: int, layer: int) -> None:
        """Tell the planner where the item went (PALLET frame, exact: no physics)."""
        ex, ey = footprint(item, pose.rot)
        L, W, _ = self.size
        px = (pose.x + ex / 2.0 - L / 2.0) * UNIT
        py = (pose.y + ey / 2.0 - W / 2.0) * UNIT
        pz = (z + item[2] / 2.0) * UNIT
        p = (px, py, pz, math.pi / 2.0 if pose.rot else 0.0)
        self.planner.record(
            Placement(
                seq=self._n,
                package_id=spec.package_id,
                package_type=spec.type_name,
                mass_kg=spec.mass_kg,
                dims_m=spec.dims_m,
                layer=layer,
                planned_pose=p,
                actual_pose=p,
                error_xy_m=0.0,
                error_yaw_rad=0.0,
                support_ratio=1.0,
                overhang_m=0.0,
                placed=True,
            )
        )
        self._n += 1


def _size(geometry: PalletGeometry) -> tuple[int, int, int]:
    return (
        round(geometry.size_xy[0] / UNIT),
        round(geometry.size_xy[1] / UNIT),
        round(geometry.max_height_m / UNIT),
    )


def _heuristic(cell_weights: bool) -> Callable[[PalletGeometry], Planner]:
    def build(g: PalletGeometry) -> Planner:
        return ScorePlanner(heuristic_params(_size(g), cell_weights=cell_weights), pallet=g)

    return build


def _beam(cell_weights: bool) -> Callable[[PalletGeometry], Planner]:
    def build(g: PalletGeometry) -> Planner:
        return BeamPlanner(beam_params(_size(g), cell_weights=cell_weights), pallet=g)

    return build


# name -> planner factory on the bin's geometry; *_cell keep the cell's centring weight.
PLANNER_POLICIES: dict[str, Callable[[PalletGeometry], Planner]] = {
    'heuristic': _heuristic(False),
    'beam': _beam(False),
    'heuristic_cell': _heuristic(True),
    'beam_cell': _beam(True),
}
