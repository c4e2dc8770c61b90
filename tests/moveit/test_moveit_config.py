"""palletizer_moveit_config agrees with /robot_description and with itself: the committed SRDF is
what the generator writes from the model, its links and joints are the URDF's, the joint limits
lie within the URDF's, and the group, pipeline and planner names match across the files. No ROS
install needed: the URDF goes through yourdfpy, the SRDF and YAML through their plain parsers."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
import yourdfpy
from catkin_pkg.package import parse_package
from palletizer.cli.moveit_config import GROUP, SRDF_PATH, URDF_PATH, published_urdf, srdf
from palletizer.core.config import load_config
from palletizer.core.description import JOINTS, robot_description

PKG = Path(__file__).resolve().parents[2] / 'ros2_ws' / 'src' / 'palletizer_moveit_config'
CONFIG = PKG / 'config'
CELL = load_config().cell


def _yaml(name: str) -> dict:
    with open(CONFIG / name) as f:
        return yaml.safe_load(f)


@pytest.fixture(scope='module')
def urdf() -> yourdfpy.URDF:
    return yourdfpy.URDF.load(
        io.StringIO(robot_description(CELL.robot, CELL.gripper)),
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )


@pytest.fixture(scope='module')
def semantic() -> ET.Element:
    return ET.parse(SRDF_PATH).getroot()


def test_the_committed_srdf_is_what_the_generator_computes_from_the_model():
    assert SRDF_PATH == CONFIG / 'ur10e_palletizer.srdf'
    assert SRDF_PATH.read_text() == srdf(), (
        f'{SRDF_PATH} is stale: rerun `python -m palletizer.cli.moveit_config`'
    )


def test_the_packaged_urdf_is_the_published_robot_description():
    assert URDF_PATH.read_text() == published_urdf(), (
        f'{URDF_PATH} is stale: rerun `python -m palletizer.cli.moveit_config`'
    )


def test_srdf_links_and_joints_exist_in_the_urdf(urdf, semantic):
    links = set(urdf.link_map)
    named = [('chain', c.get('base_link')) for c in semantic.iter('chain')]
    named += [('chain', c.get('tip_link')) for c in semantic.iter('chain')]
    named += [
        ('group link', el.get('name')) for g in semantic.iter('group') for el in g.iter('link')
    ]
    named += [('end effector parent', e.get('parent_link')) for e in semantic.iter('end_effector')]
    named += [('virtual joint child', v.get('child_link')) for v in semantic.iter('virtual_joint')]
    for pair in semantic.iter('disable_collisions'):
        named += [('disabled pair', pair.get('link1')), ('disabled pair', pair.get('link2'))]
    missing = [(what, n) for what, n in named if n not in links]
    assert not missing, f'SRDF names links the URDF lacks: {missing}'
    for state in semantic.iter('group_state'):
        for j in state.iter('joint'):
            lim = urdf.joint_map[j.get('name')].limit
            assert lim.lower <= float(j.get('value')) <= lim.upper, (state.get('name'), j.attrib)


def test_the_arm_group_is_ur_moveit_configs_chain_and_the_end_effector_sits_on_tool0(semantic):
    (group,) = [g for g in semantic.iter('group') if g.get('name') == GROUP]
    chain = group.find('chain')
    assert (chain.get('base_link'), chain.get('tip_link')) == ('base_link', 'tool0')
    (ee,) = semantic.iter('end_effector')
    assert (ee.get('parent_link'), ee.get('parent_group')) == ('tool0', GROUP)


def test_disabled_pairs_cover_only_links_with_collision_geometry(urdf, semantic):
    solid = {n for n, link in urdf.link_map.items() if link.collisions}
    reasons = {'Adjacent', 'Default', 'Always', 'Never'}
    pairs = [
        (p.get('link1'), p.get('link2'), p.get('reason'))
        for p in semantic.iter('disable_collisions')
    ]
    assert pairs, 'no disabled collision pairs'
    for a, b, why in pairs:
        assert {a, b} <= solid and a != b and why in reasons, (a, b, why)
    assert len({frozenset((a, b)) for a, b, _ in pairs}) == len(pairs), 'a pair listed twice'
    adjacent = {frozenset((a, b)) for a, b, why in pairs if why == 'Adjacent'}
    for a, b in (('shoulder_link', 'upper_arm_link'), ('wrist_3_link', 'gripper')):
        assert frozenset((a, b)) in adjacent, f'{a}/{b} not adjacent'


def test_joint_limits_lie_within_the_urdfs(urdf):
    limits = _yaml('joint_limits.yaml')['joint_limits']
    assert set(limits) == set(JOINTS)
    for j, lim in limits.items():
        u = urdf.joint_map[j].limit
        assert lim['max_velocity'] <= u.velocity, f'{j}: max_velocity above the URDF {u.velocity}'
        assert lim['has_acceleration_limits'] and lim['max_acceleration'] > 0, j
        if lim.get('has_position_limits'):
            assert u.lower <= lim['min_position'] < lim['max_position'] <= u.upper, j


def test_group_pipeline_and_planner_names_agree_across_files(semantic):
    groups = {g.get('name') for g in semantic.iter('group')}
    kin = _yaml('kinematics.yaml')
    assert set(kin) == {GROUP} and set(kin) <= groups
    ompl = _yaml('ompl_planning.yaml')
    ompl_groups = {k for k, v in ompl.items() if isinstance(v, dict) and k != 'planner_configs'}
    assert ompl_groups == {GROUP}
    configs = set(ompl['planner_configs'])
    assert set(ompl[GROUP]['planner_configs']) <= configs
    assert ompl[GROUP]['default_planner_config'] in configs
    mpy = _yaml('moveit_py.yaml')
    pipelines = mpy['planning_pipelines']['pipeline_names']
    for p in pipelines:
        assert (CONFIG / f'{p}_planning.yaml').is_file(), f'pipeline {p} has no {p}_planning.yaml'
    requests = [mpy['plan_request_params']] + [
        v['plan_request_params']
        for v in mpy.values()
        if isinstance(v, dict) and 'plan_request_params' in v
    ]
    planners = {'ompl': configs, 'pilz_industrial_motion_planner': {'LIN', 'PTP', 'CIRC'}}
    for r in requests:
        assert r['planning_pipeline'] in pipelines, r
        assert r['planner_id'] in planners[r['planning_pipeline']], r
    assert 'cartesian_limits' in _yaml('pilz_cartesian_limits.yaml')


def test_the_package_manifest_passes_catkin_pkgs_strict_check():
    warnings: list[str] = []
    pkg = parse_package(str(PKG / 'package.xml'), warnings=warnings)
    pkg.validate()
    assert pkg.name == PKG.name and not warnings, warnings
    assert 'install(DIRECTORY config' in (PKG / 'CMakeLists.txt').read_text()
