"""The UR10e robot description (URDF) and its link transforms, from the official DH parameters.

Joint i's origin is Tx(a_{i-1}) Rx(alpha_{i-1}) Tz(d_i) with a revolute axis z: the standard
DH chain regrouped, so the URDF's forward kinematics equals the DH forward kinematics (tested).
That is also how `ur_description` builds the chain from its kinematics file, and the frames
carry its names, so a real `ur_robot_driver`'s TF tree and ours agree: `base_link` (REP-103,
x forward), `base_link_inertia` and `base` (both turned pi about z: the controller's Base
frame, the DH base), the links, `flange` (ROS-Industrial: x out of the tool flange) and `tool0`
(the controller's tool frame, z out of the flange). `tcp`, ours, is the gripper's cup plane.

The robot's geometry and inertials are the MuJoCo model's (sim/models/ur10e.xml, vgp20.xml),
written in URDF primitives: a capsule is a cylinder and two spheres. `pedestal` (its frame on
the floor under `base_link`) and `gripper` (at `tool0`) are links on fixed joints.
tests/sim/test_urdf_matches_mjcf.py holds every shape and inertial equal to the compiled MJCF's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from palletizer.core.config.cell import GripperConfig, RobotConfig

__all__ = [
    'FIXED',
    'JOINTS',
    'LINKS',
    'Inertial',
    'RobotBody',
    'Shape',
    'ToolGeometry',
    'fixed_transforms',
    'joint_origins',
    'link_transforms',
    'robot_body',
    'robot_description',
    'robot_geometry',
    'robot_inertials',
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


def fixed_transforms(
    tcp_offset: float, pedestal_height: float | None = None
) -> list[tuple[str, str, np.ndarray]]:
    """(parent, child, parent->child 4x4) of every fixed frame, the tcp included; with
    `pedestal_height` [m] also the cell's `pedestal` (on the floor under base_link) and
    `gripper` (at tool0), the links of the robot's body (robot_body)."""
    out = []
    for parent, child, _, rpy in FIXED:
        T = np.eye(4)
        T[:3, :3] = _rpy(rpy)
        out.append((parent, child, T))
    tcp = np.eye(4)
    tcp[2, 3] = tcp_offset
    out.append(('tool0', 'tcp', tcp))
    if pedestal_height is not None:
        ped = np.eye(4)
        ped[2, 3] = -pedestal_height
        out.append(('base_link', 'pedestal', ped))
        out.append(('tool0', 'gripper', np.eye(4)))
    return out


def static_transforms(
    T_world_base: np.ndarray, tcp_offset: float, pedestal_height: float | None = None
) -> list[tuple[str, str, np.ndarray]]:
    """Every fixed transform of the robot's TF tree, from the world: world -> base_link, given
    the world pose of the DH base (UR's `base`; `base_link` is turned pi about z from it),
    then fixed_transforms."""
    T = np.asarray(T_world_base, dtype=float) @ np.diag([-1.0, -1.0, 1.0, 1.0])
    return [('world', 'base_link', T), *fixed_transforms(tcp_offset, pedestal_height)]


