"""The panel in a real browser: Debian's chromium driven by Playwright, against the real server
starting real fast-forward runs of the node graph.

The server (and so every run it starts) lives in its own network namespace with loopback only,
as every graph test does; chromium is started inside that namespace (nsenter), so the page
reaches the server on 127.0.0.1 and nothing else. Screenshots go to $PALLETIZER_ARTEFACTS/panel
when that is set (CI keeps them), else to the test's temporary folder.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import cv2
import numpy as np
import pytest
import yaml
from palletizer.core.config import config_dir

from tests.graph.isolation import can_isolate, next_domain, popen_isolated

CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
FLAGS = [
    '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic',
    '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync',
]  # fmt: skip
RUN_TIMEOUT_MS = 300_000  # a fast-forward level 11 episode takes about 60 s on 2 cores

pytestmark = [pytest.mark.graph, pytest.mark.sim, pytest.mark.serial]


def _skip_reason() -> str | None:
    if can_isolate():
        return can_isolate()
    if not Path(CHROMIUM).exists():
        return 'chromium is not installed: run scripts/setup'
    if shutil.which('nsenter') is None:
        return 'nsenter (util-linux) is not installed'
    try:
        import playwright  # noqa: F401
    except ImportError:
        return 'playwright is not installed: run scripts/setup'
    return None


if _skip_reason():
    pytest.skip(_skip_reason(), allow_module_level=True)

from playwright.sync_api import expect, sync_playwright  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope='module')
def shots(tmp_path_factory) -> Path:
    base = os.environ.get('PALLETIZER_ARTEFACTS')
    d = Path(base) / 'panel' if base else tmp_path_factory.mktemp('panel-shots')
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope='module')
def panel(tmp_path_factory):
    """The panel server in its own network namespace, with its own runs folder."""
    work = tmp_path_factory.mktemp('panel')
    token = secrets.token_urlsafe(16)
    port = _free_port()
    env = {
        **os.environ,
        'ROS_DOMAIN_ID': str(next_domain()),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
        'PYTHONUNBUFFERED': '1',
    }
    argv = [sys.executable, '-m', 'palletizer.panel.server', '--port', str(port)]
    argv += [f'--token={token}', '--runs', str(work / 'runs')]  # a token may start with '-'
    log = (work / 'server.log').open('w')
    proc = popen_isolated(argv, env, cwd=work, stdout=log, stderr=subprocess.STDOUT)
    # chromium joins the server's namespace: the page's 127.0.0.1 is the server's.
    wrapper = work / 'chromium-in-ns'
    wrapper.write_text(
        f'#!/bin/sh\nexec nsenter --net=/proc/{proc.pid}/ns/net {CHROMIUM} "$@"\n',
        encoding='utf-8',
    )
    wrapper.chmod(0o755)
    url = f'http://127.0.0.1:{port}'
    end = time.monotonic() + 60
    while 'palletizer panel on' not in (work / 'server.log').read_text(encoding='utf-8'):
        assert proc.poll() is None, (work / 'server.log').read_text(encoding='utf-8')
        assert time.monotonic() < end, 'the panel did not start in 60 s'
        time.sleep(0.2)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(wrapper), args=FLAGS)
        yield {'url': url, 'token': token, 'work': work, 'browser': browser, 'proc': proc}
        browser.close()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope='module')
def page(panel):
    """One page for the whole module, with a log of every request it makes."""
    ctx = panel['browser'].new_context(viewport={'width': 1400, 'height': 1000})
    pg = ctx.new_page()
    pg.requests = []
    pg.errors = []
    pg.on('request', lambda r: pg.requests.append(r.url))
    pg.on('pageerror', lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()


def _pixels(png: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR).astype(np.int16)


def _state(page) -> dict:
    return page.evaluate('fetch("/api/run").then(r => r.json())')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f'/proc/{pid}/stat')
    return stat.exists() and stat.read_text().split()[2] != 'Z'


def test_the_page_needs_the_token(panel, page, shots):
    bare = panel['browser'].new_context()
    p = bare.new_page()
    r = p.goto(panel['url'] + '/')
    assert r.status == 401 and 'token' in p.content()
    bare.close()
    r = page.goto(f'{panel["url"]}/?token={panel["token"]}')
    assert r.status == 200
    expect(page.locator('#levels .level-card').first).to_be_visible()
    page.wait_for_timeout(1500)  # a few frames of the empty scene
    page.screenshot(path=str(shots / 'empty.png'))


def test_level_cards_match_levels_yaml(page):
    doc = yaml.safe_load((config_dir() / 'levels.yaml').read_text(encoding='utf-8'))
    cards = page.locator('#levels .level-card')
    got = sorted(int(x) for x in cards.evaluate_all('cs => cs.map(c => c.dataset.level)'))
    assert got == sorted(int(lv['id']) for lv in doc['levels'])
    for lv in doc['levels']:
        group = page.locator(f'#levels [data-source="{lv["source"]}"]')
        expect(group.locator(f'.level-card[data-level="{lv["id"]}"]')).to_have_count(1)
        expect(group.locator(f'.level-card[data-level="{lv["id"]}"]')).to_contain_text(lv['name'])


def test_the_spec_editor_is_built_from_the_schema_and_checked_by_the_server(page, shots):
    page.locator('#spec-editor summary').click()
    height = page.locator('#spec-form [data-spec="max_load_height_m"]')
    expect(height).to_be_visible()
    # A field per rule of the schema, each rule's own fields under its checkbox.
    rules = page.locator('#spec-form [data-rule]')
    got = sorted(rules.evaluate_all('rs => rs.map(r => r.dataset.rule)'))
    assert got == ['crush', 'fragile', 'group_by', 'label_out', 'weight_order']
    height.fill('3')
    height.dispatch_event('change')
    problems = page.locator('#spec-problems li')
    expect(problems.first).to_contain_text('max_load_height_m = 3; expected less than or equal')
    expect(page.locator('#spec-state')).to_have_text('invalid')
    height.fill('1.2')
    height.dispatch_event('change')
    expect(page.locator('#spec-state')).to_have_text('max_load_height_m')
    expect(page.locator('#spec-problems')).to_be_hidden()  # the page settles before a click
    page.locator('#spec-form [data-rule="fragile"]').check()
    expect(page.locator('#spec-state')).to_have_text('max_load_height_m, fragile')
    page.screenshot(path=str(shots / 'spec-editor.png'))
    # Back to no spec, as the other tests of the page expect.
    height.fill('')
    height.dispatch_event('change')
    expect(page.locator('#spec-state')).to_have_text('fragile')
    page.locator('#spec-form [data-rule="fragile"]').uncheck()
    expect(page.locator('#spec-state')).to_have_text('none')


def test_level_11_from_the_page_places_4_of_4(page, shots):
    empty = _pixels(page.locator('#scene3d').screenshot())
    page.locator('.level-card[data-level="11"]').click()
    page.fill('#opt-seed', '1')
    page.fill('#opt-episodes', '1')
    page.select_option('#opt-planner', 'heuristic')
    page.select_option('#opt-telemetry', 'disk')
    page.select_option('#opt-perception', 'cameras')
    page.select_option('#opt-speed', '0')
    page.check('#opt-stability')  # the trials after the episode (about 30 s)
    page.click('#start')
    expect(page.locator('#run-state')).to_have_text('finished', timeout=RUN_TIMEOUT_MS)
    expect(page.locator('#run-result')).to_contain_text('seed 1: 4/4 · SUCCESS')
    expect(page.locator('#carton-table tbody tr')).to_have_count(4)
    expect(page.locator('#carton-table tbody')).to_contain_text('std_m-03')
    page.wait_for_timeout(1500)
    page.screenshot(path=str(shots / 'level-11.png'), full_page=True)
    full = _pixels(page.locator('#scene3d').screenshot())
    cv2.imwrite(str(shots / 'scene3d-level-11.png'), full.astype(np.uint8))
    # Not blank: the stack changes a large share of the canvas, and its colours spread more.
    changed = np.abs(full - empty).max(axis=2) > 30
    assert changed.mean() > 0.02, f'{changed.mean():.4f} of the canvas changed'
    assert full.std() > empty.std()
    # The height map and the station camera's frame with the detection.
    hm = _pixels(page.locator('#heightmap').screenshot())
    assert hm.std() > 5
    assert page.evaluate('document.querySelector("#camera").naturalWidth') > 0
    live = page.evaluate('fetch("/api/live").then(r => r.json())')
    assert live['detection'] is not None and live['camera_seq'] >= 4  # drawn on the frame
    assert len(live['scene']['cartons']) == 4 and live['scene']['cog_measured'] is not None
    assert live['heightmap']['nx'] * live['heightmap']['ny'] == len(live['heightmap']['cells'])
    _robot_is_drawn_as_the_urdf_says(page)


def _robot_is_drawn_as_the_urdf_says(page) -> None:
    """The view's robot: one mesh per primitive <visual> of /robot_description, and tool0 where
    a real URDF parser (yourdfpy) puts it at the /joint_states positions and the root's pose."""
    import io

    import yourdfpy

    robot = page.evaluate('fetch("/api/live/robot").then(r => r.json())')
    assert robot['urdf'] and robot['origin'] and robot['joints'], 'the observer has no robot'
    parsed = yourdfpy.URDF.load(
        io.StringIO(robot['urdf']),
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )
    primitives = sum(
        v.geometry.box is not None
        or v.geometry.cylinder is not None
        or v.geometry.sphere is not None
        for link in parsed.robot.links
        for v in link.visuals
    )
    assert primitives > 0, 'the robot description has no visuals to draw'
    stats = page.evaluate('(({linkPosition, ...s}) => s)(window.panelRobot())')
    assert stats['meshes'] == primitives and stats['links'] == len(parsed.robot.links)
    parsed.update_cfg({j: robot['joints'][j] for j in parsed.actuated_joint_names})
    T_pallet_root = np.reshape(robot['origin'], (4, 4))
    want = (T_pallet_root @ parsed.get_transform('tool0', parsed.base_link))[:3, 3]
    got = page.evaluate('window.panelRobot().linkPosition("tool0")')
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_stopping_a_run_aborts_it_and_leaves_no_process(panel, page, shots):
    page.locator('.level-card[data-level="12"]').click()
    page.fill('#opt-seed', '2')
    page.select_option('#opt-speed', '0')
    page.uncheck('#opt-stability')
    page.click('#start')
    # Stopped after its first carton of six, about 40 s before the episode would end.
    expect(page.locator('#carton-table tbody tr')).to_have_count(1, timeout=RUN_TIMEOUT_MS)
    page.click('#start')  # a second run while one runs is refused, with the reason shown
    expect(page.locator('#error')).to_contain_text('already running')
    st = _state(page)
    assert st['state'] == 'running'
    pids = [st['pid'], *st['node_pids'].values()]
    assert len(pids) >= 8, st['node_pids']
    page.click('#stop')
    expect(page.locator('#run-state')).to_have_text('aborted', timeout=120_000)
    page.screenshot(path=str(shots / 'aborted.png'), full_page=True)
    assert [p for p in pids if _alive(p)] == []
    run_dir = Path(_state(page)['run_dir'])
    last = json.loads(run_dir.joinpath('episodes.jsonl').read_text().splitlines()[-1])
    assert last['seed'] == 2 and last['metrics']['aborted'] is True


