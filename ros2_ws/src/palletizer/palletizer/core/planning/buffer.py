"""The set-aside buffer: up to k weighed cartons waiting on the auxiliary table.

Online packing with a buffer: the carton in hand may be set aside instead of placed, and a
carton in the buffer may be taken back whenever the stack has grown a slot for it. The table
is the cell's auxiliary one (configs/cell.yaml `tables.auxiliary`); `BufferTable` finds where a
carton goes on it, `Buffer` remembers what is where.

Cartons stand in a row along the table's Y, each as close to the robot (the table's +X edge)
as the edge margin allows, turned so that it takes the least of the row; a carton goes in the
first free stretch of the row, from the -Y edge (nearest the robot base), that holds it with
`gap` to each neighbour, and only where the analytic IK reaches its lid with the tool down.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from palletizer.core.config.cell import CellConfig
from palletizer.core.contracts import Observation, PackageSpec
from palletizer.core.params.planning import BufferSettings
from palletizer.core.planning.reach import ReachOracle

__all__ = ['Buffer', 'BufferSettings', 'BufferSlot', 'BufferTable']


@dataclass(frozen=True)
class BufferSlot:
    """One carton set aside: its slot index, pose (carton centre, world, [m]; yaw [rad]) and
    the stretch of the row it takes, [y0, y1] [m]."""

    index: int
    position: tuple[float, float, float]
    yaw: float
    y0: float
    y1: float


@dataclass(frozen=True)
class BufferTable:
    """The auxiliary table's top as a row of set-down poses.

    centre (x, y) and half_size (x, y) of the top [m], top height [m]; reach: where the tool
    can go down onto a lid (the TCP is the cup face; None: everywhere).
    """

    centre: tuple[float, float]
    half_size: tuple[float, float]
    top: float
    settings: BufferSettings
    reach: ReachOracle | None = None

    @classmethod
    def from_config(
        cls, cell: CellConfig, settings: BufferSettings, reach: ReachOracle | None
    ) -> BufferTable:
        """The auxiliary table of configs/cell.yaml (Config.cell) with `settings`
        (Config.planner.buffer)."""
        aux = cell.tables.auxiliary
        return cls(aux.centre, (aux.half_size[0], aux.half_size[1]), aux.top, settings, reach)

    def pose_for(
        self, spec: PackageSpec, taken: tuple[BufferSlot, ...], index: int
    ) -> BufferSlot | None:
        """Where `spec` goes beside the cartons already set aside, or None where it fits nowhere
        (too big for the table, no free stretch, or no reachable lid)."""
        L, W, H = spec.dims_m
        m, gap = self.settings.edge_margin, self.settings.gap
        x_hi = self.centre[0] + self.half_size[0] - m
        x_lo = self.centre[0] - self.half_size[0] + m
        y_lo = self.centre[1] - self.half_size[1] + m
        y_hi = self.centre[1] + self.half_size[1] - m
        # Orientations: long side along X (yaw 0), then along Y (yaw 90 deg); the one that takes
        # less of the row first, among those that fit across the table.
        options = [(L, W, 0.0), (W, L, math.pi / 2)]
        options = [o for o in options if o[0] <= x_hi - x_lo + 1e-9]
        options.sort(key=lambda o: o[1])
        busy = sorted((s.y0 - gap, s.y1 + gap) for s in taken)
        for x_ext, y_ext, yaw in options:
            x = x_hi - x_ext / 2
            for y0 in self._starts(y_lo, y_hi, y_ext, busy):
                y = y0 + y_ext / 2
                z = self.top + H / 2
                if self.reach is not None:
                    ok = self.reach.reachable(
                        np.array([x]), np.array([y]), np.array([self.top + H]), np.array([yaw])
                    )
                    if not bool(np.asarray(ok).any()):
                        continue
                return BufferSlot(index, (x, y, z), yaw, y0, y0 + y_ext)
        return None

    def overhang(
        self, dims: tuple[float, float, float], pose: tuple[float, float, float]
    ) -> float:
        """How far [m] a carton of `dims` at (x, y, yaw) reaches past the table top's edges
        (0 when it stands wholly on it)."""
        L, W, _ = dims
        x, y, yaw = pose
        c, s = math.cos(yaw), math.sin(yaw)
        xs = [x + c * a - s * b for a in (-L / 2, L / 2) for b in (-W / 2, W / 2)]
        ys = [y + s * a + c * b for a in (-L / 2, L / 2) for b in (-W / 2, W / 2)]
        (cx, cy), (hx, hy) = self.centre, self.half_size
        return max(
            0.0,
            max(xs) - (cx + hx),
            (cx - hx) - min(xs),
            max(ys) - (cy + hy),
            (cy - hy) - min(ys),
        )

    @staticmethod
    def _starts(
        y_lo: float, y_hi: float, y_ext: float, busy: list[tuple[float, float]]
    ) -> Iterator[float]:
        """Row starts where a stretch y_ext is free of `busy`, lowest first."""
        y = y_lo
        for b0, b1 in busy:
            if y + y_ext <= b0 + 1e-9:
                yield y
            y = max(y, b1)
        if y + y_ext <= y_hi + 1e-9:
            yield y


@dataclass
class Buffer:
    """The cartons set aside, in the order they went there: spec and slot by package id."""

    table: BufferTable
    held: dict[str, tuple[PackageSpec, BufferSlot]] = field(default_factory=dict)

    @property
    def capacity(self) -> int:
        return self.table.settings.slots

    def __len__(self) -> int:
        return len(self.held)

    def slot_for(self, spec: PackageSpec) -> BufferSlot | None:
        """A free slot that holds `spec`, or None (buffer full, or no room on the table)."""
        if len(self.held) >= self.capacity:
            return None
        used = {s.index for _, s in self.held.values()}
        index = next(i for i in range(self.capacity) if i not in used)
        return self.table.pose_for(spec, tuple(s for _, s in self.held.values()), index)

    def put(self, spec: PackageSpec, slot: BufferSlot) -> None:
        self.held[spec.package_id] = (spec, slot)

    def take(self, package_id: str) -> tuple[PackageSpec, BufferSlot]:
        return self.held.pop(package_id)

    def specs(self) -> list[PackageSpec]:
        return [spec for spec, _ in self.held.values()]

    @staticmethod
    def observation(spec: PackageSpec, slot: BufferSlot) -> Observation:
        """The carton where it was set down, as a pick target: its weighed dimensions, sure."""
        return Observation(spec.package_id, slot.position, slot.yaw, spec.dims_m, 1.0)
