"""The one planner factory: each kind configured from configs/ as the node serves it."""

from __future__ import annotations

import pytest
from palletizer.core.config import load_config, read_yaml
from palletizer.core.errors import ConfigError
from palletizer.core.motion import ReachTable
from palletizer.core.planning import (
    BeamParams,
    BeamPlanner,
    GridParams,
    GridPlanner,
    HeuristicParams,
    PlannerKind,
    ScorePlanner,
    build_planner,
)


@pytest.fixture(scope='module')
def config():
    return load_config()


def test_each_kind_takes_its_parameters_and_the_reach_table_from_the_config(config):
    raw = read_yaml(config.root / 'planner.yaml')
    heuristic = build_planner('heuristic', config)
    assert isinstance(heuristic, ScorePlanner)
    assert heuristic.params is config.planner.heuristic
    assert heuristic.params == HeuristicParams.from_mapping(raw['heuristic'], 'h')
    assert isinstance(heuristic.reach, ReachTable)

    beam = build_planner(PlannerKind.beam, config)
    assert isinstance(beam, BeamPlanner)
    assert beam.params is config.planner.beam
    assert beam.params == BeamParams.from_mapping(raw['beam'], 'b')
    assert isinstance(beam.reach, ReachTable)
    cup_gap = config.cell.gripper.cup_gap
    drop = config.cell.motion.drop_clearance
    assert beam.tcp_above_lid == pytest.approx(cup_gap + drop) and beam.tcp_above_lid > 0

    grid = build_planner('grid', config)
    assert isinstance(grid, GridPlanner)
    assert grid.params is config.planner.grid
    assert grid.params == GridParams.from_mapping(raw['grid'], 'g')


def test_explicit_parameters_and_reach_replace_the_configs(config):
    class Everywhere:
        def reachable(self, x, y, z_tcp, yaw):
            return x == x

    reach = Everywhere()
    beam = build_planner('beam', config, beam=BeamParams(beam_width=3), reach=reach)
    assert beam.params.beam_width == 3 and beam.reach is reach
    heuristic = build_planner('heuristic', config, reach=reach)
    assert heuristic.reach is reach


def test_a_misspelt_kind_is_named_with_the_allowed_ones(config):
    with pytest.raises(
        ConfigError, match=r"planner = 'bean'; expected one of .*did you mean 'beam'"
    ):
        build_planner('bean', config)
