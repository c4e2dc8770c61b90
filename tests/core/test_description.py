"""The URDF chain built from the DH parameters reproduces the DH forward kinematics."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
from palletizer.core.config import load_config
from palletizer.core.description import JOINTS, link_transforms, urdf
from palletizer.core.motion import UR10eKinematics
from palletizer.core.motion.kinematics import Frame

DH = dict(load_config().cell['robot']['dh'])


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
    assert root.find(".//joint[@name='tcp_fixed']/origin").get('xyz') == '0 0 0.092'
