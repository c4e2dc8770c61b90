"""The one place a placement planner is built: by kind, configured as the cell runs it.

The planner node, the benchmarks, the in-process wiring and the tests all call `build_planner`,
so a planner measured by a benchmark is the planner the node serves.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from palletizer.core.contracts import PalletGeometry
from palletizer.core.errors import ConfigError
from palletizer.core.params.planning import (
    BeamParams,
    GridParams,
    HeuristicParams,
    read_weights,
)
from palletizer.core.planning.base import Planner, PlannerKind
from palletizer.core.planning.beam import BeamPlanner
from palletizer.core.planning.grid import GridPlanner
from palletizer.core.planning.heuristic import ScorePlanner
from palletizer.core.planning.reach import ReachOracle
from palletizer.core.planning.spec_rules import SpecRules
from palletizer.core.planning.tool import GripperGeometry

if TYPE_CHECKING:
    from palletizer.core.config import Config

__all__ = ['build_planner']


def build_planner(
    kind: PlannerKind | str,
    config: Config | None = None,
    *,
    heuristic: HeuristicParams | None = None,
    beam: BeamParams | None = None,
    grid: GridParams | None = None,
    reach: ReachOracle | None = None,
    pallet: PalletGeometry | None = None,
    weights_file: str | os.PathLike[str] | None = None,
    pallet_spec: Any = None,
) -> Planner:
    """A fresh planner of `kind` ('heuristic', 'beam' or 'grid') as the cell runs it.

    From `config` (the repository's configs/ when None): the kind's parameters
    (planner.yaml), the arm's measured reach table (reach_ur10e.npz) for the heuristic and beam
    search, and beam search's TCP height above a lid at release (cell.yaml: the gripper's
    cup_gap plus motion.drop_clearance [m]); the heuristic and beam search keep the gripper's
    body (cell.yaml `gripper`) clear of what stands beyond the carton at release
    (core.planning.tool). The grid baseline has neither.
    `heuristic`, `beam`, `grid`, `reach` and `pallet` (cell.yaml `pallet`) replace what the
    config gives. `weights_file` (`planner_weights:=`, heuristic only; e.g. scripts/train's
    best_weights.json) replaces the heuristic's 14 weights. `pallet_spec` (core.pallet_spec
    PalletSpec): the heuristic refuses every slot that breaks one of its hard rules, keeps box
    tops under its max_load_height_m and scores its weight order; beam search refuses every
    first move that breaks a hard rule; the grid baseline refuses a spec with a hard rule on. Raises ConfigError naming the kind and the allowed ones,
    or what is wrong with the weights file or the spec.
    """
    k = PlannerKind.parse(kind)
    if weights_file and k is not PlannerKind.heuristic:
        raise ConfigError(
            f'planner weights {str(weights_file)!r} with planner {k.value}; a weights file holds '
            'the 14 heuristic weights: use it with the heuristic planner only'
        )
    hard = pallet_spec is not None and SpecRules(pallet_spec, None, (0.0, 0.0)).active
    if hard and k is PlannerKind.grid:
        raise ConfigError(
            f'a pallet spec with hard rules and planner {k.value}: only the heuristic and beam '
            'search plan to a spec; use --planner heuristic or beam, or a spec without height, '
            'mass, crush or fragile rules'
        )
    if config is None:
        from palletizer.core.config import load_config  # config imports the planners' params

        config = load_config()
    pallet = pallet or PalletGeometry.from_config(config.cell.pallet)
    if k is PlannerKind.grid:
        params = grid or config.planner.grid
        return GridPlanner(params, pallet=pallet)
    tool = GripperGeometry.from_config(config.cell.gripper)
    if reach is None:
        from palletizer.core.motion.reach import ReachTable

        reach = ReachTable.load(config.reach_table)
    if k is PlannerKind.heuristic:
        h = heuristic or config.planner.heuristic
        if weights_file:
            h = dataclasses.replace(h, weights=read_weights(weights_file))
        rules = None
        if pallet_spec is not None:
            rules = SpecRules(pallet_spec, config.catalogue, pallet.size_xy)
        if hard:
            top = pallet_spec.max_load_height_m
            if top is not None and top < h.max_stack_height:
                h = dataclasses.replace(h, max_stack_height=top)
        return ScorePlanner(h, reach=reach, pallet=pallet, tool=tool, rules=rules)
    b = beam or config.planner.beam
    above = config.cell.gripper.cup_gap + config.cell.motion.drop_clearance
    rules = (
        SpecRules(pallet_spec, config.catalogue, pallet.size_xy)
        if pallet_spec is not None
        else None
    )
    return BeamPlanner(b, pallet=pallet, reach=reach, tcp_above_lid=above, tool=tool, rules=rules)
