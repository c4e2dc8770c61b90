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

__all__ = [
    'OracleDetector',
    'OracleGauge',
    'OracleHeightMap',
    'Referee',
    'stamp_heightmap',
    'yaw_of_quat',
]


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

    def heightmap(self) -> HeightMap:
        gt = self.cell.ground_truth()
        boxes = [(pid, c.pos, c.quat, c.dims) for pid, c in gt.cartons.items()]
        return stamp_heightmap(boxes, gt.held, self.pallet, self.cell_size)


def stamp_heightmap(
    boxes, held: str | None, pallet: PalletGeometry | None = None, cell_size: float = 0.010
) -> HeightMap:
    """Oracle height map from true carton poses: (package_id, pos (3,), quat wxyz, dims) each.

    Every carton resting above the deck stamps its top on the cells under its rotated
    footprint, lowest first; a held carton, or one floating > 2 cm above what is under it
    (in the air, on a table edge), is skipped (cell-facts §4).
    """
    p = pallet or PalletGeometry()
    flat = HeightMap.flat(p, cell_size)
    ny, nx = flat.shape
    ox, oy = flat.origin
    X, Y = np.meshgrid(
        ox + (np.arange(nx) + 0.5) * cell_size, oy + (np.arange(ny) + 0.5) * cell_size
    )
    deck = p.deck_z
    cells = np.zeros((ny, nx))
    rows = []
    for pid, pos, quat, dims in boxes:
        if pid == held or float(pos[2]) < deck:
            continue
        rows.append((float(pos[2]) - dims[2] / 2, pos, quat, dims))
    for bottom, pos, quat, dims in sorted(rows, key=lambda r: r[0]):
        yaw = yaw_of_quat(quat)
        cs, sn = math.cos(yaw), math.sin(yaw)
        dx, dy = X - float(pos[0]), Y - float(pos[1])
        u, v = cs * dx + sn * dy, -sn * dx + cs * dy
        inside = (np.abs(u) <= dims[0] / 2) & (np.abs(v) <= dims[1] / 2)
        if not inside.any() or bottom - deck > cells[inside].max() + 0.02:
            continue
        cells[inside] = np.maximum(cells[inside], float(pos[2]) + dims[2] / 2 - deck)
    return HeightMap(cells, None, flat.origin, cell_size)
