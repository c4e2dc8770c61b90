"""Oracle stubs and the referee: the only code besides the cell that reads simulator truth.

Every oracle class carries `oracle = True`; the run's oracle flag is computed from the objects
actually constructed (core/oracle.py oracle_flag), never set by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from palletizer.core.contracts import (
    HeightMap,
    Observation,
    PalletGeometry,
    floats3,
)
from palletizer.core.errors import UnknownKey, close_match
from palletizer.core.fusion import stamp_heightmap, yaw_of_quat
from palletizer.core.loads import CartonDraw

__all__ = [
    'OracleDetector',
    'OracleHeightMap',
    'Referee',
]


class Referee:
    """Measurement for scoring: world (x, y, z, yaw) of cartons, and their true CoG offsets
    (from the load's draws). Never feeds a control decision."""

    oracle = False  # the referee scores; it is not a stub standing in for perception

    def __init__(self, cell, draws: Sequence[CartonDraw] = ()) -> None:
        self.cell = cell
        self.draws = {d.package_id: d for d in draws}

    def cog_offsets(self, package_ids: Sequence[str]) -> dict[str, tuple[float, float, float]]:
        """True CoG offset [m] of each carton in its body frame (the frame whose yaw `poses`
        gives); raises UnknownKey for a carton the load does not have."""
        for pid in package_ids:
            if pid not in self.draws:
                raise _unknown('Referee.cog_offsets', pid, self.draws)
        return {pid: floats3(self.draws[pid].cog_offset) for pid in package_ids}

    def masses(self, package_ids: Sequence[str]) -> dict[str, float]:
        """True mass [kg] of each carton (from the load's draws); raises UnknownKey for a
        carton the load does not have."""
        for pid in package_ids:
            if pid not in self.draws:
                raise _unknown('Referee.masses', pid, self.draws)
        return {pid: float(self.draws[pid].mass) for pid in package_ids}

    def poses(self, package_ids: Sequence[str]) -> dict[str, tuple[float, float, float, float]]:
        truth = self.cell.ground_truth().cartons
        for pid in package_ids:
            if pid not in truth:
                raise _unknown('Referee.poses', pid, truth)
        return {
            pid: (*floats3(truth[pid].pos), yaw_of_quat(truth[pid].quat)) for pid in package_ids
        }


class OracleDetector:
    """Reads the presented carton's true pose and size: stands in for camera detection."""

    oracle = True

    def __init__(self, cell) -> None:
        self.cell = cell

    def detect(self, package_id: str) -> Observation | None:
        truth = self.cell.ground_truth().cartons.get(package_id)
        if truth is None:
            return None
        return Observation(
            package_id,
            floats3(truth.pos),
            yaw_of_quat(truth.quat),
            tuple(truth.dims),
            1.0,
        )


class OracleHeightMap:
    """Stamps every resting carton's true footprint on the 1 cm pallet grid.

    Rules: docs/perception.md §4.3.
    """

    oracle = True

    def __init__(
        self, cell, pallet: PalletGeometry | None = None, cell_size: float = 0.010
    ) -> None:
        self.cell = cell
        self.pallet = pallet or PalletGeometry()
        self.cell_size = cell_size

    def heightmap(self) -> HeightMap:
        gt = self.cell.ground_truth()
        boxes = [(pid, c.pos, c.quat, c.dims) for pid, c in gt.cartons.items()]
        return stamp_heightmap(boxes, gt.held, self.pallet, self.cell_size)


def _unknown(where: str, package_id: str, known: Iterable[str]) -> UnknownKey:
    """The error for a carton id that is not in the load, listing the ids that are."""
    ids = sorted(known)
    return UnknownKey(
        f'{where}: package_id {package_id!r} is not in the load; expected one of '
        f'{", ".join(ids) or "(none)"}{close_match(package_id, ids)}'
    )
