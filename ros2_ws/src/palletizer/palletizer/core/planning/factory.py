"""Build a planner by kind from validated parameters (one place for the node and the benches)."""

from __future__ import annotations

from palletizer.core.contracts import PalletGeometry
from palletizer.core.errors import ConfigError, close_match
from palletizer.core.planning.base import Planner, PlannerKind
from palletizer.core.planning.beam import BeamPlanner
from palletizer.core.planning.grid import GridPlanner
from palletizer.core.planning.heuristic import ScorePlanner
from palletizer.core.planning.params import BeamParams, GridParams, HeuristicParams
from palletizer.core.planning.reach import ReachOracle

__all__ = ['build_planner']


def build_planner(
    kind: PlannerKind | str,
    *,
    heuristic: HeuristicParams | None = None,
    beam: BeamParams | None = None,
    grid: GridParams | None = None,
    reach: ReachOracle | None = None,
    pallet: PalletGeometry | None = None,
) -> Planner:
    """A fresh planner of `kind` ('heuristic', 'beam' or 'grid').

    Only the heuristic uses `reach` (beam search and the grid baseline have no reach model).
    Raises ConfigError naming the kind and the allowed ones.
    """
    names = [k.value for k in PlannerKind]
    try:
        k = PlannerKind(kind)
    except ValueError:
        raise ConfigError(
            f'planner = {kind!r}; expected one of {", ".join(names)}{close_match(str(kind), names)}'
        ) from None
    if k is PlannerKind.heuristic:
        return ScorePlanner(heuristic, reach=reach, pallet=pallet)
    if k is PlannerKind.beam:
        return BeamPlanner(beam, pallet=pallet)
    return GridPlanner(grid, pallet=pallet)
