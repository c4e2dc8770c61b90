"""The URDF: the DH chain, ur_description's frame names, parsed by a real URDF parser (yourdfpy)
and checked against ur_analytic_ik's forward kinematics."""

from __future__ import annotations

import dataclasses
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import ur_analytic_ik
import yourdfpy
from palletizer.core.config import load_config
from palletizer.core.description import (
    JOINTS,
    LINKS,
    fixed_transforms,
    link_transforms,
    robot_description,
    static_transforms,
    urdf,
)
from palletizer.core.motion import UR10eKinematics
from palletizer.core.motion.kinematics import Frame

ROBOT = load_config().cell.robot
DH = dataclasses.asdict(ROBOT.dh)
TCP = float(load_config().cell.gripper.tcp_offset)
# The frames ur_description publishes for a UR10e (tf_prefix ''), which a real ur_robot_driver's
# TF tree has: ours must agree.
UR_FRAMES = {
    'base_link',
    'base_link_inertia',
    'base',
    'shoulder_link',
    'upper_arm_link',
    'forearm_link',
    'wrist_1_link',
    'wrist_2_link',
    'wrist_3_link',
    'flange',
    'tool0',
}


def _published() -> str:
    return robot_description(ROBOT, load_config().cell.gripper)


@pytest.fixture(scope='module')
def parsed() -> yourdfpy.URDF:
    return yourdfpy.URDF.load(
        io.StringIO(_published()),
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )


def test_link_chain_equals_dh_forward_kinematics():
    rng = np.random.default_rng(4)
    kin = UR10eKinematics()
    for q in rng.uniform(-3.0, 3.0, size=(50, 6)):
        T = np.eye(4)
        for step in link_transforms(DH, q):
            T = T @ step
        T[:3, 3] += T[:3, :3] @ np.array([0.0, 0.0, 0.092])
        np.testing.assert_allclose(T, kin.fk(q, Frame.BASE), atol=1e-9)


def test_urdf_names_the_ur_joints_and_limits():
    text = urdf(DH, [-6.28] * 6, [6.28] * 6, [2.09] * 6, [330] * 6, 0.092)
    root = ET.fromstring(text)
    names = [j.get('name') for j in root.iter('joint') if j.get('type') == 'revolute']
    assert names == list(JOINTS)
    tcp = root.find(".//joint[@name='tool0-tcp']")
    assert tcp.find('parent').get('link') == 'tool0'
    assert tcp.find('origin').get('xyz') == '0.000000 0.000000 0.092000'


def test_a_urdf_parser_finds_ur_descriptions_frames_joints_and_limits(parsed):
    # ours: the cup plane, and the cell's pedestal and gripper (tests/sim/test_urdf_matches_mjcf.py)
    assert set(parsed.link_map) == UR_FRAMES | {'tcp', 'pedestal', 'gripper'}
    assert parsed.base_link == 'base_link'
    assert parsed.actuated_joint_names == list(JOINTS)
    for k, name in enumerate(JOINTS):
        lim = parsed.joint_map[name].limit
        assert (lim.lower, lim.upper) == (ROBOT.joint_lower[k], ROBOT.joint_upper[k])
        assert lim.velocity == pytest.approx(np.radians(ROBOT.joint_speed_limits_deg_s[k]))
        assert lim.effort == ROBOT.torque_limits_nm[k]


def test_the_parsed_urdf_agrees_with_ur_analytic_ik_at_random_poses(parsed):
    rng = np.random.default_rng(11)
    for q in rng.uniform(-np.pi, np.pi, size=(30, 6)):
        parsed.update_cfg(q)
        want = ur_analytic_ik.ur10e.forward_kinematics(*q)  # UR's base -> tool0
        np.testing.assert_allclose(parsed.get_transform('tool0', 'base'), want, atol=1e-6)
        # base_link is REP-103 (x forward): turned pi about z from base.
        T = parsed.get_transform('tool0', 'base_link')
        np.testing.assert_allclose(T, np.diag([-1.0, -1.0, 1.0, 1.0]) @ want, atol=1e-6)
        # ROS-Industrial flange: x along tool0's z (out of the flange); the tcp on that axis.
        F = parsed.get_transform('flange', 'base')
        np.testing.assert_allclose(F[:3, 0], want[:3, 2], atol=1e-6)
        P = parsed.get_transform('tcp', 'base')
        np.testing.assert_allclose(P[:3, 3], want[:3, 3] + TCP * want[:3, 2], atol=1e-6)


def test_static_transforms_match_the_urdf_fixed_joints(parsed):
    parsed.update_cfg(np.zeros(6))
    fixed = fixed_transforms(TCP, ROBOT.pedestal.height)
    assert {child for _, child, _ in fixed} == set(parsed.link_map) - {'base_link', *LINKS[1:]}
    for parent, child, T in fixed:
        np.testing.assert_allclose(parsed.get_transform(child, parent), T, atol=1e-9)
    (world, base_link, T), *_ = static_transforms(np.eye(4), TCP)
    assert (world, base_link) == ('world', 'base_link')
    np.testing.assert_allclose(T @ parsed.get_transform('base', 'base_link'), np.eye(4), atol=1e-9)
