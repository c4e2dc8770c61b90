"""Carton sources of the cell: pick table, conveyor and truck trailer, behind one contract."""

from __future__ import annotations

from palletizer.sim.sources.base import (
    JitterFn,
    Presented,
    RestMeter,
    Source,
    SourceError,
    SourceState,
    StepWorld,
)
from palletizer.sim.sources.conveyor import ConveyorSource, LineParams, TableTop, conveyor_params
from palletizer.sim.sources.table import TableSource, table_params

__all__ = [
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
    'conveyor_params',
    'table_params',
]
