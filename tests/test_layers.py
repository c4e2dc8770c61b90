"""The layer table of ARCHITECTURE §6: each folder of palletizer imports only what its row allows.

Two checks per folder. A static one reads every import statement of its sources (also the lazy
ones inside functions). A runtime one imports each of its modules in a fresh interpreter and
lists what got loaded, so an import hidden behind a re-export or an importlib call is caught
too. A real UR10e deployment has no MuJoCo: the nodes that drive it must not load it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import palletizer
import pytest

PKG = Path(palletizer.__file__).parent
FOLDERS = ('core', 'sim', 'execution', 'bridge', 'telemetry', 'wiring', 'nodes')
TOP = ('launcher', 'panel', 'cli')
ROOT_MODULES = ('palletizer', 'palletizer.version')  # the package root: open to every layer


@dataclass(frozen=True)
class Rule:
    """What one folder (or one excepted module) may import.

    layers: the palletizer folders below it that it may import (its own is always allowed);
    ros: rclpy and the rest of the ROS client stack; messages: ROS message and service types
    (no rclpy); mujoco: the simulator; third_party: when not None, the only non-stdlib
    packages it may import by name (static check only: they load their own dependencies).
    """

    layers: tuple[str, ...] = ()
    ros: bool = False
    messages: bool = False
    mujoco: bool = False
    third_party: tuple[str, ...] | None = None


_ANYTHING = Rule(FOLDERS + TOP, ros=True, messages=True, mujoco=True)

RULES: dict[str, Rule] = {
    # numpy, numba, ruckig, ur_analytic_ik, PyYAML, opencv (maths only); never rclpy or mujoco
    'core': Rule(third_party=('numpy', 'numba', 'ruckig', 'ur_analytic_ik', 'yaml', 'cv2')),
    'sim': Rule(('core',), mujoco=True),
    'execution': Rule(('core',)),
    'bridge': Rule(('core', 'sim'), mujoco=True),
    'telemetry': Rule(('core',)),
    'wiring': Rule(('core', 'sim', 'execution', 'bridge', 'telemetry'), mujoco=True),
    # Nodes run against a real UR too: no simulator, no in-process wiring.
    'nodes': Rule(('core', 'execution', 'telemetry'), ros=True, messages=True),
    'launcher': _ANYTHING,
    'panel': _ANYTHING,
    'cli': _ANYTHING,
}

# Modules with a row of their own, and why.
EXCEPTIONS: dict[str, Rule] = {
    # The pallet spec's typed models and JSON Schema (pydantic, pinned for the Supabase client):
    # one definition serves validation, the committed schema and the forms and tools built on it.
    'palletizer.core.pallet_spec': Rule(
        third_party=('numpy', 'numba', 'ruckig', 'ur_analytic_ik', 'yaml', 'cv2', 'pydantic')
    ),
    # The cell bridge owns the MuJoCo cell (ARCHITECTURE §3, §6).
    'palletizer.nodes.cell_bridge': Rule(
        ('core', 'execution', 'telemetry', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # Its hardware profile (the running world, the line, the streams), part of it.
    'palletizer.nodes.cell_hardware': Rule(
        ('core', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # Its parameters, parts of it: the fault plan and FJT defaults are the bridge's.
    'palletizer.nodes.cell_params': Rule(
        ('core', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # Its streams (clock, joint states, wrench, TF), part of it: they read the Cell.
    'palletizer.nodes.cell_streams': Rule(
        ('core', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # Its trajectory action and SetIO, part of it: they run goals on the Cell (bridge/fjt.py).
    'palletizer.nodes.cell_control': Rule(
        ('core', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # Its lockstep services (reset, present, capture, stability...), part of it: calls on the Cell.
    'palletizer.nodes.cell_services': Rule(
        ('core', 'sim', 'bridge'), ros=True, messages=True, mujoco=True
    ),
    # trajectory_msgs conversion, message types only; execution/__init__ loads it on first use.
    'palletizer.execution.messages': Rule(('core',), messages=True),
}

_ROS_STACK = (
    'rclpy',
    'rcl',
    'rmw',
    'rpyutils',
    'ament_index_python',
    'launch',
    'launch_ros',
    'message_filters',
    'rosbag2_py',
    'tf2_py',
    'tf2_ros',
)


def _is_messages(root: str) -> bool:
    return (
        root.endswith(('_msgs', '_srvs', '_interfaces'))
        or root == 'builtin_interfaces'
        or root.startswith('rosidl')
    )


def _is_ros_stack(root: str) -> bool:
    # tf2_* (tf2_py, tf2_ros, tf2_geometry_msgs, ...) is the client library; tf2_msgs, its types.
    return (
        root in _ROS_STACK
        or root.startswith(('rclpy', 'rcl_', 'rmw_'))
        or (root.startswith('tf2_') and root != 'tf2_msgs')
    )


def _layer_of(name: str) -> str | None:
    """The palletizer folder of a module name, '' for the package root, None outside it."""
    parts = name.split('.')
    if parts[0] != 'palletizer':
        return None
    if name in ROOT_MODULES or len(parts) == 1:
        return ''
    return parts[1]


def _exception_of(name: str) -> str | None:
    """The excepted module that `name` is or lies in, if any."""
    parts = name.split('.')
    for i in range(len(parts), 1, -1):
        if '.'.join(parts[:i]) in EXCEPTIONS:
            return '.'.join(parts[:i])
    return None


def _covers(rule: Rule, own: str, other: Rule) -> bool:
    """Everything `other` may import, a module of folder `own` under `rule` may import too."""
    return (
        set(other.layers) <= set(rule.layers) | {own}
        and (rule.ros or not other.ros)
        and (rule.messages or not other.messages)
        and (rule.mujoco or not other.mujoco)
    )


def violation(
    rule: Rule, own: str, name: str, static: bool = False, importer: str = ''
) -> str | None:
    """Why a module of folder `own` under `rule` may not import `name`; None when it may.

    An excepted module (EXCEPTIONS) may load more than its folder: importing it passes that on,
    so only a module whose row covers the exception's may, and the exception's own package
    (which re-exports it on first use).
    """
    layer = _layer_of(name)
    if layer is not None:
        if layer not in ('', own) and layer not in rule.layers:
            return f'palletizer.{layer} (not below {own})'
        exc = _exception_of(name)
        if (
            exc is None
            or exc == importer
            or exc.rpartition('.')[0] == importer
            or _covers(rule, own, EXCEPTIONS[exc])
        ):
            return None
        return f'{exc} (an exception to its row: it loads what {own} may not)'
    root = name.split('.')[0]
    if root == 'mujoco':
        return None if rule.mujoco else 'mujoco'
    if _is_ros_stack(root):
        return None if rule.ros else 'the ROS client stack'
    if _is_messages(root):
        return None if rule.messages else 'ROS message types'
    if static and rule.third_party is not None:
        if root in sys.stdlib_module_names or root == '__future__' or root in rule.third_party:
            return None
        return f'{root} is not in its list ({", ".join(rule.third_party)})'
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix('')
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)


def _rule_for(module: str) -> Rule:
    return EXCEPTIONS.get(module) or RULES[module.split('.')[1]]


def static_imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import statement in a module's source.

    `is_package`: the source is the package's `__init__` (named `module`), so a relative import
    in it starts from `module` itself, not from its parent.
    """
    package = module if is_package else module.rpartition('.')[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split('.')
                base = base[: len(base) - node.level + 1]
                name = '.'.join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ''
            out.append((node.lineno, name))
            # `from palletizer import sim` names a folder, not an attribute.
            if name == 'palletizer':
                out += [(node.lineno, f'palletizer.{a.name}') for a in node.names]
    return out


def static_offenders(folder: str) -> list[str]:
    offenders = []
    for path in sorted((PKG / folder).rglob('*.py')):
        module = _module_name(path)
        rule = _rule_for(module)
        is_package = path.name == '__init__.py'
        for line, name in static_imports(path.read_text(), module, is_package):
            why = violation(rule, folder, name, static=True, importer=module)
            if why:
                offenders.append(f'{path.relative_to(PKG)}:{line}: {name} ({why})')
    return offenders


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    """module -> the package's modules it imports anywhere (lazily and for type checking too).

    `sources`: module name -> (source, is_package). `from A import b` is an edge to A.b where
    that is a module, else to A; importing a module's parent packages is not counted.
    """
    graph: dict[str, set[str]] = {}
    for module, (source, is_package) in sources.items():
        package = module if is_package else module.rpartition('.')[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    parts = package.split('.')
                    base = '.'.join(
                        parts[: len(parts) - node.level + 1] + ([base] if base else [])
                    )
                subs = {f'{base}.{a.name}' for a in node.names} & set(sources)
                edges |= subs if len(subs) == len(node.names) else subs | {base}
        graph[module] = {e for e in edges if e in sources and e != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def package_sources() -> dict[str, tuple[str, bool]]:
    return {
        _module_name(p): (p.read_text(), p.name == '__init__.py')
        for p in sorted(PKG.rglob('*.py'))
    }


_PROBE = (
    'import importlib, json, sys\n'
    'report = {}\n'
    'for name in sys.argv[1:]:\n'
    '    before = set(sys.modules)\n'
    '    importlib.import_module(name)\n'
    '    report[name] = sorted(set(sys.modules) - before)\n'
    'print(json.dumps(report))\n'
)


@cache
def loaded_by(modules: tuple[str, ...]) -> dict[str, list[str]]:
    """Import the modules in order in a fresh interpreter: what each one loaded first."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        p for p in (str(PKG.parent), env.get('PYTHONPATH', '')) if p
    )
    out = subprocess.run(
        [sys.executable, '-c', _PROBE, *modules],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def folder_modules(folder: str) -> list[str]:
    """Every module of a folder, packages first; `__main__` modules run on import: left out."""
    names = {_module_name(p) for p in (PKG / folder).rglob('*.py')}
    return sorted(
        (n for n in names if not n.endswith('.__main__')), key=lambda n: (n.count('.'), n)
    )


def probe_groups(folder: str) -> list[tuple[str, ...]]:
    """The folder's modules under its own row in one interpreter; each exception alone, so
    what it may load is never charged to (or hidden behind) another module."""
    modules = folder_modules(folder)
    return [tuple(m for m in modules if m not in EXCEPTIONS)] + [
        (m,) for m in modules if m in EXCEPTIONS
    ]


def runtime_offenders(folder: str) -> list[str]:
    offenders = []
    for group in probe_groups(folder):
        for module, loaded in loaded_by(group).items():
            rule = _rule_for(module)
            bad = sorted(
                {why for n in loaded if (why := violation(rule, folder, n, importer=module))}
            )
            offenders += [f'{module} loads {why}' for why in bad]
    return offenders


@pytest.mark.parametrize('folder', FOLDERS + TOP)
def test_folder_sources_import_only_the_layers_below(folder):
    assert list((PKG / folder).rglob('*.py')), f'no sources in {folder}/'
    assert static_offenders(folder) == []


@pytest.mark.parametrize('folder', FOLDERS + TOP)
def test_folder_modules_load_only_the_layers_below_at_runtime(folder):
    assert runtime_offenders(folder) == []


def test_every_folder_of_the_package_has_a_row():
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and (p / '__init__.py').exists()}
    assert folders == set(RULES)
    assert set(EXCEPTIONS) <= {m for f in FOLDERS for m in folder_modules(f)}


def test_the_nodes_that_drive_a_real_ur_load_neither_mujoco_nor_the_sim():
    for node in ('trajectory_executor', 'wrist_gauge', 'depth_fusion', 'planner'):
        loaded = loaded_by((f'palletizer.nodes.{node}',))[f'palletizer.nodes.{node}']
        assert f'palletizer.nodes.{node}' in loaded
        assert not [n for n in loaded if n.split('.')[0] == 'mujoco']
        assert not [n for n in loaded if n.startswith(('palletizer.sim', 'palletizer.wiring'))]


def test_the_checker_would_catch_a_violation():
    nodes = RULES['nodes']
    src = (
        'import mujoco\n'
        'from palletizer.wiring.oracles import yaw_of_quat\n'
        'from palletizer import sim\n'
        'def f():\n'
        '    from palletizer.bridge import frames\n'
        '    from palletizer.core.fusion import stamp_heightmap\n'
    )
    found = [
        (line, why)
        for line, name in static_imports(src, 'palletizer.nodes.fake')
        if (why := violation(nodes, 'nodes', name, static=True))
    ]
    assert [line for line, _ in found] == [1, 2, 3, 5]
    assert violation(RULES['core'], 'core', 'rclpy.node') == 'the ROS client stack'
    assert violation(RULES['core'], 'core', 'std_msgs.msg') == 'ROS message types'
    assert violation(RULES['core'], 'core', 'requests', static=True)
    assert violation(RULES['core'], 'core', 'numpy.linalg', static=True) is None
    assert violation(RULES['execution'], 'execution', 'trajectory_msgs.msg')
    assert violation(RULES['telemetry'], 'telemetry', 'palletizer.sim.cell')
    assert violation(RULES['sim'], 'sim', 'palletizer.execution.park')
    assert violation(RULES['sim'], 'sim', 'mujoco') is None
    assert violation(RULES['wiring'], 'wiring', 'palletizer.nodes.convert')
    assert violation(RULES['nodes'], 'nodes', 'palletizer.version') is None
    # The ROS client stack by any of its names; tf2_msgs alone is message types.
    for name in ('tf2_py', 'tf2_ros.buffer', 'tf2_geometry_msgs', 'message_filters', 'rosbag2_py'):
        assert violation(RULES['telemetry'], 'telemetry', name) == 'the ROS client stack', name
    assert violation(RULES['telemetry'], 'telemetry', 'tf2_msgs.msg') == 'ROS message types'
    # An excepted module passes on what it loads: another node may not import the cell bridge;
    # the bridge may import its hardware part; the execution package may re-export `messages`.
    why = violation(
        nodes, 'nodes', 'palletizer.nodes.cell_bridge', static=True, importer='palletizer.nodes.x'
    )
    assert why is not None and 'cell_bridge' in why
    bridge = EXCEPTIONS['palletizer.nodes.cell_bridge']
    assert violation(bridge, 'nodes', 'palletizer.nodes.cell_hardware') is None
    ex = RULES['execution']
    assert (
        violation(
            ex, 'execution', 'palletizer.execution.messages', importer='palletizer.execution'
        )
        is None
    )
    assert violation(
        ex, 'execution', 'palletizer.execution.messages', importer='palletizer.execution.port'
    )
    # A relative import in a package's __init__ starts from that package.
    assert static_imports('from .frames import x\n', 'palletizer.bridge', True) == [
        (1, 'palletizer.bridge.frames')
    ]
    core_init = static_imports('from ..sim import cell\n', 'palletizer.core', True)
    assert core_init == [(1, 'palletizer.sim')]
    assert violation(RULES['core'], 'core', core_init[0][1], static=True)
    # At runtime: the cell bridge, judged as any other node, loads the simulator.
    loaded = loaded_by(('palletizer.nodes.cell_bridge',))['palletizer.nodes.cell_bridge']
    whys = {violation(nodes, 'nodes', n) for n in loaded}
    assert {'mujoco', 'palletizer.sim (not below nodes)'} <= whys


def test_no_module_imports_itself_through_others():
    """No circular imports in the package, counting lazy and type-checking imports: a loop makes
    what loads first depend on who imported what, and hides which module owns a concept."""
    assert import_cycles(import_graph(package_sources())) == []


def test_the_cycle_check_would_catch_a_loop():
    sources = {
        'palletizer.cli': ('', True),
        'palletizer.cli.a': ('def f():\n    from palletizer.cli.b import g\n', False),
        'palletizer.cli.b': ('from . import c\n', False),
        'palletizer.cli.c': (
            'from typing import TYPE_CHECKING\n'
            'if TYPE_CHECKING:\n    from palletizer.cli.a import f\n',
            False,
        ),
        'palletizer.cli.d': ('from palletizer.cli import a\n', False),
    }
    graph = import_graph(sources)
    assert graph['palletizer.cli.d'] == {'palletizer.cli.a'}  # not the package itself
    assert import_cycles(graph) == [['palletizer.cli.a', 'palletizer.cli.b', 'palletizer.cli.c']]
