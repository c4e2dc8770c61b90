"""list_runs and get_run through the in-memory client: runs read back from the runs folder on
disk, newest first, a run's episode lines as written, a bad id or limit named; and the call log
beside them, one line per call, refused ones included, earlier lines kept."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from palletizer.cli.mcp_calls import CALL_LOG
from palletizer.cli.mcp_runs import RUNS_LIMIT_MAX

from tests.mcp.conftest import connected


def _run(runs: Path, name: str, lines: list[dict]) -> Path:
    d = runs / name
    d.mkdir(parents=True)
    (d / 'events.jsonl').write_text('')
    (d / 'episodes.jsonl').write_text(''.join(json.dumps(ln) + '\n' for ln in lines))
    return d


def _ep(seed: int, success: bool, **extra) -> dict:
    return {
        'seed': seed,
        'level': 11,
        'task': 'table',
        'n_objects': 4,
        'n_placed': 4 if success else 3,
        'success': success,
        'failure': None if success else 'not_placed',
        'metrics': {'score': 1.0 if success else 0.5, **extra},
    }


@pytest.fixture
def runs(cell):
    r = cell.runs_dir
    _run(r, '20260101-000000-old', [_ep(1, True), _ep(2, False)])
    _run(r, '20260102-000000-mid', [_ep(3, False, aborted=True, abort_reason='stop')])
    _run(r, '20260103-000000-new', [_ep(4, True)])
    _run(r, '20260104-000000-open', [])  # an episode still running: no line yet
    (r / 'not-a-run').mkdir()  # no telemetry files: not listed
    return r


def _calls(cell, *calls: tuple[str, dict]):
    async def go():
        async with connected(cell) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    return anyio.run(go)


def test_list_runs_is_newest_first_with_each_outcome_and_bounded(cell, runs):
    full, two = _calls(cell, ('list_runs', {}), ('list_runs', {'limit': 2}))
    assert not full.is_error, full.content
    out = full.structured_content
    assert [r['id'] for r in out['runs']] == [
        '20260104-000000-open',
        '20260103-000000-new',
        '20260102-000000-mid',
        '20260101-000000-old',
    ]
    assert out['total'] == 4 and 'disk' in out['source']
    by_id = {r['id']: r for r in out['runs']}
    old = by_id['20260101-000000-old']
    assert (old['level'], old['seeds'], old['episodes'], old['succeeded']) == (11, [1, 2], 2, 1)
    assert old['outcome'] == 'failure' and old['placed'] == 7 and old['cartons'] == 8
    assert by_id['20260102-000000-mid']['outcome'] == 'aborted'
    assert by_id['20260103-000000-new']['outcome'] == 'success'
    assert by_id['20260104-000000-open']['outcome'] == 'open'
    assert [r['id'] for r in two.structured_content['runs']] == [
        '20260104-000000-open',
        '20260103-000000-new',
    ]
    assert two.structured_content['total'] == 4


@pytest.mark.parametrize('limit', [0, RUNS_LIMIT_MAX + 1])
def test_a_limit_out_of_range_is_refused(cell, runs, limit):
    (r,) = _calls(cell, ('list_runs', {'limit': limit}))
    assert r.is_error
    assert 'limit' in r.content[0].text, r.content[0].text


def test_get_run_returns_the_episode_lines_on_disk(cell, runs):
    (r,) = _calls(cell, ('get_run', {'run_id': '20260101-000000-old'}))
    assert not r.is_error, r.content
    out = r.structured_content
    disk = (runs / '20260101-000000-old' / 'episodes.jsonl').read_text().splitlines()
    assert out['episodes'] == [json.loads(ln) for ln in disk]
    assert out['run']['id'] == '20260101-000000-old' and out['run']['seeds'] == [1, 2]
    assert Path(out['run_dir']) == runs / '20260101-000000-old'


@pytest.mark.parametrize('run_id', ['nope', '../runs', 'not-a-run', '', CALL_LOG])
def test_a_bad_run_id_names_the_id_and_list_runs(cell, runs, run_id):
    (r,) = _calls(cell, ('get_run', {'run_id': run_id}))
    assert r.is_error
    text = r.content[0].text
    assert repr(run_id) in text and 'list_runs' in text, text
    assert '20260104-000000-open' in text  # the newest runs are named


def test_the_planner_of_a_run_this_server_started_comes_from_its_call_log(cell, runs):
    line = {
        'tool': 'run_episode',
        'arguments': {'level': 11, 'seed': 4, 'planner': 'beam'},
        'outcome': 'ok',
        'run_dir': str(runs / '20260103-000000-new'),
    }
    (runs / CALL_LOG).write_text(json.dumps(line) + '\n')
    (r,) = _calls(cell, ('list_runs', {}))
    by_id = {x['id']: x for x in r.structured_content['runs']}
    assert by_id['20260103-000000-new']['planner'] == 'beam'
    assert by_id['20260101-000000-old']['planner'] is None  # not recorded anywhere


def test_every_call_is_a_line_in_the_call_log_and_earlier_lines_stay(cell):
    log = cell.runs_dir / CALL_LOG
    log.parent.mkdir(parents=True)
    earlier = {'time': 'earlier', 'tool': 'list_levels', 'arguments': {}, 'outcome': 'ok'}
    log.write_text(json.dumps(earlier) + '\n')
    levels, refused, missing = _calls(
        cell,
        ('list_levels', {}),
        ('run_episode', {'level': 99, 'seed': 3}),
        ('get_run', {'run_id': 'nope'}),
    )
    assert not levels.is_error and refused.is_error and missing.is_error
    lines = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert lines[0] == earlier
    assert [(x['tool'], x['outcome']) for x in lines[1:]] == [
        ('list_levels', 'ok'),
        ('run_episode', 'refused'),
        ('get_run', 'refused'),
    ]
    ok, no, gone = lines[1:]
    assert ok['result'].startswith('{"levels":[{"id":11') and 'error' not in ok
    assert no['arguments'] == {
        'level': 99,
        'seed': 3,
        'planner': 'heuristic',
        'speed': 0.0,
        'perception': 'cameras',
    }
    assert 'level 99' in no['error'] and 'result' not in no
    assert gone['arguments'] == {'run_id': 'nope'} and "'nope'" in gone['error']
    assert all(x['time'] for x in lines)
    assert cell.manager.run is None  # the refused run never started
