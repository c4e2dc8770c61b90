"""Graph tests need root (network namespaces) and the interface build from scripts/setup."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.graph.isolation import can_isolate, run_isolated
from tests.graph.ros2_launch_tool import ros2_launch_tool

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    reason = can_isolate()
    if importlib.util.find_spec('palletizer_msgs') is None:
        reason = (
            reason or 'palletizer_msgs is not built: run scripts/setup and source scripts/env.sh'
        )
    for item in items:
        if 'tests/graph' in str(item.fspath).replace('\\', '/'):
            item.add_marker(pytest.mark.graph)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope='session')
def level_episode() -> dict:
    """One fast-forward episode of level 11, through the real `ros2 launch` where the checking
    tool is present (else the standalone launcher), probed while it runs (episode_probe.py).
    Shared by the launch-file and the RViz configuration tests: a graph episode is costly."""
    tool = ros2_launch_tool()
    argv = [sys.executable, str(HERE / 'episode_probe.py'), *([str(tool)] if tool else [])]
    proc = run_isolated(argv, timeout=360, cwd=str(HERE.parents[1]))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(lines[0].split(' ', 1)[1])
