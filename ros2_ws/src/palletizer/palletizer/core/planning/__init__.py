"""Placement planners: the score heuristic, beam search and the grid baseline."""

from palletizer.core.params.planning import (
    BEAM_TERMS,
    DEFAULT_BEAM_WEIGHTS,
    DEFAULT_WEIGHTS,
    TERMS,
    BeamParams,
    GridParams,
    HeuristicParams,
)
from palletizer.core.planning.base import LayerBook, Planner, PlannerKind
from palletizer.core.planning.beam import BeamPlanner
from palletizer.core.planning.factory import build_planner
from palletizer.core.planning.grid import GridPlanner
from palletizer.core.planning.heuristic import REJECT_REASONS, Candidates, ScorePlanner
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.record import RecordedPlanner

__all__ = [
    'BEAM_TERMS',
    'DEFAULT_BEAM_WEIGHTS',
    'DEFAULT_WEIGHTS',
    'REJECT_REASONS',
    'TERMS',
    'BeamParams',
    'BeamPlanner',
    'Candidates',
    'GridParams',
    'GridPlanner',
    'HeuristicParams',
    'LayerBook',
    'Planner',
    'PlannerKind',
    'ReachOracle',
    'RecordedPlanner',
    'ScorePlanner',
    'build_planner',
]
