"""The one graph description, for every level, and the launch files that adapt it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from palletizer.core.config import load_config
from palletizer.core.errors import GraphError
from palletizer.launcher.graph import (
    UR_SET_IO_SERVICE,
    UR_TRAJECTORY_ACTION,
    UR_WRENCH_TOPIC,
    describe,
    launch_node_kwargs,
    parse_launch_args,
)

ROOT = Path(__file__).resolve().parents[2]
CFG = load_config(ROOT / 'configs')
ALL_NODES = [
    'cell_bridge',
    'state_publisher',
    'depth_fusion',
    'wrist_gauge',
    'planner',
    'trajectory_executor',
    'telemetry',
    'viz_markers',
    'episode_director',
]


@pytest.mark.parametrize('level', sorted(CFG.levels))
def test_every_level_gets_the_full_graph_with_its_level_and_seed(level):
    opts = parse_launch_args(
        [f'level:={level}', 'seed:=7', 'episodes:=3', 'planner:=beam', 'speed:=1'], config=CFG
    )
    nodes = {n.name: n for n in describe(opts)}
    assert list(nodes) == ALL_NODES
    assert nodes['cell_bridge'].parameters['level'] == level
    assert nodes['cell_bridge'].parameters['seed'] == 7
    assert nodes['cell_bridge'].parameters['use_sim_time'] is False  # it owns /clock
    assert nodes['episode_director'].parameters['episodes'] == 3
    assert nodes['planner'].parameters['kind'] == 'beam'
    assert nodes['trajectory_executor'].parameters['speed'] == 1.0
    assert nodes['episode_director'].required and nodes['cell_bridge'].required
    assert opts.source == CFG.levels[level].source
    for n in nodes.values():
        if n.name != 'cell_bridge':
            assert n.parameters['use_sim_time'] is True


def test_executor_and_cell_speak_the_ur_driver_names():
    nodes = {n.name: n for n in describe(parse_launch_args(['level:=23'], config=CFG))}
    for name in ('cell_bridge', 'trajectory_executor'):
        p = nodes[name].parameters
        assert (
            p['trajectory_action'] == '/scaled_joint_trajectory_controller/follow_joint_trajectory'
        )
        assert p['set_io_service'] == '/io_and_status_controller/set_io'
        assert p['wrench_topic'] == '/force_torque_sensor_broadcaster/wrench'
    assert ('joint_states', '/joint_states') in nodes['trajectory_executor'].remappings


def test_robot_ur_starts_no_cell_bridge():
    names = [n.name for n in describe(parse_launch_args(['robot:=ur'], config=CFG))]
    assert 'cell_bridge' not in names and 'trajectory_executor' in names


def test_stability_trials_are_asked_of_the_director_and_need_the_simulated_cell():
    def director(args):
        nodes = {n.name: n for n in describe(parse_launch_args(args, config=CFG))}
        return nodes['episode_director'].parameters['stability']

    assert director([]) is False
    assert director(['stability:=true']) is True
    with pytest.raises(GraphError, match='robot:=sim cell:=lockstep only'):
        parse_launch_args(['stability:=true', 'robot:=ur'], config=CFG)
    with pytest.raises(GraphError, match='robot:=sim cell:=lockstep only'):
        parse_launch_args(['stability:=true', 'cell:=hardware', 'speed:=1'], config=CFG)
    with pytest.raises(GraphError, match='stability'):
        parse_launch_args(['stability:=maybe'], config=CFG)


def test_cell_hardware_sets_the_profile_and_the_palletizer_on_real_interfaces_alone():
    def nodes(args):
        return {n.name: n.parameters for n in describe(parse_launch_args(args, config=CFG))}

    lockstep = nodes([])
    assert lockstep['cell_bridge']['profile'] == 'lockstep'
    assert lockstep['episode_director']['cell_interfaces'] == 'sim'
    assert lockstep['depth_fusion']['capture_service'] == '/cell_bridge/capture'
    hardware = nodes(['cell:=hardware', 'speed:=1'])
    assert hardware['cell_bridge']['profile'] == 'hardware'
    assert hardware['episode_director']['cell_interfaces'] == 'real'
    assert hardware['depth_fusion']['capture_service'] == ''  # streamed frames
    ur = nodes(['robot:=ur'])  # a real cell: the same interfaces
    assert ur['episode_director']['cell_interfaces'] == 'real'
    assert ur['depth_fusion']['capture_service'] == ''


@pytest.mark.parametrize(
    'args, match',
    [
        (['cell:=hardware'], 'cell:=hardware with speed:=0; .* expected speed > 0'),
        (['cell:=hardware', 'speed:=1', 'robot:=ur'], 'cell:=hardware with robot:=ur'),
        (['cell:=hardware', 'speed:=1', 'perception:=oracle'], 'no real cell has'),
        (['cell:=real'], 'expected one of lockstep, hardware'),
    ],
)
def test_a_hardware_profile_that_cannot_work_is_refused_by_name(args, match):
    with pytest.raises(GraphError, match=match):
        parse_launch_args(args, config=CFG)


def test_the_detection_is_published_under_palletizer():
    nodes = {n.name: n for n in describe(parse_launch_args([], config=CFG))}
    assert ('detection', '/palletizer/detection') in nodes['depth_fusion'].remappings


@pytest.mark.parametrize('level', sorted(CFG.levels))
def test_launch_files_pass_exactly_the_description(level):
    kwargs = launch_node_kwargs({'level': str(level), 'log_level': 'warn'})
    nodes = describe(parse_launch_args([f'level:={level}'], config=CFG))
    assert [k['name'] for k in kwargs] == [n.name for n in nodes]
    for kw, n in zip(kwargs, nodes, strict=True):
        assert kw['package'] == 'palletizer' and kw['executable'] == n.executable
        assert kw['parameters'] == [dict(n.parameters)]
        assert kw['remappings'] == list(n.remappings)
        assert kw['respawn'] == n.respawn
        assert kw['required'] == n.required  # the launch files make it on_exit=Shutdown()
        assert kw['arguments'] == ['--ros-args', '--log-level', 'warn']
        assert kw['additional_env'] == dict(n.env)


def test_every_node_gets_the_short_lease_dds_profile_unless_one_is_set(monkeypatch):
    from palletizer.launcher.graph import DDS_PROFILE_ENV, dds_env

    monkeypatch.delenv(DDS_PROFILE_ENV, raising=False)
    monkeypatch.delenv('FASTDDS_DEFAULT_PROFILES_FILE', raising=False)
    for n in describe(parse_launch_args([], config=CFG)):
        profile = Path(n.env[DDS_PROFILE_ENV])
        assert profile.name == 'fastdds.xml' and profile.is_file()
        assert '<leaseDuration><sec>2</sec>' in profile.read_text()
    assert dds_env({DDS_PROFILE_ENV: '/site/profile.xml'}) == {}
    assert dds_env({'FASTDDS_DEFAULT_PROFILES_FILE': '/site/profile.xml'}) == {}


@pytest.mark.parametrize('source', ['table', 'conveyor', 'truck'])
def test_per_source_launch_defaults_to_its_first_level_and_refuses_others(source):
    levels = CFG.levels_of(source)
    assert parse_launch_args([], source=source, config=CFG).level == levels[0]
    other = next(i for i in CFG.levels if CFG.levels[i].source != source)
    with pytest.raises(GraphError, match=f'expected one of the {source} levels'):
        parse_launch_args([f'level:={other}'], source=source, config=CFG)


def _calls(tree: ast.AST) -> list[str]:
    return [
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    ]


def test_the_level_launch_is_the_one_adapter_over_the_description():
    text = (ROOT / 'launch' / 'level.launch.py').read_text()
    calls = _calls(ast.parse(text))
    assert 'launch_node_kwargs' in calls and 'Node' in calls
    assert "LaunchConfiguration('source')" in text  # source:= restricts the levels
    assert len(text.splitlines()) < 45


@pytest.mark.parametrize('source', ['table', 'conveyor', 'truck'])
def test_each_source_launch_includes_the_level_launch_with_its_source(source):
    """As the UR driver's per-robot launch files include ur_control.launch.py: no node of their
    own, only level.launch.py with source:= set."""
    tree = ast.parse((ROOT / 'launch' / f'{source}.launch.py').read_text())
    calls = _calls(tree)
    assert 'IncludeLaunchDescription' in calls
    assert 'launch_node_kwargs' not in calls and 'Node' not in calls
    given = [
        {ast.literal_eval(k): ast.literal_eval(v) for k, v in zip(n.keys, n.values, strict=True)}
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict)
    ]
    assert given == [{'source': source}]
    paths = [c.value for c in ast.walk(tree) if isinstance(c, ast.Constant)]
    assert 'level.launch.py' in paths


@pytest.mark.parametrize(
    'args, match',
    [
        (['level:=41'], "level:='41'; expected one of the levels: 11, 12"),
        (['planer:=beam'], "did you mean 'planner'"),
        (['planner:=astar'], 'expected one of heuristic, beam, grid'),
        (['episodes:=-1'], 'expected an integer >= 1'),
        (['speed:=fast'], 'expected a number >= 0'),
        (['robot:=ur5'], 'expected one of sim, ur'),
        (['level23'], 'expected name:=value'),
        (['seed:=1', 'seed:=2'], 'given twice'),
    ],
)
def test_bad_launch_arguments_name_the_argument_and_what_is_allowed(args, match):
    with pytest.raises(GraphError, match=match):
        parse_launch_args(args, config=CFG)


def test_the_ur_names_are_the_drivers():
    assert UR_TRAJECTORY_ACTION.endswith(
        'scaled_joint_trajectory_controller/follow_joint_trajectory'
    )
    assert UR_SET_IO_SERVICE == '/io_and_status_controller/set_io'
    assert UR_WRENCH_TOPIC == '/force_torque_sensor_broadcaster/wrench'


def test_viz_foxglove_adds_the_bridge_on_the_default_port():
    plain = [n.name for n in describe(parse_launch_args([], config=CFG))]
    nodes = describe(parse_launch_args(['viz:=foxglove'], config=CFG))
    assert [n.name for n in nodes] == [*plain, 'foxglove_bridge']
    bridge = nodes[-1]
    assert bridge.parameters['port'] == 8765 and bridge.parameters['host'] == '127.0.0.1'
    assert bridge.respawn and not bridge.required
    with pytest.raises(GraphError, match="viz:='rviz'; expected one of none, foxglove"):
        parse_launch_args(['viz:=rviz'], config=CFG)


def test_rviz_true_needs_rviz2_and_starts_it_with_the_cells_configuration(monkeypatch, tmp_path):
    monkeypatch.setenv('PATH', str(tmp_path))
    with pytest.raises(GraphError, match='rviz2 is not installed here .*ros-jazzy-rviz2'):
        parse_launch_args(['rviz:=true'], config=CFG)
    fake = tmp_path / 'rviz2'
    fake.write_text('#!/bin/sh\n')
    fake.chmod(0o755)
    nodes = describe(parse_launch_args(['rviz:=true'], config=CFG))
    rviz = next(n for n in nodes if n.name == 'rviz2')
    assert rviz.command == (str(fake),) and rviz.args[0] == '-d'
    assert Path(rviz.args[1]).name == 'palletizer.rviz' and Path(rviz.args[1]).is_file()
    kw = next(k for k in launch_node_kwargs({'rviz': 'true'}) if k['name'] == 'rviz2')
    assert (kw['package'], kw['executable']) == ('rviz2', 'rviz2')
    assert kw['arguments'][:2] == ['-d', rviz.args[1]]
    assert 'rviz2' not in [n.name for n in describe(parse_launch_args([], config=CFG))]


def test_the_three_source_launch_files_differ_only_in_their_source():
    """So what the real-launch tests show of one (truck: tests/graph/test_ros2_launch.py) holds
    for all three."""

    def body(name: str) -> str:
        return (ROOT / 'launch' / f'{name}.launch.py').read_text().replace(name, 'SOURCE')

    assert body('table') == body('conveyor') == body('truck')
