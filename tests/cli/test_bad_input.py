"""Bad input fails before anything starts: one line naming what was wrong and what is allowed.

Each row is one gap of issue 12 point 7 (or a neighbour of one). CLI rows call
`palletize.main(argv)` with a GraphRunner that fails the test if the graph is started; config rows
load a modified copy of configs/ from a tmp folder (PALLETIZER_CONFIG_DIR selects it for the CLI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from palletizer.cli import palletize
from palletizer.core.config import load_config
from palletizer.core.errors import ConfigError
from palletizer.launcher.graph import SEED_MAX

CONFIGS = Path(__file__).resolve().parents[2] / 'configs'
INT32 = r'expected an integer in \[0, 2147483647\]'


class _NoGraph:
    """Stands in for GraphRunner and Popen: bad input must never get as far as a process."""

    def __init__(self, *args, **kwargs):
        pytest.fail('the node graph was started for bad input')


@pytest.fixture
def configs(tmp_path, monkeypatch) -> Path:
    """A private copy of configs/, selected for everything that calls load_config()."""
    root = tmp_path / 'configs'
    shutil.copytree(CONFIGS, root)
    monkeypatch.setenv('PALLETIZER_CONFIG_DIR', str(root))
    return root


def _edit(root: Path, name: str, old: str, new: str) -> None:
    text = (root / name).read_text(encoding='utf-8')
    assert text.count(old) == 1, f'{old!r} must occur once in {name}'
    (root / name).write_text(text.replace(old, new), encoding='utf-8')


def _write(path: Path, data: bytes | None, argv: list[str] | None = None) -> list[str]:
    """Replace (or, with None, delete) one file of the configs copy; return argv."""
    if data is None:
        path.unlink()
    else:
        path.write_bytes(data)
    return argv or []


def _params(root: Path, text: str) -> str:
    path = root.parent / 'params.yaml'
    path.write_text(text, encoding='utf-8')
    return f'params_file:={path}'


# (case, argv: a list, or a function of the configs root that edits it and returns argv, stderr)
CLI_CASES = [
    ('seed past int32', ['--seed', '2147483648'], rf"seed:='2147483648'; {INT32}"),
    ('seed past int32 as name:=value', ['seed:=2147483648'], rf"seed:='2147483648'; {INT32}"),
    ('negative seed', ['--seed', '-1'], rf"seed:='-1'; {INT32}"),
    (
        'seed at the int32 limit, episodes push it over',
        ['--seed', str(SEED_MAX), '-n', '2'],
        r"seed:='2147483647' with episodes:='2' runs seeds up to 2147483648; "
        r'expected seed \+ episodes - 1 <= 2147483647',
    ),
    ('seed 1e20', ['--seed', '1e20'], rf"seed:='1e20'; {INT32}"),
    ('seed:=1e20', ['seed:=1e20'], rf"seed:='1e20'; {INT32}"),
    (
        'seed past int64 (rcl reads it as a double and the director dies)',
        ['--seed', '100000000000000000000'],
        rf"seed:='100000000000000000000'; {INT32}",
    ),
    (
        'level given twice',
        ['--level', '12', '--level', '11'],
        'level given twice with different values: --level 12 and --level 11; give it once',
    ),
    (
        'level as option and name:=value',
        ['--level', '12', 'level:=11'],
        'level given twice with different values: --level 12 and level:=11',
    ),
    (
        'telemetry off and on',
        ['--no-telemetry', 'telemetry:=disk'],
        'telemetry given twice with different values: --no-telemetry and telemetry:=disk',
    ),
    ('malformed option', ['--seed'], 'argument --seed: expected one argument'),
    (
        'missing params file',
        lambda root: [f'params_file:={root.parent / "nope.yaml"}'],
        r"params_file:='.*nope.yaml': does not exist; expected a ROS parameters YAML file",
    ),
    (
        'params file that is not YAML',
        lambda root: [_params(root, 'planner: [unclosed\n')],
        r"params_file:='.*params.yaml': params.yaml: not valid YAML at line 2",
    ),
    (
        'params file not keyed by node names',
        lambda root: [_params(root, 'planer:\n  ros__parameters: {kind: beam}\n')],
        r"'planer' is not a node of the graph; expected one of cell_bridge, .* "
        r"\(did you mean 'planner'\?\)",
    ),
    (
        'params file node without ros__parameters',
        lambda root: [_params(root, 'planner:\n  kind: beam\n')],
        r'planner has no ros__parameters mapping; expected planner: \{ros__parameters',
    ),
    (
        'params file with a key twice',
        lambda root: [_params(root, 'planner:\n  ros__parameters: {a: 1, a: 2}\n')],
        r'params.yaml: planner.ros__parameters.a: duplicate key at line 2',
    ),
    (
        'missing reach table',
        lambda root: _write(root / 'reach_ur10e.npz', None, ['--planner', 'heuristic']),
        r'planner:=heuristic needs the reach table: .*reach_ur10e.npz: reach table not found; '
        r'build it with python -m palletizer.core.motion.reach',
    ),
    (
        'missing reach table, beam search',
        lambda root: _write(root / 'reach_ur10e.npz', None, ['--planner', 'beam']),
        r'planner:=beam needs the reach table: .*reach_ur10e.npz: reach table not found; ',
    ),
    (
        'corrupt reach table',
        lambda root: _write(root / 'reach_ur10e.npz', b'PK\x03\x04 not a zip'),
        r'planner:=heuristic needs the reach table: .*reach_ur10e.npz: not a reach table \(',
    ),
    (
        'non-UTF-8 config',
        lambda root: _write(root / 'levels.yaml', b'# caf\xe9\nschema: 1\n'),
        r'levels.yaml: byte 0xe9 at line 1 is not UTF-8; expected UTF-8 text',
    ),
]


@pytest.mark.parametrize('argv, match', [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES])
def test_palletize_rejects_bad_input_with_one_line_and_exit_code_2(
    configs, monkeypatch, capsys, argv, match
):
    monkeypatch.setattr(palletize, 'GraphRunner', _NoGraph)
    monkeypatch.setattr(subprocess, 'Popen', _NoGraph)
    args = argv(configs) if callable(argv) else argv
    assert palletize.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith('palletize: error: ')
    assert re.search(match, err), err


def test_the_seed_limit_is_the_reset_message_int32():
    from palletizer_msgs.srv import ResetCell

    assert ResetCell.Request.get_fields_and_field_types()['seed'] == 'int32'
    assert SEED_MAX == 2**31 - 1


@pytest.mark.parametrize(
    'argv, field, value',
    [
        (['--seed', str(SEED_MAX)], 'seed', SEED_MAX),
        (['--seed', str(SEED_MAX - 1), '-n', '2'], 'episodes', 2),
        (['--level', '12', 'level:=12'], 'level', 12),
        (['--planner', 'grid'], 'planner', 'grid'),  # the grid does not need the reach table
    ],
)
def test_neighbours_of_bad_input_are_accepted(configs, argv, field, value):
    (configs / 'reach_ur10e.npz').unlink()  # the heuristic and beam search read it
    if field != 'planner':
        argv = [*argv, '--planner', 'grid']
    assert getattr(palletize.build_options(argv), field) == value


def test_a_valid_params_file_is_accepted(configs):
    arg = _params(
        configs,
        '/**:\n  ros__parameters: {use_sim_time: true}\nplanner:\n  '
        'ros__parameters: {kind: beam}\n',
    )
    assert palletize.build_options([arg]).params_file.endswith('params.yaml')


# The line of robot.payload_kg in cell.yaml (1-based): the duplicate goes on the next one.
_PAYLOAD_LINE = 1 + (CONFIGS / 'cell.yaml').read_text().splitlines().index('  payload_kg: 12.5')

# (case, file, old text, new text, error) on a copy of configs/, through load_config.
CONFIG_CASES = [
    (
        'key twice',
        'cell.yaml',
        '  payload_kg: 12.5\n',
        '  payload_kg: 12.5\n  payload_kg: 95.0\n',
        rf'cell.yaml: robot.payload_kg: duplicate key at line {_PAYLOAD_LINE + 1} '
        rf'\(first at line {_PAYLOAD_LINE}\)',
    ),
    (
        'key twice inside a list item',
        'levels.yaml',
        '- {id: 12, source: table,',
        '- {id: 12, id: 13, source: table,',
        r'levels.yaml: levels\[1\].id: duplicate key at line \d+ \(first at line \d+\)',
    ),
    (
        'joint_lower above joint_upper',
        'cell.yaml',
        'joint_lower: [-6.2832, -6.2832, -3.1416,',
        'joint_lower: [-6.2832, -6.2832, 3.5,',
        r'cell.yaml: robot.joint_lower\[2\] = 3.5 is not below robot.joint_upper\[2\] = 3.1416 '
        r'\(elbow_joint\); expected joint_lower < joint_upper for every joint',
    ),
    (
        'home outside the joint limits',
        'cell.yaml',
        'home: [-1.5708, -1.5708, 1.5708,',
        'home: [-1.5708, -1.5708, 3.5,',
        r'cell.yaml: robot.home\[2\] = 3.5 \(elbow_joint\); expected a value inside the joint '
        r'limits \[-3.1416, 3.1416\]',
    ),
    (
        '95 kg random carton',
        'catalogue.yaml',
        'mass: [0.5, 8.5]',
        'mass: [0.5, 95.0]',
        r'catalogue.yaml: random.mass = \[0.5, 95.0\]; expected a maximum of at most 9.95 kg: '
        r'the robot carries 12.5 kg \(cell.yaml robot.payload_kg\) minus the 2.55 kg gripper',
    ),
    (
        '95 kg carton type',
        'catalogue.yaml',
        'mass: 8.50,',
        'mass: 95.0,',
        r'catalogue.yaml: types.heavy_l.mass = 95.0; expected at most 9.95 kg',
    ),
    (
        'payload lowered below the shipped catalogue',
        'cell.yaml',
        'payload_kg: 12.5',
        'payload_kg: 10.0',
        r'catalogue.yaml: types.heavy_l.mass = 8.5; expected at most 7.45 kg',
    ),
    (
        'YAML syntax error',
        'planner.yaml',
        'schema: 1\n',
        'schema: [1\n',
        r'planner.yaml: not valid YAML at line \d+, column \d+: ',
    ),
]


@pytest.mark.parametrize(
    'name, old, new, match', [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES]
)
def test_bad_config_files_fail_to_load_with_one_line(configs, name, old, new, match):
    _edit(configs, name, old, new)
    with pytest.raises(ConfigError, match=match) as info:
        load_config(configs)
    assert '\n' not in str(info.value)


def test_a_config_file_that_cannot_be_read_names_the_file(configs):
    (configs / 'stability.yaml').unlink()
    (configs / 'stability.yaml').mkdir()
    with pytest.raises(ConfigError, match=r'stability.yaml: cannot read .*; expected a readable'):
        load_config(configs)


def test_yaml_merge_keys_still_override(configs):
    _edit(configs, 'telemetry.yaml', 'schema: 1\n', 'base: &b {schema: 2}\n<<: *b\nschema: 1\n')
    with pytest.raises(ConfigError, match=r'telemetry.yaml: base: unknown key;'):
        load_config(configs)  # the merge itself is not a duplicate; the extra key is unknown


def test_planner_node_without_its_reach_table_exits_2_with_one_line(configs):
    (configs / 'reach_ur10e.npz').unlink()
    env = {**os.environ, 'ROS_DOMAIN_ID': '87', 'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST'}
    proc = subprocess.run(
        [sys.executable, '-m', 'palletizer.nodes.planner'],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert 'Traceback' not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [lines[0]] and lines[0].startswith('planner: error: ')
    assert 'reach_ur10e.npz: reach table not found; build it with' in lines[0]


def _weights(root: Path, text: str) -> list[str]:
    path = root.parent / 'weights.json'
    path.write_text(text, encoding='utf-8')
    return ['--planner', 'heuristic', '--planner-weights', str(path)]


def _unwritable_runs(root: Path) -> list[str]:
    (root.parent / 'a-file').write_text('not a folder\n')
    return [
        _params(root, f'telemetry:\n  ros__parameters: {{runs_dir: {root.parent}/a-file/runs}}\n')
    ]


# Issue 44 point 4: bad input that used to start the graph. (case, argv, env, stderr)
GRAPH_START_CASES = [
    (
        'params file with a wrong parameter type',
        lambda root: [_params(root, 'planner:\n  ros__parameters: {kind: 5}\n')],
        {},
        r'planner.ros__parameters.kind = 5; expected a string \(the node declares kind as str',
    ),
    (
        'params file with a double where an integer is declared',
        lambda root: [_params(root, '/**:\n  ros__parameters: {level: 11.0}\n')],
        {},
        r'\*\*.ros__parameters.level = 11.0; expected an integer',
    ),
    (
        'params file with an unwritable runs folder',
        _unwritable_runs,
        {},
        r"params_file:='.*params.yaml': runs folder .*a-file/runs: ",
    ),
    (
        'corrupt fastdds.xml',
        lambda root: _write(root / 'fastdds.xml', b'<profiles><participant>\n'),
        {},
        r'fastdds.xml: not valid XML at line 2, column 1; Fast DDS would fall back to its '
        r'defaults \(a 20 s lease, not 2 s\)',
    ),
    (
        'weights file that is not JSON',
        lambda root: _weights(root, '{"weights": {"a": 1,,}}\n'),
        {},
        r'weights.json: not JSON or YAML \(.* at line 1, column \d+\); expected',
    ),
    (
        'MUJOCO_GL=glfw without a display',
        [],
        {'MUJOCO_GL': 'glfw'},
        r'MUJOCO_GL=glfw needs a display, and DISPLAY is not set',
    ),
]


@pytest.mark.parametrize(
    'argv, env, match', [c[1:] for c in GRAPH_START_CASES], ids=[c[0] for c in GRAPH_START_CASES]
)
def test_bad_input_that_used_to_start_the_graph_exits_2_with_one_line(
    configs, monkeypatch, capsys, argv, env, match
):
    monkeypatch.setattr(palletize, 'GraphRunner', _NoGraph)
    monkeypatch.setattr(subprocess, 'Popen', _NoGraph)
    for name in ('FASTRTPS_DEFAULT_PROFILES_FILE', 'FASTDDS_DEFAULT_PROFILES_FILE', 'DISPLAY'):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv('WAYLAND_DISPLAY', raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = argv(configs) if callable(argv) else argv
    assert palletize.main([*args, '--planner', 'grid'] if not args else args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert err.startswith('palletize: error: ')
    assert re.search(match, err), err


def test_a_params_file_of_the_declared_types_and_a_named_runs_folder_is_accepted(
    configs, tmp_path
):
    from palletizer.launcher.graph import check_runs_folder

    arg = _params(
        configs,
        f'/**:\n  ros__parameters: {{level: 11, speed: 0.0}}\ntelemetry:\n  ros__parameters: '
        f'{{runs_dir: {tmp_path}/elsewhere, min_free_mb: 1.0}}\n',
    )
    opts = palletize.build_options(['--planner', 'grid', arg])
    check_runs_folder(opts)
    assert (tmp_path / 'elsewhere').is_dir()
