"""The planner port and the bookkeeping every planner shares (layers, running stack state)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from palletizer.core.contracts import (
    HeightMap,
    PackageSpec,
    PalletGeometry,
    PalletState,
    Placement,
    PlanResult,
)
from palletizer.core.vocab import PlannerKind

__all__ = ['LAYER_TOL', 'LayerBook', 'Planner', 'PlannerKind']

# Recorded bases closer than this belong to one layer (docs/planners.md §6.5: 3 mm grouping).
LAYER_TOL = 0.003


@runtime_checkable
class Planner(Protocol):
    """Chooses a slot for the carton in hand; learns from measured placements.

    `kind` names the planner; `oracle` is True when it reads simulator truth.
    choose's `last_resort`: the episode ends unless this carton finds a slot now (the buffer
    has no place for it, or the load is done and it waits there). A planner may then relax its
    rules (the heuristic and beam search: last_resort_support); the grid plans as usual.
    """

    kind: PlannerKind
    oracle: bool

    def choose(
        self,
        spec: PackageSpec,
        heightmap: HeightMap,
        pallet: PalletState | None,
        excluded_slots: Collection[str] = (),
        last_resort: bool = False,
    ) -> PlanResult: ...

    def record(self, placement: Placement) -> None: ...

    def set_forecast(self, specs: Sequence[PackageSpec]) -> None: ...


class LayerBook:
    """Measured bases of placed cartons, the running stack mass and CoG (PALLET frame).

    Specs seen in choose() are remembered by package_id so that record() can fold the measured
    CoG offset into the stack CoG (a Placement carries no CoG offset).
    """

    def __init__(self, pallet: PalletGeometry) -> None:
        self.pallet = pallet
        self.bases: list[float] = []
        self.placements: list[Placement] = []
        self.specs: dict[str, PackageSpec] = {}
        self.mass = 0.0
        self.moment = [0.0, 0.0, 0.0]
        self.version = 0

    def remember(self, spec: PackageSpec) -> None:
        self.specs[spec.package_id] = spec

    def record(self, placement: Placement) -> None:
        """Keep a measured placement; only `placed` cartons count (docs/planners.md §6.5)."""
        if not placement.placed:
            return
        self.placements.append(placement)
        self.bases.append(placement.base_z)
        x, y, z, yaw = placement.actual_pose
        spec = self.specs.get(placement.package_id)
        off = spec.cog_offset_m if spec is not None else (0.0, 0.0, 0.0)
        c, s = math.cos(yaw), math.sin(yaw)
        cog = (x + c * off[0] - s * off[1], y + s * off[0] + c * off[1], z + off[2])
        m = placement.mass_kg
        self.mass += m
        self.moment = [a + m * b for a, b in zip(self.moment, cog, strict=True)]
        self.version += 1

    def state(self) -> tuple[float, tuple[float, float, float]]:
        """(mass [kg], CoG (3,) pallet frame [m]) of the recorded stack."""
        if self.mass <= 0.0:
            return 0.0, (0.0, 0.0, 0.0)
        return self.mass, tuple(v / self.mass for v in self.moment)  # type: ignore[return-value]  # moment has 3 values

    def layer(self, base: float) -> int:
        """1 + distinct recorded base levels (3 mm groups) strictly below base - 3 mm."""
        groups: list[float] = []
        for b in sorted(self.bases):
            if not groups or b - groups[-1] > LAYER_TOL:
                groups.append(b)
        return 1 + sum(1 for g in groups if g < base - LAYER_TOL)
