"""The panel's server: the token, the options from levels.yaml, run control and clear errors.

Runs here are short shell commands standing in for the launcher (the browser tests start the
real one); they are real child processes, started, stopped and reaped as a run is.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import pytest
import yaml
from starlette.websockets import WebSocketDisconnect

with warnings.catch_warnings():  # starlette's test client warns about its httpx dependency
    warnings.simplefilter('ignore')
    from fastapi.testclient import TestClient

from palletizer.core.config import config_dir
from palletizer.panel import runner
from palletizer.panel.runner import RunManager
from palletizer.panel.server import COOKIE, PanelConfig, create_app

TOKEN = 'test-token-1234'


@pytest.fixture
def manager(tmp_path):
    m = RunManager(tmp_path)
    yield m
    m.close()


@pytest.fixture
def client(tmp_path, manager):
    cfg = PanelConfig(token=TOKEN, root=tmp_path, runs_dir=tmp_path / 'runs', live=False)
    with TestClient(create_app(cfg, manager), cookies={COOKIE: TOKEN}) as c:
        yield c


def _fake_argv(monkeypatch, argv: list[str]) -> None:
    """Runs start `argv` instead of the launcher (the request is still validated)."""
    real = runner.panel_argv

    def fake(req):
        real(req)
        return argv

    monkeypatch.setattr(runner, 'panel_argv', fake)


def _fake(monkeypatch, script: str) -> None:
    _fake_argv(monkeypatch, ['sh', '-c', script])


# A stand-in launcher that, like the real one, handles SIGINT itself and exits 130 (a shell
# could not: one started where SIGINT is ignored, as a background job, cannot trap it).
_LAUNCHER = (
    'import signal, sys, time\n'
    'signal.signal(signal.SIGINT, lambda *_: sys.exit(130))\n'
    "print('[launcher] ROS_DOMAIN_ID 42 (join)', flush=True)\n"
    'time.sleep(60)\n'
)


def _wait(client, state: str, timeout: float = 20.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = client.get('/api/run').json()
        if st['state'] == state:
            return st
        time.sleep(0.05)
    raise AssertionError(f'run state {st["state"]!r}, expected {state!r}: {st}')


def test_every_request_needs_the_token(tmp_path, manager):
    cfg = PanelConfig(token=TOKEN, root=tmp_path, runs_dir=tmp_path / 'runs', live=False)
    with TestClient(create_app(cfg, manager)) as c:
        assert c.get('/').status_code == 401
        assert c.get('/api/options').status_code == 401
        assert 'token' in c.get('/api/options').json()['detail']
        assert c.get('/api/options?token=wrong').status_code == 401
        assert c.get('/static/app.js').status_code == 401
        assert (
            c.get('/api/options', headers={'Authorization': f'Bearer {TOKEN}'}).status_code == 200
        )
        page = c.get(f'/?token={TOKEN}')
        assert page.status_code == 200 and '<canvas' in page.text
        # The first load sets the cookie: later requests need no token in the URL.
        assert c.get('/vendor/three/build/three.module.js').status_code == 200
        with TestClient(create_app(cfg, manager)) as bare:
            with pytest.raises(WebSocketDisconnect) as closed, bare.websocket_connect('/ws'):
                pass
            assert closed.value.code == 1008


def test_the_websocket_sends_the_status_and_the_live_view(client):
    with client.websocket_connect('/ws') as ws:
        assert ws.receive_json()['type'] == 'status'
        assert ws.receive_json()['type'] == 'live'


def test_the_robot_reaches_the_page_and_then_only_its_joints_move(tmp_path, manager):
    from palletizer.panel.observer import LiveState

    from tests.panel.robot_panel import FIXTURE_URDF

    live = LiveState()
    cfg = PanelConfig(token=TOKEN, root=tmp_path, runs_dir=tmp_path / 'runs', live=False)
    with TestClient(create_app(cfg, manager, live=live), cookies={COOKIE: TOKEN}) as c:
        assert c.get('/api/live/robot').json() == {'urdf': None, 'origin': None, 'joints': {}}
        live.on_robot_description(FIXTURE_URDF)
        assert c.get('/api/live/robot').json()['urdf'] == FIXTURE_URDF
        with c.websocket_connect('/ws') as ws:
            kinds = [ws.receive_json()['type'] for _ in range(2)]
            assert kinds == ['status', 'live']
            assert ws.receive_json() == {
                'type': 'robot',
                'robot': {'urdf': FIXTURE_URDF, 'origin': None, 'joints': {}},
            }
            live.on_joints(['j1'], [0.25])
            msg = ws.receive_json()
            while msg['type'] == 'log':  # nothing else changed, so the joints come next
                msg = ws.receive_json()
            assert msg == {'type': 'joints', 'joints': {'j1': 0.25}}


def test_level_cards_come_from_levels_yaml(client):
    doc = yaml.safe_load((config_dir() / 'levels.yaml').read_text(encoding='utf-8'))
    want = sorted((lv['id'], lv['source'], lv['name'], lv['n']) for lv in doc['levels'])
    got = client.get('/api/options').json()
    assert sorted((lv['id'], lv['source'], lv['name'], lv['n']) for lv in got['levels']) == want
    assert got['planners'] == ['heuristic', 'beam', 'grid']
    assert got['speed_presets'][0] == {'label': 'fast-forward', 'value': 0.0}


@pytest.mark.parametrize(
    ('body', 'words'),
    [
        ({'level': 99}, ['99', 'expected one of the levels', '11']),
        ({'level': 11, 'planner': 'magic'}, ['magic', 'heuristic, beam, grid']),
        ({'level': 11, 'speed': -1}, ['speed', '>= 0']),
        ({'level': 11, 'seed': 'one'}, ['seed must be a number']),
        ({'level': 11, 'telemetry': 'cloud'}, ['cloud', 'disk']),
        ({'level': 11, 'colour': 'red'}, ['unknown run option', 'colour', 'allowed']),
        ({'planner': 'beam'}, ['level is required']),
        ({'level': 11, 'stability': 'yes'}, ['stability must be true or false']),
        ([11], ['JSON object']),
    ],
)
def test_a_bad_run_request_is_refused_with_what_is_allowed(client, body, words):
    r = client.post('/api/runs', json=body)
    assert r.status_code == 400, r.text
    detail = r.json()['detail']
    for w in words:
        assert w in detail, detail
    assert client.get('/api/run').json()['state'] == 'idle'


def test_a_second_start_is_refused_and_stop_aborts_the_run(client, monkeypatch):
    _fake_argv(monkeypatch, [sys.executable, '-c', _LAUNCHER])
    r = client.post('/api/runs', json={'level': 11, 'seed': 3})
    assert r.status_code == 201, r.text
    st = _wait(client, 'running')
    assert st['options']['seed'] == 3 and st['cartons_total'] == 4
    again = client.post('/api/runs', json={'level': 12})
    assert again.status_code == 409
    assert 'already running' in again.json()['detail']
    pid = st['pid']
    assert client.post('/api/runs/stop').status_code == 200
    st = _wait(client, 'aborted')
    assert st['exit_code'] == 130  # 128 + SIGINT, as the launcher exits on Ctrl-C
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert client.post('/api/runs/stop').status_code == 409


def test_a_run_that_crashes_says_why(client, monkeypatch):
    _fake(monkeypatch, 'echo "palletize: error: the cell would not start" >&2; exit 3')
    assert client.post('/api/runs', json={'level': 21}).status_code == 201
    st = _wait(client, 'crashed')
    assert st['exit_code'] == 3
    assert 'exited with code 3' in st['error']
    assert 'the cell would not start' in st['error']


def test_a_finished_run_keeps_its_results(client, monkeypatch):
    lines = [
        '[launcher] ROS_DOMAIN_ID 42 (join)',
        '[episode_director] telemetry writes /tmp/runs/x',
        '[episode_director] seed 5: 3/4 · FAILURE: stack_collapse',
        '[episode_director] seed 6: 4/4 · SUCCESS',
    ]
    _fake(monkeypatch, ' ; '.join(f"echo '{ln}'" for ln in lines) + ' ; exit 1')
    assert (
        client.post('/api/runs', json={'level': 11, 'seed': 5, 'episodes': 2}).status_code == 201
    )
    st = _wait(client, 'finished')
    assert st['run_dir'] == '/tmp/runs/x'
    assert [(r['seed'], r['placed'], r['success']) for r in st['results']] == [
        (5, 3, False),
        (6, 4, True),
    ]
    assert st['episodes_done'] == 2 and lines[-1] in st['log']


def test_history_serves_runs_and_only_their_snapshots(client, tmp_path):
    run = tmp_path / 'runs' / '20261202-100000-pallet'
    (run / '1').mkdir(parents=True)
    (run / '1' / '002-top.png').write_bytes(b'\x89PNG\r\n\x1a\n')
    (run / 'events.jsonl').write_text('', encoding='utf-8')
    (tmp_path / 'secret.png').write_bytes(b'x')
    assert [r['name'] for r in client.get('/api/history').json()['runs']] == [run.name]
    assert client.get(f'/api/history/{run.name}/files/1/002-top.png').status_code == 200
    assert client.get(f'/api/history/{run.name}/files/../../secret.png').status_code == 404
    r = client.get('/api/history/nope')
    assert r.status_code == 404 and 'no run named' in r.json()['detail']


def test_the_command_line_refuses_a_public_address_without_the_flag(capsys):
    from palletizer.panel.server import main

    assert main(['--host', '0.0.0.0']) == 2
    assert '--allow-remote' in capsys.readouterr().err


def test_the_child_is_the_palletize_launcher():
    argv = runner.panel_argv(runner.RunRequest(level=23, planner='beam', seed=7, speed=1.0))
    assert argv[:3] == [sys.executable, '-m', 'palletizer.cli.palletize']
    assert argv[3:] == [
        '--level', '23', '--planner', 'beam', '--seed', '7', '--episodes', '1',
        '--speed', '1.0', '--perception', 'cameras', '--telemetry', 'disk',
    ]  # fmt: skip
    assert Path(argv[0]).exists()
    shaken = runner.panel_argv(runner.RunRequest(level=11, stability=True))
    assert shaken[-1] == '--stability'


def test_a_run_started_from_the_panel_writes_to_the_panels_runs_folder(tmp_path, monkeypatch):
    _fake_argv(monkeypatch, [sys.executable, '-c', 'pass'])
    runs = tmp_path / 'elsewhere'  # the panel's --runs, not the repository's runs/
    cfg = PanelConfig(token=TOKEN, root=tmp_path, runs_dir=runs, live=False)
    app = create_app(cfg)
    try:
        with TestClient(app, cookies={COOKIE: TOKEN}) as c:
            assert c.post('/api/runs', json={'level': 11, 'seed': 1}).status_code == 201
        argv = app.state.manager.run.argv
    finally:
        app.state.manager.close()
    params = [a for a in argv if a.startswith('params_file:=')]
    assert params, f'the run is not told the runs folder: {argv}'
    from palletizer.cli.palletize import build_options
    from palletizer.launcher.graph import params_file_value

    # What the launcher makes of it: telemetry's runs_dir is the panel's folder.
    opts = build_options([*runner.request_from({'level': 11, 'seed': 1}).flags(), *params])
    assert params_file_value(opts.params_file, 'telemetry', 'runs_dir') == str(runs.absolute())


def test_the_spec_editor_gets_the_schema_and_a_spec_is_checked_server_side(client):
    got = client.get('/api/spec').json()
    assert got['schema']['title'] == 'palletizer pallet spec'
    assert 'max_load_height_m' in got['schema']['properties'] and 'std_m' in got['types']
    ok = client.post('/api/spec/check', json={'max_load_height_m': 1.2, 'fragile': {}})
    assert ok.status_code == 200, ok.text
    assert ok.json()['spec']['fragile'] == {'types': []}
    empty = client.post('/api/spec/check', json={})
    assert empty.status_code == 200 and empty.json() == {'spec': None, 'json': ''}
    bad = client.post(
        '/api/spec/check', json={'max_load_height_m': 3, 'crush': {'limits_kg': {'x': 1}}}
    )
    assert bad.status_code == 422
    problems = bad.json()['problems']
    assert [p['key'] for p in problems] == ['max_load_height_m', 'crush.limits_kg.x']
    assert problems[0]['value'] == 3 and 'less than or equal to 1.65' in problems[0]['expected']


def test_a_run_with_a_spec_hands_it_to_the_launcher_and_a_bad_one_is_refused(client, monkeypatch):
    seen = []
    real = runner.panel_argv

    def fake(req):
        seen.append(real(req))
        return ['sh', '-c', 'exit 0']

    monkeypatch.setattr(runner, 'panel_argv', fake)
    r = client.post('/api/runs', json={'level': 11, 'pallet_spec': {'max_load_height_m': 1.1}})
    assert r.status_code == 201, r.text
    argv = seen[0]
    spec_path = Path(argv[argv.index('--spec') + 1])
    assert yaml.safe_load(spec_path.read_text())['max_load_height_m'] == 1.1
    assert r.json()['options']['pallet_spec'] == spec_path.read_text()  # the status says which
    _wait(client, 'crashed')  # the stand-in printed nothing
    bad = client.post('/api/runs', json={'level': 11, 'pallet_spec': {'this_side_up': False}})
    assert bad.status_code == 400 and 'this_side_up = False' in bad.json()['detail']
