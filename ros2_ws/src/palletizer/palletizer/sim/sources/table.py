"""Table source: the store, elevator and a feeder belt that ends at the pick table and delivers to its centre."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from palletizer.core.config.cell import CellConfig
from palletizer.sim.cartons import CartonLike
from palletizer.sim.sources.base import JitterFn
from palletizer.sim.sources.conveyor import ConveyorSource
from palletizer.sim.sources.conveyor_layout import LineParams, TableTop

__all__ = ['TableSource', 'table_params']

# Feeder lane of the reference line B (docs/levels.md §2.3): 1.20 x 0.44 m at table height, ending
# at the table edge (less a 3 mm seam, see table_params); friction 1.10 / 0.02 / 0.002; station
# tolerance 0.030 m.
_FEEDER_LENGTH = 1.20
_FEEDER_WIDTH = 0.44
_FEEDER_FRICTION = (1.10, 0.02, 0.002)
_FEEDER_TOL = 0.030


def table_params(cell: CellConfig | None = None) -> LineParams:
    """LineParams of the table line; the table comes from `tables.pick` of cell.yaml
    (Config.cell) when given, and the line's timing from its `conveyor` block."""
    table = TableTop()
    timing: dict[str, Any] = {}
    if cell is not None:
        t, c = cell.tables.pick, cell.conveyor
        table = TableTop(centre=t.centre, half_size=t.half_size, top=t.top, friction=t.friction)
        timing = {
            'speed': c.speed,
            'rest_speed': c.rest_speed,
            'rest_time': c.rest_time,
            'timeout_s': c.timeout_s,
        }
    edge = table.centre[0] - table.half_size[0]
    return LineParams(
        kind='table',
        # The feeder stops a seam gap short of the table edge: belt_b and the table deck run at
        # different times (a carton accumulates on belt_b while the table holds the presented
        # one), and touching decks would drag each other, and the carton, through the contact.
        belt_x=(edge - _FEEDER_LENGTH, edge - LineParams.seam_gap),
        belt_y=table.centre[1],
        belt_width=_FEEDER_WIDTH,
        top=table.top,
        friction=_FEEDER_FRICTION,
        station=table.centre,
        station_tol=_FEEDER_TOL,
        table=table,
        **timing,
    )


class TableSource(ConveyorSource):
    """One carton at a time arrives on the pick table; the feeder keeps dragging it to the centre.

    Riding is decided by height, so the drag continues on the table surface (line B,
    docs/levels.md §2.3).
    """

    kind = 'table'

    def __init__(
        self,
        draws: Sequence[CartonLike],
        jitter: JitterFn | None = None,
        params: LineParams | None = None,
    ) -> None:
        """`draws` in arrival order; `jitter(index, attempt)` gives (dx, dy, dyaw) staging offsets."""
        super().__init__(draws, jitter, params or table_params())
