"""planner_weights:=FILE: a trained weights file reaches the heuristic through the planner
factory, the launch options, the planner node's parameters and scripts/palletize; a bad file
or another planner fails before anything starts."""

from __future__ import annotations

import json

import pytest
from palletizer.cli.palletize import build_options
from palletizer.core.errors import ConfigError, GraphError
from palletizer.core.params.planning import DEFAULT_WEIGHTS
from palletizer.core.planning import build_planner
from palletizer.launcher.graph import describe, options_from_mapping

TRAINED = {**DEFAULT_WEIGHTS, 'bridge': 0.9, 'lowness': 0.25, 'void_fill': 1.7}


@pytest.fixture
def weights_file(tmp_path):
    """A best_weights.json as scripts/train writes it."""
    f = tmp_path / 'best_weights.json'
    f.write_text(json.dumps({'schema': 1, 'weight_id': 'abc', 'loss': 3, 'weights': TRAINED}))
    return f


def test_the_factory_builds_the_heuristic_with_the_file_weights(weights_file):
    p = build_planner('heuristic', weights_file=weights_file)
    assert dict(p.params.weights) == TRAINED
    assert dict(build_planner('heuristic').params.weights) != TRAINED
    with pytest.raises(ConfigError, match='with planner beam; .*heuristic planner only'):
        build_planner('beam', weights_file=weights_file)


def test_the_launch_option_reaches_the_planner_node(weights_file, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    o = options_from_mapping({'level': '11', 'planner_weights': 'best_weights.json'})
    assert o.planner_weights == str(weights_file)  # made absolute for the node
    node = next(n for n in describe(o) if n.name == 'planner')
    assert node.parameters['weights_file'] == str(weights_file)
    assert node.parameters['kind'] == 'heuristic'
    plain = next(n for n in describe(options_from_mapping({'level': '11'})) if n.name == 'planner')
    assert plain.parameters['weights_file'] == ''
    cli = build_options(['--level', '11', '--planner-weights', str(weights_file)])
    assert cli.planner_weights == str(weights_file)
    assert build_options(['level:=11', f'planner_weights:={weights_file}']) == cli


def test_a_bad_weights_file_or_planner_fails_before_anything_starts(weights_file, tmp_path):
    with pytest.raises(
        GraphError, match=r'planner_weights:=.* with planner:=beam; .*planner:=heuristic'
    ):
        options_from_mapping(
            {'level': '11', 'planner': 'beam', 'planner_weights': str(weights_file)}
        )
    bad = tmp_path / 'bad.json'
    bad.write_text(json.dumps({'weights': {**DEFAULT_WEIGHTS, 'lowness': -1.0}}))
    with pytest.raises(
        GraphError, match=r'bad\.json\.weights\.lowness = -1\.0; expected a finite number'
    ):
        build_options(['--level', '11', '--planner-weights', str(bad)])
    with pytest.raises(GraphError, match='cannot read the weights file'):
        options_from_mapping({'level': '11', 'planner_weights': str(tmp_path / 'missing.json')})