def urdf(
    dh: dict[str, float],
    lower: Sequence[float],
    upper: Sequence[float],
    velocity: Sequence[float],
    effort: Sequence[float],
    tcp_offset: float,
    body: RobotBody | None = None,
) -> str:
    """A URDF of the arm: kinematics only, or with `body` (robot_body) also the pedestal and
    gripper links, visual and collision geometry and inertials (robot_description)."""
    parts = ['<?xml version="1.0"?>', '<robot name="ur10e_palletizer">']
    names = ['base_link', *LINKS, 'base', 'flange', 'tool0', 'tcp']
    if body is not None:
        names += ['pedestal', 'gripper']
        parts += [
            f'  <material name="{n}"><color rgba="{_f(rgba)}"/></material>'
            for n, rgba in _MATERIALS.items()
        ]
    for n in names:
        inner = _link_body(n, body) if body is not None else ''
        parts.append(
            f'  <link name="{n}">{inner}\n  </link>' if inner else f'  <link name="{n}"/>'
        )
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
    if body is not None:
        h = body.pedestal_height
        parts.append(
            _fixed('base_link-pedestal', 'base_link', 'pedestal', (0.0, 0.0, -h), (0.0,) * 3)
        )
        parts.append(_fixed('tool0-gripper', 'tool0', 'gripper', (0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
    parts.append('</robot>')
    return '\n'.join(parts) + '\n'


def _fixed(name: str, parent: str, child: str, xyz: Sequence[float], rpy: Sequence[float]) -> str:
    x, y, z = xyz
    r, p, w = rpy
    return (
        f'  <joint name="{name}" type="fixed"><parent link="{parent}"/><child link="{child}"/>'
        f'<origin xyz="{x:.6f} {y:.6f} {z:.6f}" rpy="{r:.9f} {p:.9f} {w:.9f}"/></joint>'
    )


# --- The robot's body: the MuJoCo model's shapes and inertials in the URDF's link frames ---

# Menagerie housing offsets along the joint axes [m], as in sim/models/ur10e.xml (sim/robot.py
# ArmParams.upper_arm_y, forearm_y): the shoulder-to-elbow y offsets of its bodies.
_UPPER_ARM_Y = 0.176
_FOREARM_Y = -0.137
# Menagerie UR10e inertia tensors [kg m^2] and the masses [kg] they belong to, as sim/robot.py
# scales them by UR's published link masses (UR publishes masses and CoMs, not tensors).
_MENAGERIE_INERTIA: tuple[tuple[tuple[float, float, float], float], ...] = (
    ((0.0314743, 0.0314743, 0.0218756), 7.778),  # shoulder
    ((0.421754, 0.421754, 0.0363656), 12.93),  # upper arm
    ((0.11107, 0.11107, 0.0108844), 3.87),  # forearm
    ((0.0055125, 0.00510825, 0.00510825), 1.96),  # wrist 1
    ((0.0055125, 0.00510825, 0.00510825), 1.96),  # wrist 2
    ((0.000526462, 0.000526462, 0.000568125), 0.202),  # wrist 3
)
# Centre of mass of each moving link in its MJCF body frame [m] (sim/models/ur10e.xml
# <inertial pos>, Menagerie's), and the rotation of the principal axes (wrist 3's quat).
_COM = ((0, 0, 0), (0, 0, 0.306), (0, 0, 0.286), (0, 0.127, 0), (0, 0, 0.1), (0, 0.0771, 0))
_RX90 = (math.pi / 2, 0.0, 0.0)  # MJCF quat="1 1 0 0": a capsule along the body's y
_MATERIALS = {
    'arm': (0.3, 0.5, 0.8, 1.0),
    'base': (0.7, 0.7, 0.7, 1.0),
    'pedestal': (0.25, 0.25, 0.27, 1.0),
    'gripper': (0.55, 0.57, 0.6, 1.0),
    'cup': (0.1, 0.1, 0.1, 1.0),
}


@dataclass(frozen=True)
class Shape:
    """One primitive of the robot in its link's frame [m], [rad].

    kind 'box' (size: full L W H), 'cylinder' (radius, length along its z) or 'sphere'
    (radius,); `xyz`/`rpy` its URDF origin; `collision` False for drawing-only geometry.
    `name` is the MJCF geom's, with `_end0`/`_end1` for the spheres that close a capsule.
    """

    link: str
    name: str
    kind: str
    size: tuple[float, ...]
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    material: str
    collision: bool = True


@dataclass(frozen=True)
class Inertial:
    """A link's mass [kg], centre of mass `xyz` [m] and principal axes `rpy` [rad] in the link
    frame, and its principal moments `diag` [kg m^2]."""

    link: str
    mass: float
    xyz: tuple[float, float, float]
    rpy: tuple[float, float, float]
    diag: tuple[float, float, float]


@dataclass(frozen=True)
class ToolGeometry:
    """The VGP20 as sim/models/vgp20.xml builds it [m], [kg]: body L x W x flange-to-cup-face,
    cups of `cup_radius` and `cup_height` (bellows below the body) at `cup_xy`, and the tool
    inertial (CoM `com_z` from the flange, principal moments `inertia` [kg m^2])."""

    mass: float = 2.55
    body: tuple[float, float, float] = (0.264, 0.184, 0.092)
    cup_xy: tuple[tuple[float, float], ...] = ()
    cup_radius: float = 0.020
    cup_height: float = 0.010
    com_z: float = 0.038  # the reference model's tool inertial (docs/cell.md §3.1)
    inertia: tuple[float, float, float] = (0.0081, 0.0158, 0.0221)


@dataclass(frozen=True)
class RobotBody:
    """What urdf adds to the kinematics: the pedestal's height [m], the shapes and inertials."""

    pedestal_height: float
    shapes: tuple[Shape, ...]
    inertials: tuple[Inertial, ...]


def _body_frames(dh: dict[str, float]) -> dict[str, np.ndarray]:
    """Pose (4, 4) of each MJCF body (Menagerie layout) in the URDF link of the same name."""
    Rua = np.array([[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    wrist_2_y = dh['d4'] - _UPPER_ARM_Y - _FOREARM_Y
    frames = {
        'base_link': (np.eye(3), (0.0, 0.0, 0.0)),
        'shoulder_link': (_rpy((0.0, 0.0, math.pi)), (0.0, 0.0, 0.0)),
        'upper_arm_link': (Rua, (0.0, 0.0, _UPPER_ARM_Y)),
        'forearm_link': (Rua, (0.0, 0.0, _UPPER_ARM_Y + _FOREARM_Y)),
        'wrist_1_link': (_rpy(_RX90), (0.0, 0.0, -wrist_2_y)),
        'wrist_2_link': (np.eye(3), (0.0, 0.0, -dh['d5'])),
        'wrist_3_link': (_rpy(_RX90), (0.0, 0.0, -dh['d6'])),
        'gripper': (np.eye(3), (0.0, 0.0, 0.0)),
    }
    out = {}
    for link, (R, t) in frames.items():
        T = np.eye(4)
        T[:3, :3] = R
        T[:3, 3] = t
        out[link] = T
    return out


def _pose(xyz: Sequence[float], rpy: Sequence[float] = (0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = _rpy(rpy)
    T[:3, 3] = xyz
    return T


def _to_rpy(R: np.ndarray) -> tuple[float, float, float]:
    """URDF rpy [rad] of a rotation (3, 3), the inverse of _rpy."""
    pitch = math.asin(max(-1.0, min(1.0, -float(R[2, 0]))))
    if abs(math.cos(pitch)) > 1e-9:
        roll = math.atan2(float(R[2, 1]), float(R[2, 2]))
        yaw = math.atan2(float(R[1, 0]), float(R[0, 0]))
    else:  # gimbal lock: put the whole turn in yaw
        roll = 0.0
        yaw = math.atan2(-float(R[0, 1]), float(R[1, 1]))
    return (roll, pitch, yaw)


def _origin(T: np.ndarray) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    x, y, z = (float(v) for v in T[:3, 3])
    return (x, y, z), _to_rpy(T[:3, :3])


def robot_geometry(
    dh: dict[str, float],
    pedestal: tuple[float, float],
    tool: ToolGeometry,
) -> tuple[Shape, ...]:
    """Every primitive of the robot in its URDF link: the MJCF geoms of sim/models/ur10e.xml
    (capsules as a cylinder and two spheres) and vgp20.xml, and the pedestal of `pedestal`
    (radius, height) [m]."""
    B = _body_frames(dh)
    # (link, MJCF geom name, capsule radius, half-length, pos and rpy in the MJCF body)
    capsules = (
        ('shoulder_link', 'shoulder_col', 0.078, 0.08, (0, 0, 0), (0, 0, 0)),
        ('upper_arm_link', 'upper_arm_col0', 0.078, 0.08, (0, 0, 0), _RX90),
        ('upper_arm_link', 'upper_arm_col1', 0.06, 0.3, (0, 0, 0.3), (0, 0, 0)),
        ('forearm_link', 'forearm_col0', 0.058, 0.065, (0, 0, 0), _RX90),
        ('forearm_link', 'forearm_col1', 0.043, 0.28, (0, 0, 0.29), (0, 0, 0)),
        ('wrist_1_link', 'wrist_1_col', 0.05, 0.07, (0, 0.06, 0), _RX90),
        ('wrist_2_link', 'wrist_2_col0', 0.046, 0.065, (0, 0, 0.01), (0, 0, 0)),
        ('wrist_2_link', 'wrist_2_col1', 0.046, 0.043, (0, 0.02, dh['d5']), _RX90),
    )
    out: list[Shape] = []
    radius, height = pedestal
    out.append(
        Shape(
            'pedestal',
            'pedestal',
            'cylinder',
            (radius, height),
            (0, 0, height / 2),
            (0, 0, 0),
            'pedestal',
        )
    )
    out.append(
        Shape(
            'base_link',
            'base_cover',
            'cylinder',
            (0.075, 0.04),
            (0, 0, 0.02),
            (0, 0, 0),
            'base',
            collision=False,
        )
    )
    for link, name, r, half, pos, rpy in capsules:
        T = B[link] @ _pose(pos, rpy)
        out.append(Shape(link, name, 'cylinder', (r, 2 * half), *_origin(T), 'arm'))
        for k, s in enumerate((-half, half)):
            end = T @ _pose((0.0, 0.0, s))
            out.append(Shape(link, f'{name}_end{k}', 'sphere', (r,), *_origin(end), 'arm'))
    # The flange plate: a cylinder (r 0.046, half-length 0.02) 20 mm inside the flange face.
    T = B['wrist_3_link'] @ _pose((0, dh['d6'] - 0.02, 0), _RX90)
    out.append(Shape('wrist_3_link', 'wrist_3_col', 'cylinder', (0.046, 0.04), *_origin(T), 'arm'))
    L, W, H = tool.body
    body_h = H - tool.cup_height
    out.append(
        Shape(
            'gripper',
            'gripper_body',
            'box',
            (L, W, body_h),
            (0, 0, body_h / 2),
            (0, 0, 0),
            'gripper',
        )
    )
    for k, (x, y) in enumerate(tool.cup_xy):
        out.append(
            Shape(
                'gripper',
                f'cup_{k}',
                'cylinder',
                (tool.cup_radius, tool.cup_height),
                (x, y, H - tool.cup_height / 2),
                (0, 0, 0),
                'cup',
            )
        )
    return tuple(out)


def robot_inertials(
    dh: dict[str, float], link_masses: Sequence[float], tool: ToolGeometry
) -> tuple[Inertial, ...]:
    """The inertials of the six moving links (UR's published masses at the MJCF's centres of
    mass, Menagerie's tensors scaled by mass, as sim/robot.py builds them) and of the gripper."""
    B = _body_frames(dh)
    out = []
    for k, link in enumerate(LINKS[1:]):
        tensor, m_ref = _MENAGERIE_INERTIA[k]
        mass = float(link_masses[k])
        # wrist 3's principal axes are turned 90 deg about its body's z (MJCF iquat 1 0 0 1)
        spin = (0.0, 0.0, math.pi / 2) if link == 'wrist_3_link' else (0.0, 0.0, 0.0)
        xyz, rpy = _origin(B[link] @ _pose(_COM[k], spin))
        diag = tuple(float(v) / m_ref * mass for v in tensor)
        out.append(Inertial(link, mass, xyz, rpy, (diag[0], diag[1], diag[2])))
    out.append(
        Inertial('gripper', tool.mass, (0.0, 0.0, tool.com_z), (0.0, 0.0, 0.0), tool.inertia)
    )
    return tuple(out)


def robot_body(
    dh: dict[str, float],
    pedestal: tuple[float, float],
    link_masses: Sequence[float],
    tool: ToolGeometry,
) -> RobotBody:
    """The pedestal's height, robot_geometry and robot_inertials together, for urdf."""
    return RobotBody(
        pedestal[1], robot_geometry(dh, pedestal, tool), robot_inertials(dh, link_masses, tool)
    )


def robot_description(robot: RobotConfig, gripper: GripperConfig) -> str:
    """The published /robot_description: urdf with the body, from configs/cell.yaml `robot` and
    `gripper` (cups row-major from -y, -x, as sim/gripper.py cup_positions lays them)."""
    c = gripper.cups
    xs = (np.arange(c.columns) - (c.columns - 1) / 2) * c.pitch_x
    ys = (np.arange(c.rows) - (c.rows - 1) / 2) * c.pitch_y
    tool = ToolGeometry(
        mass=gripper.mass_kg,
        body=(float(gripper.body[0]), float(gripper.body[1]), float(gripper.tcp_offset)),
        cup_xy=tuple((float(x), float(y)) for y in ys for x in xs),
        cup_radius=c.radius,
    )
    dh = {k: float(getattr(robot.dh, k)) for k in ('d1', 'a2', 'a3', 'd4', 'd5', 'd6')}
    body = robot_body(
        dh, (robot.pedestal.radius, robot.pedestal.height), robot.link_masses_kg, tool
    )
    return urdf(
        dh,
        robot.joint_lower,
        robot.joint_upper,
        [math.radians(v) for v in robot.joint_speed_limits_deg_s],
        robot.torque_limits_nm,
        gripper.tcp_offset,
        body,
    )


def _f(v: Sequence[float]) -> str:
    """Numbers as URDF text: 9 decimals, no -0 nor round-off specks."""
    return ' '.join(f'{round(float(x), 9) + 0.0:.9g}' for x in v)


def _link_body(link: str, body: RobotBody) -> str:
    """The <inertial>, <visual> and <collision> elements of `link`."""
    out = []
    for i in body.inertials:
        if i.link == link:
            ixx, iyy, izz = i.diag
            out.append(
                f'\n    <inertial><origin xyz="{_f(i.xyz)}" rpy="{_f(i.rpy)}"/>'
                f'<mass value="{i.mass:.9g}"/><inertia ixx="{ixx:.9g}" ixy="0" ixz="0" '
                f'iyy="{iyy:.9g}" iyz="0" izz="{izz:.9g}"/></inertial>'
            )
    for s in body.shapes:
        if s.link != link:
            continue
        if s.kind == 'box':
            geom = f'<box size="{_f(s.size)}"/>'
        elif s.kind == 'cylinder':
            geom = f'<cylinder radius="{s.size[0]:.9g}" length="{s.size[1]:.9g}"/>'
        else:
            geom = f'<sphere radius="{s.size[0]:.9g}"/>'
        origin = f'<origin xyz="{_f(s.xyz)}" rpy="{_f(s.rpy)}"/>'
        out.append(
            f'\n    <visual name="{s.name}">{origin}<geometry>{geom}</geometry>'
            f'<material name="{s.material}"/></visual>'
        )
        if s.collision:
            out.append(
                f'\n    <collision name="{s.name}">{origin}<geometry>{geom}</geometry></collision>'
            )
    return ''.join(out)
