"""The MCP tools through the SDK's in-memory client: their schemas and annotations, the levels,
the pallet spec, a placement preview and the run limits, each refusal naming the field."""

from __future__ import annotations

import json

import anyio
import pytest
import yaml
from palletizer.cli.mcp_preview import read_stack
from palletizer.core.config import config_dir

from tests.mcp.conftest import connected

TOOLS = {
    # name: (read-only, destructive, idempotent)
    'list_levels': (True, False, True),
    'get_pallet_spec': (True, False, True),
    'set_pallet_spec': (False, False, True),
    'preview_placement': (True, False, True),
    'run_episode': (False, True, False),
    'stop': (False, False, True),
    'get_cell_state': (True, False, True),
    'list_runs': (True, False, True),
    'get_run': (True, False, True),
    'check_stability': (True, False, True),
}


def _call(cell, name: str, args: dict | None = None):
    async def go():
        async with connected(cell) as client:
            return await client.call_tool(name, args or {})

    return anyio.run(go)


def test_every_tool_has_a_schema_a_typed_result_and_annotations(cell):
    async def go():
        async with connected(cell) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in anyio.run(go)}
    assert set(tools) == set(TOOLS)
    for name, (read_only, destructive, idempotent) in TOOLS.items():
        t = tools[name]
        a = t.annotations
        assert (a.read_only_hint, a.destructive_hint, a.idempotent_hint) == (
            read_only,
            destructive,
            idempotent,
        ), name
        assert t.input_schema['type'] == 'object', name
        assert t.output_schema is not None and t.output_schema['type'] == 'object', name
        assert t.description, name
    run = tools['run_episode'].input_schema['properties']
    assert (run['seed']['minimum'], run['seed']['maximum']) == (1, 100)
    assert tools['run_episode'].input_schema['required'] == ['level']
    assert run['speed']['minimum'] == 0.0
    dims = tools['preview_placement'].input_schema['properties']['dims_m']
    assert (dims['minItems'], dims['maxItems']) == (3, 3)
    # The spec's own schema stands alone inside the tool's (no dangling $ref).
    spec = tools['set_pallet_spec'].input_schema['properties']['spec']
    assert 'max_load_height_m' in spec['anyOf'][0]['properties']
    assert '$ref' not in json.dumps(spec)
    assert 'held_carton' in tools['get_cell_state'].output_schema['properties']


def test_list_levels_are_the_levels_yaml_entries(cell):
    doc = yaml.safe_load((config_dir() / 'levels.yaml').read_text(encoding='utf-8'))
    want = sorted((lv['id'], lv['source'], lv['n']) for lv in doc['levels'])
    r = _call(cell, 'list_levels')
    assert not r.is_error
    got = sorted((lv['id'], lv['source'], lv['cartons']) for lv in r.structured_content['levels'])
    assert got == want


def test_a_good_spec_comes_back_normalised_and_is_current(cell):
    async def go():
        async with connected(cell) as client:
            put = await client.call_tool(
                'set_pallet_spec',
                {'spec': {'max_load_height_m': 1.2, 'weight_order': {}, 'fragile': None}},
            )
            got = await client.call_tool('get_pallet_spec', {})
            return put, got

    put, got = anyio.run(go)
    assert not put.is_error, put.content
    spec = put.structured_content['spec']
    assert spec['max_load_height_m'] == 1.2
    assert spec['weight_order'] == {'tolerance_kg': 0.5, 'weight': 1.0}  # defaults filled in
    assert 'fragile' not in spec  # a rule that is off is left out
    assert sorted(put.structured_content['rules_on']) == ['max_load_height_m', 'weight_order']
    assert got.structured_content['spec'] == spec
    assert json.loads(cell.spec_json) == spec  # what the next run gets as --spec


def test_a_bad_spec_is_refused_naming_each_key_and_the_current_one_stays(cell):
    _call(cell, 'set_pallet_spec', {'spec': {'max_load_height_m': 1.0}})
    r = _call(
        cell,
        'set_pallet_spec',
        {'spec': {'max_load_height_m': 3.0, 'fragile': {'types': ['glass']}, 'colour': 'red'}},
    )
    assert r.is_error
    text = r.content[0].text
    assert 'max_load_height_m = 3.0; expected less than or equal to 1.65' in text
    assert "fragile.types[0] = 'glass'; expected a catalogue type" in text
    assert 'colour' in text and 'a key among' in text
    assert cell.spec is not None and cell.spec.max_load_height_m == 1.0


