"""End to end over stdio: `scripts/mcp`'s server in a child process (in its own network
namespace where the machine allows one), an MCP client session from the SDK, one real
fast-forward episode of level 11 seed 1 through the full node graph, read back from disk and
through get_run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tests.graph.isolation import _NETNS, can_isolate

pytestmark = [pytest.mark.graph, pytest.mark.sim, pytest.mark.serial]

# A hang fails the test instead of blocking the suite; no duration is asserted. A fast-forward
# level 11 episode takes about 80 s on 2 busy cores.
GUARD_S = 480.0


def _server(work: Path) -> StdioServerParameters:
    argv = [sys.executable, '-m', 'palletizer.cli.mcp_server', '--runs', str(work / 'runs')]
    env = {**os.environ, 'PYTHONUNBUFFERED': '1'}
    if can_isolate():  # no namespace here: the run still has its own DDS domain
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=work)
    env['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    return StdioServerParameters(
        command='unshare', args=['-n', 'sh', '-c', _NETNS, 'sh', *argv], env=env, cwd=work
    )


def test_level_11_seed_1_runs_with_progress_and_its_line_is_the_one_on_disk(tmp_path):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def go():
        async with Client(_server(tmp_path)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            spec = await client.call_tool('set_pallet_spec', {'spec': {'max_load_height_m': 1.2}})
            empty = await client.call_tool(
                'preview_placement', {'dims_m': [0.42, 0.30, 0.18], 'mass_kg': 4.2}
            )
            with anyio.fail_after(GUARD_S):
                run = await client.call_tool(
                    'run_episode',
                    {'level': 11, 'seed': 1, 'speed': 0.0},
                    progress_callback=on_progress,
                )
            after = await client.call_tool(
                'preview_placement', {'dims_m': [0.42, 0.30, 0.18], 'mass_kg': 4.2}
            )
            state = await client.call_tool('get_cell_state', {})
            run_id = Path((run.structured_content or {})['run']['run_dir'] or '.').name
            got = await client.call_tool('get_run', {'run_id': run_id})
            listed = await client.call_tool('list_runs', {'limit': 1})
            stab = await client.call_tool('check_stability', {})
            return tools, spec, empty, run, after, state, got, listed, stab

    tools, spec, empty, run, after, state, got, listed, stab = anyio.run(go)
    assert 'run_episode' in tools
    assert not spec.is_error and not empty.is_error
    assert empty.structured_content['stack'] == 'empty'  # nothing has run yet
    assert not run.is_error, run.content
    out = run.structured_content
    assert out['run']['state'] == 'finished', out['error']
    assert out['result'] == 'seed 1: 4/4 · SUCCESS'
    assert [(d, t) for d, t, _ in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert all(c['placed'] for c in out['cartons'])
    # The episode line is the one telemetry wrote, and the spec reached the run.
    run_dir = Path(out['run']['run_dir'])
    assert run_dir.parent == tmp_path / 'runs'
    lines = [json.loads(ln) for ln in (run_dir / 'episodes.jsonl').read_text().splitlines()]
    assert out['episode'] == lines[-1]
    assert lines[-1]['seed'] == 1 and lines[-1]['success'] is True
    assert lines[-1]['metrics']['pallet_spec']['max_load_height_m'] == 1.2
    # The preview now plans on the stack the episode left.
    p = after.structured_content
    assert p['stack'] == f'{run_dir.name} seed 1' and p['stack_cartons'] == 4
    assert state.structured_content['last_result'] == lines[-1]
    assert state.structured_content['last_failure'] is None
    # get_run reads the run back from disk: its episode line is the one on disk and the one
    # run_episode returned; list_runs names it newest, with the planner from the call log.
    assert not got.is_error, got.content
    assert got.structured_content['episodes'] == lines
    assert got.structured_content['episodes'][-1] == out['episode']
    assert got.structured_content['run']['seeds'] == [1]
    assert got.structured_content['run']['outcome'] == 'success'
    newest = listed.structured_content['runs'][0]
    assert newest['id'] == run_dir.name and newest['planner'] == 'heuristic'
    calls = [
        json.loads(ln) for ln in (tmp_path / 'runs' / 'mcp-calls.jsonl').read_text().splitlines()
    ]
    ran = [c for c in calls if c['tool'] == 'run_episode']
    assert [c['outcome'] for c in ran] == ['ok', 'ok']
    assert ran[-1]['run_dir'] == str(run_dir)
    # The trials run on the stack the episode left, rebuilt in the simulated cell.
    assert not stab.is_error, stab.content
    assert stab.structured_content['stack'] == f'{run_dir.name} seed 1'
    assert stab.structured_content['cartons'] == 4
    assert len(stab.structured_content['trials']) > 15
