"""scripts/env.sh: this workspace's prefixes come first, a ROS install sourced before it stays
after them, and sourcing it twice adds nothing twice."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARS = ('AMENT_PREFIX_PATH', 'CMAKE_PREFIX_PATH', 'PATH', 'PYTHONPATH', 'LD_LIBRARY_PATH')


def _sourced(times: int, **env: str) -> dict[str, list[str]]:
    script = 'source scripts/env.sh\n' * times + ''.join(f'echo "{v}=${v}"\n' for v in VARS)
    out = subprocess.run(
        ['bash', '-c', script],
        cwd=ROOT,
        env={'HOME': os.environ.get('HOME', '/root'), 'PATH': '/usr/bin:/bin', **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    pairs = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
    return {k: [p for p in pairs.get(k, '').split(':') if p] for k in VARS}


def test_an_outer_ros_install_stays_after_the_workspace_prefixes():
    got = _sourced(1, AMENT_PREFIX_PATH='/opt/ros/jazzy', CMAKE_PREFIX_PATH='/opt/ros/jazzy')
    for var in ('AMENT_PREFIX_PATH', 'CMAKE_PREFIX_PATH'):
        paths = got[var]
        assert paths[-1] == '/opt/ros/jazzy', (var, paths)
        assert str(ROOT / '.venv') in paths, (var, paths)
        assert paths.index(str(ROOT / '.venv')) < paths.index('/opt/ros/jazzy')


def test_sourcing_twice_adds_nothing_twice():
    once = _sourced(1, AMENT_PREFIX_PATH='/opt/ros/jazzy')
    twice = _sourced(2, AMENT_PREFIX_PATH='/opt/ros/jazzy')
    for var in ('AMENT_PREFIX_PATH', 'CMAKE_PREFIX_PATH', 'PATH'):
        assert twice[var] == once[var], var
        assert len(set(twice[var])) == len(twice[var]), (var, twice[var])