def test_preview_on_an_empty_pallet_names_the_slot_terms_and_margin(cell):
    r = _call(
        cell,
        'preview_placement',
        {'dims_m': [0.42, 0.30, 0.18], 'mass_kg': 4.2, 'stack': 'empty'},
    )
    assert not r.is_error, r.content
    p = r.structured_content
    assert p['found'] and p['stack'] == 'empty' and p['stack_cartons'] == 0
    assert p['layer'] == 1
    x, y, z = p['position_m']
    assert z == pytest.approx(0.09)  # on the deck: half the carton's height
    assert abs(x) + 0.21 <= 0.6 + 1e-9 and abs(y) + 0.15 <= 0.4 + 1e-9  # on the pallet
    assert set(p['score_terms']) >= {'support_ratio', 'com_margin', 'lowness'}
    assert all(0.0 <= v <= 1.0 for v in p['score_terms'].values())
    assert p['stability_margin_m'] > 0.0 and p['stability_margin_before_m'] is None


def test_preview_plans_on_the_stack_a_run_left(tmp_path):
    """read_stack rebuilds an episode's stack from placements.jsonl; the preview plans above it."""
    from palletizer.cli.mcp_preview import preview
    from palletizer.core.config import load_config
    from palletizer.core.planning import PlannerKind

    row = {
        'seed': 3, 'seq': 2, 'package_id': 'std_m-00', 'package_type': 'std_m', 'mass_kg': 4.2,
        'dims_m': [1.2, 0.8, 0.18], 'layer': 1,
        'planned_pose': {'x': 0.0, 'y': 0.0, 'z': 0.09, 'yaw': 0.0},
        'actual_pose': {'x': 0.0, 'y': 0.0, 'z': 0.09, 'yaw': 0.0},
        'error_xy_m': 0.0, 'error_yaw_rad': 0.0, 'support_ratio': 1.0, 'overhang_m': 0.0,
        'placed': True,
    }  # fmt: skip
    (tmp_path / 'placements.jsonl').write_text(json.dumps(row) + '\n{"seed": 3, "seq"')
    stack = read_stack(tmp_path)
    assert [p.package_id for p in stack] == ['std_m-00']  # the half-written line is skipped
    p = preview([0.42, 0.3, 0.18], 4.2, stack, 'run', PlannerKind.heuristic, None, load_config())
    assert p.found and p.layer == 2 and p.stack_cartons == 1
    assert p.position_m is not None and p.position_m[2] == pytest.approx(0.18 + 0.09)
    assert p.stability_margin_before_m is not None and p.stability_margin_before_m > 0.0


@pytest.mark.parametrize(
    ('args', 'words'),
    [
        ({'dims_m': [0.4, 0.3], 'mass_kg': 4.0}, ['dims_m', 'at least 3']),
        ({'dims_m': [0.4, 0.3, 2.0], 'mass_kg': 4.0}, ['dims_m', 'less than or equal to 1.2']),
        ({'dims_m': [0.4, 0.3, 0.2], 'mass_kg': 40.0}, ['mass_kg = 40.0', '9.95 kg']),
        (
            {'dims_m': [0.4, 0.3, 0.2], 'mass_kg': 4.0, 'planner': 'magic'},
            ['planner', 'heuristic'],
        ),
    ],
)
def test_a_bad_preview_names_the_field_and_what_is_allowed(cell, args, words):
    r = _call(cell, 'preview_placement', args)
    assert r.is_error
    for w in words:
        assert w in r.content[0].text, r.content[0].text


@pytest.mark.parametrize(
    ('args', 'words'),
    [
        ({'level': 11, 'seed': 101}, ['seed', 'above 100 are reserved', 'allowed: 1-100']),
        ({'level': 11, 'seed': 0}, ['seed', 'allowed: 1-100']),
        ({'level': 99}, ['level 99', 'expected one of 11, 12']),
        ({'level': 11, 'speed': 1.5}, ['speed 1.5', 'to 1.0', '--max-speed']),
        ({'level': 11, 'planner': 'magic'}, ['planner', 'heuristic', 'beam', 'grid']),
        ({'seed': 1}, ['level', 'Field required']),
    ],
)
def test_run_episode_refuses_what_the_limits_do_not_allow(cell, args, words):
    r = _call(cell, 'run_episode', args)
    assert r.is_error
    for w in words:
        assert w in r.content[0].text, r.content[0].text
    assert cell.manager.run is None  # nothing was started


def test_the_state_is_a_tool_and_a_resource(cell):
    async def go():
        async with connected(cell) as client:
            tool = await client.call_tool('get_cell_state', {})
            res = await client.read_resource('cell://state')
            return tool, res

    tool, res = anyio.run(go)
    assert not tool.is_error
    assert tool.structured_content['run']['state'] == 'idle'
    assert tool.structured_content['limits']['seed_max'] == 100
    assert json.loads(res.contents[0].text) == tool.structured_content


def test_stop_with_nothing_running_says_so(cell):
    r = _call(cell, 'stop')
    assert not r.is_error
    assert r.structured_content['stopped'] is False
    assert 'no episode is running' in r.structured_content['message']
