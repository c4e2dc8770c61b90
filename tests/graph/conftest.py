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
            # A graph episode uses both cores and times its own waits: alone (scripts/test).
            item.add_marker(pytest.mark.serial)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


# The level_episode fixture's launch arguments (episode_probe.py's defaults for the rest).
LEVEL_EPISODE_ARGS = ('episodes:=2', 'telemetry:=disk')


@pytest.fixture(scope='session')
def level_episode(tmp_path_factory) -> dict:
    """Two fast-forward episodes of level 11 (seeds 1 and 2), through the real `ros2 launch`
    where the checking tool is present (else the standalone launcher), probed while it runs
    (episode_probe.py), telemetry on disk in a folder of its own ('runs': its run folders).
    Shared by the launch-file, lockstep and RViz configuration tests: a graph episode is
    costly. Two, because the second is the one a node's stale state breaks (each reset rewinds
    sim time)."""
    tool = ros2_launch_tool()
    folder = tmp_path_factory.mktemp('level_episode')
    params = folder / 'params.yaml'
    # JSON is YAML.
    params.write_text(
        json.dumps({'telemetry': {'ros__parameters': {'runs_dir': str(folder / 'runs')}}})
    )
    argv = [
        sys.executable,
        str(HERE / 'episode_probe.py'),
        *([str(tool)] if tool else []),
        *LEVEL_EPISODE_ARGS,
        f'params_file:={params}',
    ]
    proc = run_isolated(argv, timeout=360, cwd=str(HERE.parents[1]))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
    assert lines, proc.stdout[-3000:] + proc.stderr[-3000:]
    got = json.loads(lines[0].split(' ', 1)[1])
    got['runs'] = (
        sorted(str(p) for p in (folder / 'runs').iterdir()) if (folder / 'runs').is_dir() else []
    )
    return got
