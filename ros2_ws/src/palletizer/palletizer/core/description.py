"""The UR10e robot description (URDF) and its link transforms, from the official DH parameters.

Joint i's origin is Tx(a_{i-1}) Rx(alpha_{i-1}) Tz(d_i) with a revolute axis z: the standard
DH chain regrouped, so the URDF's forward kinematics equals the DH forward kinematics (tested).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ['JOINTS', 'LINKS', 'joint_origins', 'link_transforms', 'urdf']

JOINTS = (
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
)
LINKS = (
    'base_link',
    'shoulder_link',
    'upper_arm_link',
    'forearm_link',
    'wrist_1_link',
    'wrist_2_link',
    'wrist_3_link',
)
_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)


def joint_origins(dh: dict[str, float]) -> list[tuple[tuple[float, float, float], float]]:
    """(xyz, roll) of each joint's origin in its parent link [m], [rad]."""
    d = (dh['d1'], 0.0, 0.0, dh['d4'], dh['d5'], dh['d6'])
    a = (0.0, dh['a2'], dh['a3'], 0.0, 0.0, 0.0)
    out = []
    for i in range(6):
        if i == 0:
            out.append(((0.0, 0.0, d[0]), 0.0))
            continue
        al = _ALPHA[i - 1]
        out.append(((a[i - 1], -math.sin(al) * d[i], math.cos(al) * d[i]), al))
    return out


def _T(xyz: Sequence[float], roll: float, yaw: float) -> np.ndarray:
    cr, sr, cy, sy = math.cos(roll), math.sin(roll), math.cos(yaw), math.sin(yaw)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    T = np.eye(4)
    T[:3, :3] = Rx @ Rz
    T[:3, 3] = xyz
    return T


def link_transforms(dh: dict[str, float], q: Sequence[float]) -> list[np.ndarray]:
    """Parent->child transforms (4x4) of the six moving links at joint angles q [rad]."""
    return [_T(xyz, roll, float(qi)) for (xyz, roll), qi in zip(joint_origins(dh), q, strict=True)]


def urdf(
    dh: dict[str, float],
    lower: Sequence[float],
    upper: Sequence[float],
    velocity: Sequence[float],
    effort: Sequence[float],
    tcp_offset: float,
) -> str:
    """A URDF of the arm (kinematics only, for RViz and robot_state_publisher users)."""
    parts = ['<?xml version="1.0"?>', '<robot name="ur10e_palletizer">']
    parts += [f'  <link name="{n}"/>' for n in (*LINKS, 'flange', 'tcp')]
    for i, ((x, y, z), roll) in enumerate(joint_origins(dh)):
        parts.append(
            f'  <joint name="{JOINTS[i]}" type="revolute">'
            f'<parent link="{LINKS[i]}"/><child link="{LINKS[i + 1]}"/>'
            f'<origin xyz="{x:.6f} {y:.6f} {z:.6f}" rpy="{roll:.9f} 0 0"/><axis xyz="0 0 1"/>'
            f'<limit lower="{lower[i]}" upper="{upper[i]}" velocity="{velocity[i]:.6f}" '
            f'effort="{effort[i]}"/></joint>'
        )
    parts.append(
        '  <joint name="flange_fixed" type="fixed"><parent link="wrist_3_link"/>'
        '<child link="flange"/><origin xyz="0 0 0" rpy="0 0 0"/></joint>'
    )
    parts.append(
        f'  <joint name="tcp_fixed" type="fixed"><parent link="flange"/>'
        f'<child link="tcp"/><origin xyz="0 0 {tcp_offset}" rpy="0 0 0"/></joint>'
    )
    parts.append('</robot>')
    return '\n'.join(parts) + '\n'
