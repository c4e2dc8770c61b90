"""pallet_spec:=FILE / --spec FILE: a pallet spec reaches the planner through the launch options
and scripts/palletize; a bad spec, or hard rules with a planner that
does not plan to them (the grid), fails before anything starts."""

from __future__ import annotations

import pytest
from palletizer.cli.palletize import build_options
from palletizer.core.errors import GraphError
from palletizer.launcher.graph import describe, options_from_mapping


@pytest.fixture
def spec_file(tmp_path):
    f = tmp_path / 'store.yaml'
    f.write_text('max_load_height_m: 1.1\nfragile: {}\nlabel_out: {}\n')
    return f


def test_the_launch_option_reaches_the_planner(spec_file, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    o = options_from_mapping({'level': '11', 'pallet_spec': 'store.yaml'})
    assert o.pallet_spec == str(spec_file)  # made absolute for the nodes
    nodes = {n.name: n for n in describe(o)}
    assert nodes['planner'].parameters['pallet_spec'] == str(spec_file)
    # The director asks the planner for the spec each episode: one holder, no second copy.
    assert 'pallet_spec' not in nodes['episode_director'].parameters
    plain = {n.name: n for n in describe(options_from_mapping({'level': '11'}))}
    assert plain['planner'].parameters['pallet_spec'] == ''
    cli = build_options(['--level', '11', '--spec', str(spec_file)])
    assert cli.pallet_spec == str(spec_file)
    assert build_options(['level:=11', f'pallet_spec:={spec_file}']) == cli


def test_a_bad_spec_or_planner_fails_before_anything_starts(spec_file, tmp_path):
    with pytest.raises(
        GraphError, match=r'pallet_spec:=.* with planner:=grid; .*planner:=heuristic or beam'
    ):
        options_from_mapping({'level': '11', 'planner': 'grid', 'pallet_spec': str(spec_file)})
    assert options_from_mapping({'level': '11', 'planner': 'beam', 'pallet_spec': str(spec_file)})
    soft = tmp_path / 'soft.yaml'
    soft.write_text('label_out: {}\nweight_order: {}\n')
    assert options_from_mapping({'level': '11', 'planner': 'grid', 'pallet_spec': str(soft)})
    bad = tmp_path / 'bad.yaml'
    bad.write_text('max_load_height_m: 9\ncrush: {limits_kg: {std_x: 5}}\n')
    with pytest.raises(GraphError) as info:
        build_options(['--level', '11', '--spec', str(bad)])
    text = str(info.value)
    assert 'max_load_height_m = 9; expected less than or equal to 1.65' in text
    assert "crush.limits_kg.std_x = 'std_x'; expected a catalogue type" in text
    with pytest.raises(GraphError, match='a readable file'):
        options_from_mapping({'level': '11', 'pallet_spec': str(tmp_path / 'missing.yaml')})


def test_a_rule_level_runs_to_its_own_spec_unless_told_otherwise(spec_file):
    from pathlib import Path

    own = options_from_mapping({'level': '18'}).pallet_spec
    assert Path(own).name == 'store.yaml' and Path(own).parent.name == 'specs'
    assert options_from_mapping({'level': '24', 'pallet_spec': 'none'}).pallet_spec == ''
    assert options_from_mapping({'level': '35', 'pallet_spec': str(spec_file)}).pallet_spec == (
        str(spec_file)
    )
    assert options_from_mapping({'level': '12'}).pallet_spec == ''
    # The level's spec has hard rules: the grid needs pallet_spec:=none there.
    with pytest.raises(GraphError, match=r'with planner:=grid'):
        options_from_mapping({'level': '18', 'planner': 'grid'})
    assert options_from_mapping({'level': '18', 'planner': 'grid', 'pallet_spec': 'none'})
