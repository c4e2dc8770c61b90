"""Oracle stubs and the referee: the only code besides the cell that reads simulator truth.

Every oracle class carries `oracle = True`; the run's oracle flag is computed from the objects
actually constructed (wiring.inprocess.oracle_flag), never set by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from palletizer.core.contracts import HeightMap, Observation, PackageSpec, PalletGeometry
from palletizer.core.loads import CartonDraw

__all__ = ['OracleDetector', 'OracleGauge', 'OracleHeightMap', 'Referee', 'yaw_of_quat']


def yaw_of_quat(q: Sequence[float]) -> float:
    """Yaw [rad] of a (w, x, y, z) quaternion: the heading of the body's x axis."""
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


class Referee:
    """Measurement for scoring: world (x, y, z, yaw) of cartons. Never feeds a control decision."""

    oracle = False  # the referee scores; it is not a stub standing in for perception

    def __init__(self, cell) -> None:
        self.cell = cell

    def poses(self, package_ids: Sequence[str]) -> dict[str, tuple[float, float, float, float]]:
        truth = self.cell.ground_truth().cartons
        return {
            pid: (*(float(v) for v in truth[pid].pos), yaw_of_quat(truth[pid].quat))
            for pid in package_ids
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
            tuple(float(v) for v in truth.pos),
            yaw_of_quat(truth.quat),
            tuple(truth.dims),
            1.0,
        )


class OracleGauge:
    """Reports the catalogue truth (mass, CoG) of a carton: stands in for in-hand weighing."""

    oracle = True

    def __init__(self, draws: Sequence[CartonDraw]) -> None:
        self.draws = {d.package_id: d for d in draws}

    def weigh(self, observation: Observation) -> PackageSpec:
        return self.draws[observation.package_id].spec

    def forecast(self, package_ids: Sequence[str]) -> list[PackageSpec]:
        return [self.draws[p].spec for p in package_ids if p in self.draws]


class OracleHeightMap:
    """Stamps every resting carton's true footprint on the 1 cm pallet grid (cell-facts §4)."""

    oracle = True

    def __init__(
        self, cell, pallet: PalletGeometry | None = None, cell_size: float = 0.010
    ) -> None:
        self.cell = cell
        self.pallet = pallet or PalletGeometry()
        self.cell_size = cell_size
        flat = HeightMap.flat(self.pallet, cell_size)
        ny, nx = flat.shape
        ox, oy = flat.origin
        self._xs = ox + (np.arange(nx) + 0.5) * cell_size
        self._ys = oy + (np.arange(ny) + 0.5) * cell_size
        self._origin = flat.origin

    def heightmap(self) -> HeightMap:
        gt = self.cell.ground_truth()
        deck = self.pallet.deck_z
        cells = np.zeros((len(self._ys), len(self._xs)))
        X, Y = np.meshgrid(self._xs, self._ys)
        boxes = []
        for pid, c in gt.cartons.items():
            if pid == gt.held:
                continue
            bottom = float(c.pos[2]) - c.dims[2] / 2
            if float(c.pos[2]) < deck:
                continue
            boxes.append((bottom, c))
        for bottom, c in sorted(boxes, key=lambda b: b[0]):
            yaw = yaw_of_quat(c.quat)
            cs, sn = math.cos(yaw), math.sin(yaw)
            dx, dy = X - float(c.pos[0]), Y - float(c.pos[1])
            u, v = cs * dx + sn * dy, -sn * dx + cs * dy
            inside = (np.abs(u) <= c.dims[0] / 2) & (np.abs(v) <= c.dims[1] / 2)
            if not inside.any():
                continue
            # A carton floating well above what is under it is held or on a table edge: skip.
            if bottom - deck > cells[inside].max() + 0.02:
                continue
            top = float(c.pos[2]) + c.dims[2] / 2 - deck
            cells[inside] = np.maximum(cells[inside], top)
        return HeightMap(cells, None, self._origin, self.cell_size)
