"""The pallet spec: its schema, one test per kind of bad input, and the catalogue's attributes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from palletizer.core.config import load_config
from palletizer.core.pallet_spec import PalletSpec, SpecError, load_spec, read_spec, spec_schema

ROOT = Path(__file__).resolve().parents[2]
TYPES = sorted(load_config().catalogue.types)


def problems(doc, types=TYPES):
    with pytest.raises(SpecError) as info:
        load_spec(doc, types)
    return [str(p) for p in info.value.problems], str(info.value)


def test_the_empty_spec_turns_every_rule_off():
    for doc in (None, {}, {'schema': 1}):
        spec = load_spec(doc, TYPES)
        assert spec.empty and spec.this_side_up is True
        assert spec.to_dict() == {'schema': 1, 'name': '', 'this_side_up': True}


def test_a_full_spec_is_normalised_with_each_rule_s_defaults():
    spec = read_spec(ROOT / 'configs/specs/store.yaml', TYPES)
    assert not spec.empty and spec.max_load_height_m == 1.2
    assert spec.weight_order is not None and spec.weight_order.tolerance_kg == 0.5
    assert spec.crush is not None and spec.crush.limits_kg == {}
    assert spec.group_by is not None and spec.group_by.key == 'group'
    # A rule given as an empty mapping is on, with its defaults.
    lo = load_spec({'label_out': {}}, TYPES)
    assert lo.label_out is not None and lo.label_out.perimeter_band_m == 0.05
    # Normalised output validates to the same spec (what a service or the panel sends back).
    assert load_spec(spec.to_dict(), TYPES) == spec


@pytest.mark.parametrize(
    ('doc', 'key', 'expected'),
    [
        ({'max_load_hieght_m': 1.2}, 'max_load_hieght_m', "did you mean 'max_load_height_m'?"),
        (
            {'weight_order': {'tolerence_kg': 1}},
            'weight_order.tolerence_kg',
            'a key among tolerance_kg, weight',
        ),
        ({'max_load_height_m': 2.0}, 'max_load_height_m', 'less than or equal to 1.65'),
        ({'max_load_height_m': 0}, 'max_load_height_m', 'greater than 0'),
        ({'max_load_height_m': '1.2'}, 'max_load_height_m', 'a valid number'),
        ({'max_load_mass_kg': True}, 'max_load_mass_kg', 'a valid number'),
        (
            {'weight_order': {'tolerance_kg': -0.1}},
            'weight_order.tolerance_kg',
            'greater than or equal to 0',
        ),
        (
            {'weight_order': 'yes'},
            'weight_order',
            'a mapping with keys tolerance_kg, weight, or null',
        ),
        (
            {'label_out': {'perimeter_band_m': 0.5}},
            'label_out.perimeter_band_m',
            'less than or equal to 0.4',
        ),
        ({'group_by': {'key': 'aisle'}}, 'group_by.key', "'type' or 'group'"),
        ({'group_by': {}}, 'group_by.key', 'this key is required'),
        ({'this_side_up': False}, 'this_side_up', 'every pick is tool-down on the lid'),
        ({'schema': 2}, 'schema', 'expected 1'),
        ({'crush': {'limits_kg': {'std_s': 0}}}, 'crush.limits_kg.std_s', 'greater than 0'),
        (
            {'crush': {'limits_kg': {'std_q': 20}}},
            'crush.limits_kg.std_q',
            "did you mean 'std_s'?",
        ),
        ({'fragile': {'types': ['pouch_x']}}, 'fragile.types[0]', 'a catalogue type: apparel, '),
        ({'fragile': {'types': 'pouch_xs'}}, 'fragile.types', 'a valid list'),
        ({'name': 'x' * 81}, 'name', 'at most 80 characters'),
        ([1, 2], '(spec)', 'a mapping of rules'),
    ],
)
def test_each_bad_input_names_the_key_and_what_is_allowed(doc, key, expected):
    found, text = problems(doc)
    assert len(found) == 1, found
    assert found[0].startswith(f'{key} = '), found
    assert expected in found[0], found
    assert text.startswith('pallet spec: 1 problem(s)')


def test_every_problem_is_reported_at_once():
    found, _ = problems({'max_load_height_m': -1, 'crush': {'limits_kg': {'x': -2}}, 'colour': 1})
    keys = [f.split(' = ')[0] for f in found]
    # The schema's three, then the type the catalogue does not have.
    assert keys == ['max_load_height_m', 'crush.limits_kg.x', 'colour', 'crush.limits_kg.x']
    assert 'greater than 0' in found[1] and 'a catalogue type' in found[3]


def test_files_are_read_as_yaml_or_json_and_bad_files_are_named(tmp_path):
    j = tmp_path / 'spec.json'
    j.write_text(json.dumps({'max_load_height_m': 1.1}))
    assert read_spec(j).max_load_height_m == 1.1
    bad = tmp_path / 'bad.yaml'
    bad.write_text('max_load_height_m: [1.2\n')
    with pytest.raises(SpecError, match=r'(?s)bad\.yaml.*\(file\)'):
        read_spec(bad)
    with pytest.raises(SpecError, match='a readable file'):
        read_spec(tmp_path / 'missing.yaml')


def test_the_committed_schema_is_the_models_schema():
    committed = json.loads((ROOT / 'configs/pallet_spec.schema.json').read_text())
    assert committed == spec_schema(), (
        'rewrite it: scripts/spec schema > configs/pallet_spec.schema.json'
    )
    assert committed['additionalProperties'] is False
    assert set(committed['properties']) == {
        PalletSpec.model_fields[n].alias or n for n in PalletSpec.model_fields
    }


def test_the_command_checks_a_file_and_prints_every_problem(tmp_path):
    bad = tmp_path / 'bad.yaml'
    bad.write_text('max_load_height_m: 3\nfragile: {types: [nothing]}\n')
    run = [sys.executable, '-m', 'palletizer.cli.spec']
    ok = subprocess.run([*run, 'check', str(ROOT / 'configs/specs/store.yaml')],
                        capture_output=True, text=True, check=False)  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)['max_load_height_m'] == 1.2
    no = subprocess.run([*run, 'check', str(bad)], capture_output=True, text=True, check=False)
    assert no.returncode == 2
    assert 'max_load_height_m = 3' in no.stderr and "fragile.types[0] = 'nothing'" in no.stderr


def test_the_catalogue_gives_each_type_its_rules_and_a_crush_limit_from_its_board():
    cat = load_config().catalogue
    std_m = cat.types['std_m']
    assert std_m.rules.board == 'C32' and std_m.rules.label == '+y'
    assert cat.types['pouch_xs'].rules.fragile and not std_m.rules.fragile
    # McKee: 5.87 x 5604 N/m x sqrt(0.004 m x 1.44 m) = 2497 N; / (9.81 x 4) = 63.6 kg.
    assert cat.crush_limit_kg('std_m', std_m.dims) == pytest.approx(63.6, abs=0.05)
    # A stronger board carries more, a weaker one less; a random carton uses random.rules.
    assert cat.crush_limit_kg('heavy_l', (0.42, 0.30, 0.18)) > 63.6
    assert cat.crush_limit_kg('pouch_xs', (0.42, 0.30, 0.18)) < 63.6
    assert cat.rules('random') == cat.random_rules and cat.rules('random').board == 'C32'
