"""The panel's 3D view draws the robot from /robot_description and moves it with /joint_states:
Debian's chromium (Playwright) against the real server and its observer, in a network namespace
with a publisher of a small URDF with visuals (tests/panel/robot_panel.py).

Screenshots go to $PALLETIZER_ARTEFACTS/panel when that is set, else to the test's temporary
folder.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from palletizer.core.contracts import PalletGeometry

from tests.graph.isolation import can_isolate, next_domain, popen_isolated
from tests.panel.robot_panel import BASE_IN_WORLD, N_LINKS, N_VISUALS

HERE = Path(__file__).parent
CHROMIUM = shutil.which('chromium') or '/usr/bin/chromium'
FLAGS = [
    '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-quic',
    '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync',
]  # fmt: skip

pytestmark = [pytest.mark.graph, pytest.mark.serial]


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


_REASON = _skip_reason()
if _REASON:
    pytest.skip(_REASON, allow_module_level=True)

from playwright.sync_api import sync_playwright  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope='module')
def panel(tmp_path_factory):
    work = tmp_path_factory.mktemp('robot-panel')
    token = secrets.token_urlsafe(16)
    port = _free_port()
    env = {**os.environ, 'ROS_DOMAIN_ID': str(next_domain()), 'PYTHONUNBUFFERED': '1'}
    argv = [sys.executable, str(HERE / 'robot_panel.py'), str(port), token, str(work)]
    log = (work / 'server.log').open('w')
    proc = popen_isolated(
        argv, env, cwd=work, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    wrapper = work / 'chromium-in-ns'
    wrapper.write_text(
        f'#!/bin/sh\nexec nsenter --net=/proc/{proc.pid}/ns/net {CHROMIUM} "$@"\n',
        encoding='utf-8',
    )
    wrapper.chmod(0o755)
    end = time.monotonic() + 60
    while 'palletizer panel on' not in (work / 'server.log').read_text(encoding='utf-8'):
        assert proc.poll() is None, (work / 'server.log').read_text(encoding='utf-8')
        assert time.monotonic() < end, 'the panel did not start in 60 s'
        time.sleep(0.2)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(wrapper), args=FLAGS)
        ctx = browser.new_context(viewport={'width': 1400, 'height': 1000})
        page = ctx.new_page()
        page.errors = []
        page.on('pageerror', lambda e: page.errors.append(str(e)))
        page.goto(f'http://127.0.0.1:{port}/?token={token}')
        yield {'page': page, 'proc': proc, 'work': work}
        browser.close()
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope='module')
def shots(tmp_path_factory) -> Path:
    base = os.environ.get('PALLETIZER_ARTEFACTS')
    d = Path(base) / 'panel' if base else tmp_path_factory.mktemp('robot-shots')
    d.mkdir(parents=True, exist_ok=True)
    return d


def _joints(panel, **q: float) -> None:
    panel['proc'].stdin.write(json.dumps(q) + '\n')
    panel['proc'].stdin.flush()


def _tool(page) -> list[float]:
    return page.evaluate('window.panelRobot().linkPosition("tool")')


def _base() -> np.ndarray:
    """Where the fixture's base_link is in the view's pallet frame [m]."""
    pallet = PalletGeometry()
    cx, cy = pallet.centre_xy
    return np.array(BASE_IN_WORLD) - (cx, cy, pallet.deck_z)


def test_the_3d_view_draws_the_urdf_visuals_at_the_root_links_pose(panel, shots):
    page = panel['page']
    page.wait_for_function('window.panelRobot && window.panelRobot() !== null', timeout=60_000)
    stats = page.evaluate('(({linkPosition, ...s}) => s)(window.panelRobot())')
    assert stats == {'links': N_LINKS, 'joints': 4, 'meshes': N_VISUALS, 'skipped': 0}
    # At zero: the tool 0.5 + 0.1 m out along x, 0.1 + 0.6 m up, from where /tf_static put the base.
    page.wait_for_function('window.panelRobot().linkPosition("base_link")[2] > 0.1')
    np.testing.assert_allclose(_tool(page), _base() + (0.6, 0.0, 0.7), atol=1e-6)
    page.wait_for_timeout(500)  # a few frames
    png = page.locator('#scene3d').screenshot()
    cv2.imwrite(str(shots / 'robot-fixture.png'), cv2.imdecode(np.frombuffer(png, np.uint8), 1))
    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR).astype(int)
    b, g, r = img[..., 0], img[..., 1], img[..., 2]
    red = (r > 120) & (g < 60) & (b < 60)  # the fixture's visuals are red; nothing else is
    assert red.sum() > 2000, f'{red.sum()} red pixels: the robot is not drawn'


def test_a_joint_update_moves_the_links_below_the_joint(panel):
    page = panel['page']
    page.wait_for_function('window.panelRobot && window.panelRobot() !== null', timeout=60_000)
    _joints(panel, j1=math.pi / 2, j3=math.pi / 2)
    # j1 turns the column a quarter about z (the arm now points along y) and j3 tilts the tip
    # about the arm's y, so the tool's 0.1 m points down.
    page.wait_for_function('window.panelRobot().linkPosition("tool")[1] > -0.5', timeout=30_000)
    np.testing.assert_allclose(_tool(page), _base() + (0.0, 0.5, 0.6), atol=1e-6)
    # The base did not move.
    base = page.evaluate('window.panelRobot().linkPosition("base_link")')
    np.testing.assert_allclose(base, _base(), atol=1e-6)
    assert page.errors == []
