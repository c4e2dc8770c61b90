"""Run control through the in-memory client: progress per carton, the episode line read back,
one run at a time, stop and cancel. Runs here are short Python scripts standing in for the
launcher (tests/mcp/test_episode.py runs the real one); they are real child processes, started,
stopped and reaped as a run is."""

from __future__ import annotations

import os
import sys

import anyio
import pytest
from palletizer.panel import runner

from tests.mcp.conftest import connected

GUARD_S = 60.0  # a hang fails the test instead of blocking the suite; no duration is asserted

# The director's console, as a level 11 episode prints it (nodes/director_sink.py).
_CARTONS = [
    '[episode_director]   std_m-00     std_m     L1  error   0.1 mm  support 100 %  margin +125.2 mm  ok',
    '[episode_director]   std_m-01     std_m     L1  error   0.2 mm  support 100 %  margin +214.1 mm  ok',
    '[episode_director]   std_m-02     std_m     L1  error   0.2 mm  support 100 %  margin +306.5 mm  ok',
    '[episode_director]   std_m-03     std_m     L1  error  31.0 mm  support  60 %  margin -12.5 mm  NOT PLACED',
]  # fmt: skip


def _launcher(run_dir: str, seed: int, hang: bool = False) -> str:
    """A stand-in launcher: the run's first lines, the cartons, the episode line and result; or,
    with `hang`, the first lines, then nothing until SIGINT (exit 130, as the launcher does)."""
    line = {'seed': seed, 'level': 11, 'n_placed': 3, 'success': False, 'failure': 'not_placed'}
    head = [
        '[launcher] ROS_DOMAIN_ID 42 (join)',
        f'[episode_director] telemetry writes {run_dir}',
    ]
    tail = [*_CARTONS, f'[episode_director] seed {seed}: 3/4 · FAILURE: not_placed']
    return (
        'import json, os, signal, sys, time\n'
        'signal.signal(signal.SIGINT, lambda *_: sys.exit(130))\n'
        f'for ln in {head!r}: print(ln, flush=True)\n'
        + ('time.sleep(600)\n' if hang else '')
        + f'os.makedirs({run_dir!r}, exist_ok=True)\n'
        f'open(os.path.join({run_dir!r}, "episodes.jsonl"), "w").write(json.dumps({line!r}) + "\\n")\n'
        f'for ln in {tail!r}: print(ln, flush=True)\n'
    )


@pytest.fixture
def fake_launcher(monkeypatch, tmp_path):
    """Runs start the stand-in instead of `scripts/palletize` (the request is still checked by
    the CLI's parser first); returns a setter for hanging."""
    real = runner.panel_argv
    mode = {'hang': False}

    def fake(req):
        real(req)
        script = _launcher(str(tmp_path / 'runs' / 'x'), req.seed, mode['hang'])
        return [sys.executable, '-c', script]

    monkeypatch.setattr(runner, 'panel_argv', fake)
    return mode


async def _until_running(client) -> dict:
    while True:
        st = (await client.call_tool('get_cell_state', {})).structured_content
        if st['run']['state'] == 'running':
            return st
        await anyio.sleep(0.05)


def test_an_episode_reports_each_carton_and_returns_its_line(cell, fake_launcher):
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    async def go():
        async with connected(cell) as client:
            with anyio.fail_after(GUARD_S):
                r = await client.call_tool(
                    'run_episode', {'level': 11, 'seed': 7}, progress_callback=on_progress
                )
                state = await client.call_tool('get_cell_state', {})
            return r, state

    r, state = anyio.run(go)
    assert not r.is_error, r.content
    out = r.structured_content
    assert out['run']['state'] == 'finished' and out['run']['seed'] == 7
    assert out['episode'] == {
        'seed': 7, 'level': 11, 'n_placed': 3, 'success': False, 'failure': 'not_placed'
    }  # fmt: skip
    assert out['result'] == 'seed 7: 3/4 · FAILURE: not_placed'
    assert [c['package_id'] for c in out['cartons']] == [f'std_m-0{i}' for i in range(4)]
    assert out['cartons'][3]['placed'] is False and out['cartons'][3]['margin_mm'] == -12.5
    assert [(d, t) for d, t, _ in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert progress[3][2] == 'std_m-03 (std_m) L1: NOT PLACED'
    st = state.structured_content
    assert st['last_result'] == out['episode']
    assert st['last_failure'] == 'seed 7: not_placed'
    assert st['cartons_done'] == 4 and st['held_carton'] is None


def test_one_run_at_a_time_and_stop_aborts_it(cell, fake_launcher):
    fake_launcher['hang'] = True

    async def go():
        async with connected(cell) as client, anyio.create_task_group() as tg:
            out: dict = {}

            async def run():
                out['run'] = await client.call_tool('run_episode', {'level': 11, 'seed': 3})

            tg.start_soon(run)
            with anyio.fail_after(GUARD_S):
                st = await _until_running(client)
                out['pid'] = st['run']['pid']
                out['second'] = await client.call_tool('run_episode', {'level': 12, 'seed': 1})
                out['stop'] = await client.call_tool('stop', {})
        return out

    out = anyio.run(go)
    assert out['second'].is_error
    assert 'already running' in out['second'].content[0].text
    assert out['stop'].structured_content['stopped'] is True
    run = out['run'].structured_content
    assert run['run']['state'] == 'aborted' and run['run']['exit_code'] == 130
    assert run['episode'] is None
    with pytest.raises(ProcessLookupError):
        os.kill(out['pid'], 0)


def test_cancelling_the_call_stops_the_episode(cell, fake_launcher):
    fake_launcher['hang'] = True

    async def go():
        async with connected(cell) as client:
            async with anyio.create_task_group() as tg:

                async def run():
                    await client.call_tool('run_episode', {'level': 11, 'seed': 2})

                tg.start_soon(run)
                with anyio.fail_after(GUARD_S):
                    pid = (await _until_running(client))['run']['pid']
                tg.cancel_scope.cancel()
            with anyio.fail_after(GUARD_S):
                while True:
                    st = (await client.call_tool('get_cell_state', {})).structured_content
                    if st['run']['state'] not in ('starting', 'running'):
                        return pid, st
                    await anyio.sleep(0.05)

    pid, st = anyio.run(go)
    assert st['run']['state'] == 'aborted'
    assert 'stopped before it wrote its line' in st['last_failure']
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
