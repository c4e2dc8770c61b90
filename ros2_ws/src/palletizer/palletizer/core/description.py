"""The UR10e robot description (URDF) and its link transforms, from the official DH parameters.

Joint i's origin is Tx(a_{i-1}) Rx(alpha_{i-1}) Tz(d_i) with a revolute axis z: the standard
DH chain regrouped, so the URDF's forward kinematics equals the DH forward kinematics (tested).
That is also how `ur_description` builds the chain from its kinematics file, and the frames
carry its names, so a real `ur_robot_driver`'s TF tree and ours agree: `base_link` (REP-103,
x forward), `base_link_inertia` and `base` (both turned pi about z: the controller's Base
frame, the DH base), the links, `flange` (ROS-Industrial: x out of the tool flange) and `tool0`
(the controller's tool frame, z out of the flange). `tcp`, ours, is the gripper's cup plane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    'FIXED',
    'JOINTS',
    'LINKS',
    'fixed_transforms',
    'joint_origins',
    'link_transforms',
    'urdf',
]

JOINTS = (
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
)
LINKS = (
    'base_link_inertia',
    'shoulder_link',
    'upper_arm_link',
    'forearm_link',
    'wrist_1_link',
    'wrist_2_link',
    'wrist_3_link',
)
_ALPHA = (math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0)
# The fixed frames (parent, child, joint name, rpy [rad]) as ur_description has them; the tcp
# (an offset along tool0's z) is added by fixed_transforms and urdf.
FIXED = (
    ('base_link', 'base_link_inertia', 'base_link-base_link_inertia', (0.0, 0.0, math.pi)),
    ('base_link', 'base', 'base_link-base_fixed_joint', (0.0, 0.0, math.pi)),
    ('wrist_3_link', 'flange', 'wrist_3-flange', (0.0, -math.pi / 2, -math.pi / 2)),
    ('flange', 'tool0', 'flange-tool0', (math.pi / 2, 0.0, math.pi / 2)),
)


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


def _rpy(rpy: Sequence[float]) -> np.ndarray:
    """URDF rpy [rad] as a rotation (3, 3): Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(v) for v in rpy)
    cr, sr, cp, sp, cy, sy = (
        math.cos(r),
        math.sin(r),
        math.cos(p),
        math.sin(p),
        math.cos(y),
        math.sin(y),
    )
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return np.asarray(Rz @ Ry @ Rx)


def fixed_transforms(tcp_offset: float) -> list[tuple[str, str, np.ndarray]]:
    """(parent, child, parent->child 4x4) of every fixed frame, the tcp included."""
    out = []
    for parent, child, _, rpy in FIXED:
        T = np.eye(4)
        T[:3, :3] = _rpy(rpy)
        out.append((parent, child, T))
    tcp = np.eye(4)
    tcp[2, 3] = tcp_offset
    out.append(('tool0', 'tcp', tcp))
    return out


def static_transforms(
    T_world_base: np.ndarray, tcp_offset: float
) -> list[tuple[str, str, np.ndarray]]:
    """Every fixed transform of the robot's TF tree, from the world: world -> base_link, given
    the world pose of the DH base (UR's `base`; `base_link` is turned pi about z from it),
    then fixed_transforms."""
    T = np.asarray(T_world_base, dtype=float) @ np.diag([-1.0, -1.0, 1.0, 1.0])
    return [('world', 'base_link', T), *fixed_transforms(tcp_offset)]


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
    names = ('base_link', *LINKS, 'base', 'flange', 'tool0', 'tcp')
    parts += [f'  <link name="{n}"/>' for n in names]
    parent, child, name, rpy = FIXED[0]  # base_link -> base_link_inertia, the chain's root
    parts.append(_fixed(name, parent, child, (0.0, 0.0, 0.0), rpy))
    for i, ((x, y, z), roll) in enumerate(joint_origins(dh)):
        parts.append(
            f'  <joint name="{JOINTS[i]}" type="revolute">'
            f'<parent link="{LINKS[i]}"/><child link="{LINKS[i + 1]}"/>'
            f'<origin xyz="{x:.6f} {y:.6f} {z:.6f}" rpy="{roll:.9f} 0 0"/><axis xyz="0 0 1"/>'
            f'<limit lower="{lower[i]}" upper="{upper[i]}" velocity="{velocity[i]:.6f}" '
            f'effort="{effort[i]}"/></joint>'
        )
    for parent, child, name, rpy in FIXED[1:]:
        parts.append(_fixed(name, parent, child, (0.0, 0.0, 0.0), rpy))
    parts.append(_fixed('tool0-tcp', 'tool0', 'tcp', (0.0, 0.0, tcp_offset), (0.0, 0.0, 0.0)))
    parts.append('</robot>')
    return '\n'.join(parts) + '\n'


def _fixed(name: str, parent: str, child: str, xyz: Sequence[float], rpy: Sequence[float]) -> str:
    x, y, z = xyz
    r, p, w = rpy
    return (
        f'  <joint name="{name}" type="fixed"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{x:.6f} {y:.6f} {z:.6f}" rpy="{r:.9f} {p:.9f} {w:.9f}"/></joint>'
    )
