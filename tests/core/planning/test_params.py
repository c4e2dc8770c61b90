"""Planner parameters: defaults, validation and config errors that name where, key and value."""

from __future__ import annotations

import pytest
from palletizer.core.errors import ConfigError
from palletizer.core.planning import (
    BEAM_TERMS,
    DEFAULT_BEAM_WEIGHTS,
    DEFAULT_WEIGHTS,
    TERMS,
    BeamParams,
    GridParams,
    HeuristicParams,
)

WHERE = 'planner.yaml: heuristic'


def test_defaults_are_the_reference_values():
    p = HeuristicParams()
    assert len(TERMS) == 14 and set(p.weights) == set(TERMS)
    assert sum(DEFAULT_WEIGHTS.values()) == pytest.approx(8.0)
    assert (p.cell, p.clearance, p.support_tol, p.proximity_band) == (0.010, 0.040, 0.001, 0.02)
    assert (p.levelness_scale, p.useful_gap, p.min_support_ratio) == (0.2, 0.0, 0.60)
    assert (p.lowness_scale, p.max_stack_height, p.tie_eps, p.yaws) == (0.55, 1.35, 1e-9, (0, 90))
    assert p.allow_unobserved is True
    b = BeamParams()
    assert (b.min_support_ratio, b.min_tipping_margin, b.beam_width) == (0.62, 0.008, 20)
    assert (b.lookahead, b.candidates_per_node, b.surface_samples) == (3, 40, (12, 10))
    assert set(b.weights) == set(BEAM_TERMS)
    assert sum(DEFAULT_BEAM_WEIGHTS.values()) == pytest.approx(1.0, abs=1e-3)
    assert GridParams().min_support_ratio == 0.60


def test_from_mapping_reads_a_config_block():
    p = HeuristicParams.from_mapping(
        {'weights': dict(DEFAULT_WEIGHTS, reachability=0.7), 'clearance': 0.05}, WHERE
    )
    assert p.weights['reachability'] == 0.7 and p.clearance == 0.05
    assert BeamParams.from_mapping({'beam_width': 8}, 'planner.yaml: beam').beam_width == 8
    assert GridParams.from_mapping({}, 'planner.yaml: grid') == GridParams()


def test_a_misspelt_key_names_where_and_suggests():
    with pytest.raises(ConfigError, match=r"heuristic\.clearence: unknown key.*'clearance'"):
        HeuristicParams.from_mapping({'clearence': 0.04}, WHERE)


def test_a_misspelt_weight_names_where_and_suggests():
    w = dict(DEFAULT_WEIGHTS)
    w['gap_wast'] = w.pop('gap_waste')
    with pytest.raises(ConfigError, match=r"heuristic\.weights\.gap_wast.*'gap_waste'"):
        HeuristicParams.from_mapping({'weights': w}, WHERE)


def test_weights_must_be_all_fourteen_finite_non_negative_and_one_positive():
    w = dict(DEFAULT_WEIGHTS)
    del w['bridge']
    with pytest.raises(ConfigError, match=r"heuristic\.weights: missing weight 'bridge'"):
        HeuristicParams.from_mapping({'weights': w}, WHERE)
    with pytest.raises(ConfigError, match=r'heuristic\.weights\.lowness = -0\.1'):
        HeuristicParams.from_mapping({'weights': dict(DEFAULT_WEIGHTS, lowness=-0.1)}, WHERE)
    with pytest.raises(ConfigError, match=r'heuristic\.weights\.lowness = nan'):
        HeuristicParams.from_mapping(
            {'weights': dict(DEFAULT_WEIGHTS, lowness=float('nan'))}, WHERE
        )
    with pytest.raises(ConfigError, match='at least one weight > 0'):
        HeuristicParams.from_mapping({'weights': dict.fromkeys(TERMS, 0.0)}, WHERE)


def test_bad_scalars_name_key_value_and_range():
    with pytest.raises(ConfigError, match=r'heuristic\.min_support_ratio = 1\.5; expected'):
        HeuristicParams.from_mapping({'min_support_ratio': 1.5}, WHERE)
    with pytest.raises(ConfigError, match=r'heuristic\.yaws = \(0, 45\); expected .*quarter'):
        HeuristicParams.from_mapping({'yaws': (0, 45)}, WHERE)
    with pytest.raises(ConfigError, match=r'beam\.beam_width = 0; expected an integer >= 1'):
        BeamParams.from_mapping({'beam_width': 0}, 'planner.yaml: beam')
    with pytest.raises(ConfigError, match=r"grid\.clearance = 'wide'"):
        GridParams.from_mapping({'clearance': 'wide'}, 'planner.yaml: grid')
    with pytest.raises(ConfigError, match=r'heuristic = \[1, 2\]; expected a mapping'):
        HeuristicParams.from_mapping([1, 2], WHERE)


def test_the_shipped_planner_config_loads_into_these_dataclasses():
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[3] / 'configs' / 'planner.yaml'
    d = yaml.safe_load(path.read_text())
    h = HeuristicParams.from_mapping(d['heuristic'], 'planner.yaml: heuristic')
    b = BeamParams.from_mapping(d['beam'], 'planner.yaml: beam')
    g = GridParams.from_mapping(d['grid'], 'planner.yaml: grid')
    assert set(h.weights) == set(TERMS) and set(b.weights) == set(BEAM_TERMS)
    assert g.clearance > 0.0


def test_build_planner_by_kind_and_a_misspelt_kind_is_named():
    from palletizer.core.planning import (
        BeamPlanner,
        GridPlanner,
        PlannerKind,
        ScorePlanner,
        build_planner,
    )

    assert isinstance(build_planner('heuristic'), ScorePlanner)
    assert isinstance(build_planner(PlannerKind.beam, beam=BeamParams(beam_width=3)), BeamPlanner)
    assert build_planner('beam', beam=BeamParams(beam_width=3)).params.beam_width == 3
    assert isinstance(build_planner('grid'), GridPlanner)
    with pytest.raises(ConfigError, match="planner = 'heuristc'.*did you mean 'heuristic'"):
        build_planner('heuristc')