def test_history_lists_the_runs_and_their_snapshots_load(page, shots):
    page.click('#history-refresh')
    rows = page.locator('#history .history-row')
    expect(rows).to_have_count(2)
    first = min(
        r['name'] for r in page.evaluate('fetch("/api/history").then(r => r.json())')['runs']
    )
    page.locator(f'.history-row[data-name="{first}"]').click()
    snaps = page.locator('#history-detail img.snapshot')
    expect(snaps.first).to_be_visible()
    assert snaps.count() >= 2
    page.wait_for_function(
        'Array.from(document.querySelectorAll("#history-detail img.snapshot"))'
        '.every(i => i.complete && i.naturalWidth > 0)'
    )
    # Level 11 ran the stability trials: their summary is in the episode's detail.
    expect(page.locator('#history-detail .stability')).to_contain_text('held_all')
    expect(page.locator('#history-detail canvas.chart-cycle')).to_have_count(1)
    # The cycle bars are made of the cartons' phases (the settle events' cycles). The run was
    # fast-forward: the moves take no sim time, the still weighing and the re-zero do.
    legend = page.locator('#history-detail .phase-legend').first
    expect(legend).to_contain_text('weigh')
    expect(legend).to_contain_text('settle')
    expect(page.locator('#history-detail canvas.chart-margin')).to_have_count(1)
    for box in page.locator('.compare-pick').all():
        box.check()
    page.click('#compare')
    expect(page.locator('#compare-view')).to_contain_text('4/4')
    page.screenshot(path=str(shots / 'history.png'), full_page=True)


def test_the_page_asks_nothing_of_any_other_host(panel, page):
    hosts = {urlparse(u).hostname for u in page.requests if not u.startswith('data:')}
    assert hosts == {'127.0.0.1'}, sorted(hosts)
    assert page.errors == []
