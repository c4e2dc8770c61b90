"""core/ stays ROS- and MuJoCo-free: no rclpy, no ROS message packages, no mujoco."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import palletizer.core

CORE = Path(palletizer.core.__file__).parent
FORBIDDEN = ('rclpy', 'mujoco', 'palletizer_msgs', 'std_msgs', 'geometry_msgs', 'sensor_msgs')


def _forbidden(name: str) -> bool:
    root = name.split('.')[0]
    return root in FORBIDDEN or root.endswith('_msgs') or name.startswith('palletizer.sim')


def test_core_modules_import_nothing_forbidden_at_runtime():
    code = (
        'import importlib, json, pkgutil, sys\n'
        'import palletizer.core as core\n'
        'names = [m.name for m in pkgutil.walk_packages(core.__path__, "palletizer.core.")]\n'
        'for n in names: importlib.import_module(n)\n'
        'print(json.dumps({"modules": names, "loaded": sorted(sys.modules)}))\n'
    )
    env = dict(os.environ, PYTHONPATH=str(CORE.parent.parent))
    out = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert 'palletizer.core.planning.heuristic' in report['modules']
    assert 'palletizer.core.contracts' in report['modules']
    leaked = [m for m in report['loaded'] if _forbidden(m)]
    assert leaked == []


def test_core_sources_have_no_forbidden_import_statements():
    offenders = []
    files = sorted(CORE.rglob('*.py'))
    assert len(files) > 5
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            offenders += [f'{path.relative_to(CORE)}: {n}' for n in names if _forbidden(n)]
    assert offenders == []


def test_the_checker_would_catch_a_forbidden_import():
    assert _forbidden('rclpy.node') and _forbidden('mujoco') and _forbidden('palletizer.sim.cell')
    assert not _forbidden('numpy') and not _forbidden('palletizer.core.contracts')
