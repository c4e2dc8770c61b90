"""Carton sources of the cell: pick table, conveyor and truck trailer, behind one contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from palletizer.core.config.cell import CellConfig
from palletizer.core.vocab import SourceKind
from palletizer.sim.sources.base import (
    JitterFn,
    Presented,
    RestMeter,
    Source,
    SourceError,
    SourceState,
    StepWorld,
)
from palletizer.sim.sources.conveyor import ConveyorSource
from palletizer.sim.sources.conveyor_layout import LineParams, TableTop, conveyor_params
from palletizer.sim.sources.table import TableSource, table_params
from palletizer.sim.sources.truck import (
    TruckParams,
    TruckPlan,
    TruckSlot,
    TruckSource,
    plan_truck_load,
    truck_params,
)

if TYPE_CHECKING:
    from palletizer.core.config import Level
    from palletizer.sim.cartons import CartonLike

SOURCE_KINDS = SourceKind.names()


def make_source(
    level: Level,
    seed: int,
    draws: Sequence[CartonLike] | None = None,
    cell: CellConfig | None = None,
) -> Source:
    """The source of `level` for `seed`: its load (drawn when not given) staged with its jitter.

    `cell` is configs/cell.yaml (palletizer.core.config.Config.cell); defaults otherwise.
    """
    from palletizer.core.loads import draw_load, staging_jitter

    if draws is None:
        draws = draw_load(level.id, seed)

    def jitter(index: int, attempt: int) -> tuple[float, float, float]:
        return staging_jitter(level.id, seed, index, attempt)

    if level.source == 'conveyor':
        return ConveyorSource(draws, jitter, conveyor_params(cell))
    if level.source == 'table':
        return TableSource(draws, jitter, table_params(cell))
    if level.source == 'truck':
        return TruckSource(draws, seed, level.loader_jitter, truck_params(cell))
    raise SourceError(
        f'level {level.id}: source = {level.source!r}; expected one of {", ".join(SOURCE_KINDS)}'
    )


__all__ = [
    'SOURCE_KINDS',
    'ConveyorSource',
    'JitterFn',
    'LineParams',
    'Presented',
    'RestMeter',
    'Source',
    'SourceError',
    'SourceState',
    'StepWorld',
    'TableSource',
    'TableTop',
    'TruckParams',
    'TruckPlan',
    'TruckSlot',
    'TruckSource',
    'conveyor_params',
    'make_source',
    'plan_truck_load',
    'table_params',
    'truck_params',
]
