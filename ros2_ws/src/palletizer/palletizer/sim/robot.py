"""The UR10e arm: its parameters (configs/cell.yaml `robot`) and its MJCF, models/ur10e.xml.

models/ur10e.xml is a standalone MJCF (official DH kinematics, UR link masses, capsule collision
geometry, Menagerie-style `visual`/`collision` default classes) that loads alone in MuJoCo. The
cell never uses its numbers blindly: `configure_arm` sets every value ArmParams owns from
ArmParams through MuJoCo's MjSpec API, so the config stays authoritative and the file holds the
config defaults (tests/sim/test_models.py keeps the two equal). `robot_spec` attaches the gripper
(models/vgp20.xml, sim/gripper.py) at the arm's `tool0` frame; the scene attaches the arm with an
MJCF `<attach>` and finishes it with `mount_robot` (sim/scene.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from palletizer.core.description import JOINTS, LINKS
from palletizer.core.errors import InvalidValue
from palletizer.sim.gripper import GripperParams, gripper_spec

__all__ = [
    'ARM_JOINTS',
    'ARM_MODEL',
    'ARM_PREFIX',
    'MODELS_DIR',
    'UR10E_XML',
    'ArmParams',
    'TOOL_FRAME',
    'arm_spec',
    'attach_gripper',
    'configure_arm',
    'mount_robot',
    'robot_model',
    'robot_spec',
    'T_world_dhbase',
]

MODELS_DIR = Path(__file__).resolve().parent / 'models'
UR10E_XML = MODELS_DIR / 'ur10e.xml'
# The scene's `<asset><model>` name of models/ur10e.xml and the name prefix of its `<attach>`.
ARM_MODEL = 'ur10e'
ARM_PREFIX = 'ur10e/'
# Name prefix the gripper is attached under before its names are restored (attach_gripper).
_TOOL_PREFIX = 'vgp20/'
# The arm's tool flange frame (UR tool0) in models/ur10e.xml, where the gripper goes.
TOOL_FRAME = 'tool0'

# The UR driver's joint names, in chain order (models/ur10e.xml names its joints so).
ARM_JOINTS: tuple[str, ...] = JOINTS


@dataclass(frozen=True)
class ArmParams:
    """UR10e parameters [m], [kg], [rad], [N m]; defaults from configs/cell.yaml `robot`."""

    base_pos: tuple[float, float, float] = (0.60, -0.72, 0.48)  # docs/cell.md §3.1
    base_quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, -1.0)  # 180 deg about Z
    pedestal_radius: float = 0.24
    pedestal_height: float = 0.48
    # Official UR10e DH lengths (mujoco-notes "UR10e").
    d1: float = 0.1807
    a2: float = -0.6127
    a3: float = -0.57155
    d4: float = 0.17415
    d5: float = 0.11985
    d6: float = 0.11655
    # UR published link masses: shoulder, upper arm, forearm, wrist 1-3 (mujoco-notes).
    link_masses: tuple[float, ...] = (7.369, 13.051, 3.989, 2.1, 1.98, 0.615)
    speed_limits: tuple[float, ...] = tuple(np.deg2rad((120, 120, 180, 180, 180, 180)).tolist())
    torque_limits: tuple[float, ...] = (330.0, 330.0, 150.0, 56.0, 56.0, 56.0)
    joint_lower: tuple[float, ...] = (-6.2832, -6.2832, -3.1416, -6.2832, -6.2832, -6.2832)
    joint_upper: tuple[float, ...] = (6.2832, 6.2832, 3.1416, 6.2832, 6.2832, 6.2832)
    # IK seed (docs/cell.md §3.1).
    home: tuple[float, ...] = (-1.5708, -1.5708, 1.5708, -1.5708, -1.5708, 0.0)
    # Rotor inertia reflected to each joint [kg m^2]: the reference cell's joint default
    # (docs/cell.md §3.1).
    armature: float = 0.1
    # Shoulder-to-elbow y offsets of the housings (Menagerie layout); only their sum with the
    # wrist-2 offset is kinematic, and that sum is fixed to d4 below.
    upper_arm_y: float = 0.176
    forearm_y: float = -0.137

    @property
    def wrist_2_y(self) -> float:
        """Wrist 2 offset [m] chosen so the three y offsets add up to exactly d4."""
        return self.d4 - self.upper_arm_y - self.forearm_y


def T_world_dhbase(params: ArmParams = ArmParams()) -> np.ndarray:
    """Pose (4, 4) of the DH base frame of ur_analytic_ik in the world.

    The MuJoCo base is turned 180 deg about Z from the DH base; the mount turns it a further
    180 deg, so the DH base ends up parallel to the world axes at `base_pos`.
    """
    w, x, y, z = params.base_quat
    R_world_base = _quat_to_mat((w, x, y, z))
    T = np.eye(4)
    T[:3, :3] = R_world_base @ np.diag([-1.0, -1.0, 1.0])
    T[:3, 3] = params.base_pos
    return T


def _quat_to_mat(q: tuple[float, float, float, float]) -> np.ndarray:
    w, x, y, z = np.asarray(q, dtype=float) / np.linalg.norm(q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _r(v: float) -> float:
    """`v` as the 10-significant-digit MJCF text the arm was written with: the cell's reference
    model (and its benchmark) was compiled from that text, so values derived from ArmParams go
    through it, bit for bit."""
    return float(f'{float(v):.10g}')


def _rs(v: tuple[float, ...] | list[float] | np.ndarray) -> list[float]:
    return [_r(x) for x in v]


# Menagerie UR10e inertia tensors [kg m^2] and the masses [kg] they belong to: the arm's tensors
# are these scaled by UR's published link masses (UR publishes masses and CoMs, not tensors).
_MENAGERIE_INERTIA: tuple[tuple[tuple[float, float, float], float], ...] = (
    ((0.0314743, 0.0314743, 0.0218756), 7.778),  # shoulder
    ((0.421754, 0.421754, 0.0363656), 12.93),  # upper arm
    ((0.11107, 0.11107, 0.0108844), 3.87),  # forearm
    ((0.0055125, 0.00510825, 0.00510825), 1.96),  # wrist 1
    ((0.0055125, 0.00510825, 0.00510825), 1.96),  # wrist 2
    ((0.000526462, 0.000526462, 0.000568125), 0.202),  # wrist 3
)
_LINKS = LINKS[1:]  # the moving links, shoulder to wrist 3 (after the base)


def _link_inertia(k: int, mass: float) -> list[float]:
    """Diagonal inertia [kg m^2] of link `k` with `mass` [kg]: Menagerie's tensor scaled."""
    tensor, m_ref = _MENAGERIE_INERTIA[k]
    return _rs((np.array(tensor) / m_ref * mass).tolist())


def configure_arm(spec: mujoco.MjSpec, params: ArmParams = ArmParams()) -> None:
    """Set every value ArmParams owns on the UR10e elements of `spec` (names as in ur10e.xml).

    Base pose, pedestal, DH offsets, link masses and inertias, joint limits and armature, motor
    torque limits. Everything else (geometry, inertial positions, classes) comes from the file.
    """
    p = params
    base = spec.body('robot_base')
    base.pos = _rs(p.base_pos)
    base.quat = _rs(p.base_quat)
    ped = spec.geom('pedestal')
    h = p.pedestal_height
    ped.size = [_r(p.pedestal_radius), _r(h / 2), ped.size[2]]
    ped.pos = [0.0, 0.0, _r(-h / 2)]
    # Body frames: the Menagerie layout with the official DH lengths (flange = UR tool0).
    spec.body('shoulder_link').pos = [0.0, 0.0, _r(p.d1)]
    spec.body('upper_arm_link').pos = [0.0, _r(p.upper_arm_y), 0.0]
    spec.body('forearm_link').pos = [0.0, _r(p.forearm_y), _r(-p.a2)]
    spec.body('wrist_1_link').pos = [0.0, 0.0, _r(-p.a3)]
    spec.body('wrist_2_link').pos = [0.0, _r(p.wrist_2_y), 0.0]
    spec.body('wrist_3_link').pos = [0.0, 0.0, _r(p.d5)]
    spec.geom('wrist_2_col1').pos = [0.0, 0.02, _r(p.d5)]
    spec.geom('wrist_3_col').pos = [0.0, _r(p.d6 - 0.02), 0.0]
    spec.frame(TOOL_FRAME).pos = [0.0, _r(p.d6), 0.0]
    for k, (link, joint) in enumerate(zip(_LINKS, ARM_JOINTS, strict=True)):
        body = spec.body(link)
        body.mass = _r(p.link_masses[k])
        body.inertia = _link_inertia(k, p.link_masses[k])
        lim = p.torque_limits[k]
        j = spec.joint(joint)
        j.range = [_r(p.joint_lower[k]), _r(p.joint_upper[k])]
        j.actfrcrange = [_r(-lim), _r(lim)]
        j.armature = _r(p.armature)
        motor = spec.actuator(_motor(joint))
        motor.ctrlrange = [_r(-lim), _r(lim)]
        motor.forcerange = [_r(-lim), _r(lim)]


def _motor(joint: str) -> str:
    return joint.removesuffix('_joint') + '_motor'


def arm_spec(params: ArmParams = ArmParams()) -> mujoco.MjSpec:
    """models/ur10e.xml with the values of `params`, its `home` key at params.home; no tool."""
    spec = mujoco.MjSpec.from_file(str(UR10E_XML))
    configure_arm(spec, params)
    spec.key('home').qpos = _rs(params.home)
    return spec


def _strip_prefix(spec: mujoco.MjSpec, prefix: str) -> None:
    """Drop `prefix` from the names of the elements an attachment brought (and from the joint
    names their actuators and sensors refer to)."""
    groups = (
        spec.bodies,
        spec.joints,
        spec.geoms,
        spec.sites,
        spec.frames,
        spec.cameras,
        spec.lights,
        spec.actuators,
        spec.sensors,
        spec.keys,
    )
    for group in groups:
        for el in group:
            if el.name.startswith(prefix):
                el.name = el.name.removeprefix(prefix)
    for act in spec.actuators:
        if act.target.startswith(prefix):
            act.target = act.target.removeprefix(prefix)
    for sens in spec.sensors:
        if sens.objname.startswith(prefix):
            sens.objname = sens.objname.removeprefix(prefix)
        if sens.refname.startswith(prefix):
            sens.refname = sens.refname.removeprefix(prefix)


def attach_gripper(spec: mujoco.MjSpec, gripper: GripperParams | None = None) -> None:
    """Attach the VGP20 (models/vgp20.xml with `gripper`'s values) at the arm's tool0 frame.

    MuJoCo warns on an attachment with an empty name prefix, so the gripper goes in under a
    prefix that is taken off again: the cell refers to `gripper`, `tcp`, `cup_3`...
    """
    tool = gripper_spec(gripper or GripperParams())
    spec.frame(TOOL_FRAME).attach_body(tool.body('gripper'), _TOOL_PREFIX, '')
    _strip_prefix(spec, _TOOL_PREFIX)


def robot_spec(
    arm: ArmParams = ArmParams(), gripper: GripperParams | None = None
) -> mujoco.MjSpec:
    """A standalone model of the arm and tool only (inverse dynamics, FK checks); `gripper`
    defaults to GripperParams().

    The physics options are the cell's defaults (docs/cell.md §3.9); the model files carry none.
    """
    spec = arm_spec(arm)
    spec.modelname = 'ur10e_vgp20'
    spec.option.timestep = 0.002
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    spec.option.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    attach_gripper(spec, gripper)
    return spec


def robot_model(
    arm: ArmParams = ArmParams(), gripper: GripperParams | None = None
) -> mujoco.MjModel:
    """robot_spec compiled."""
    return robot_spec(arm, gripper).compile()


def mount_robot(
    spec: mujoco.MjSpec, arm: ArmParams = ArmParams(), gripper: GripperParams | None = None
) -> None:
    """Finish the robot a scene attached as `<attach model="ur10e" prefix="ur10e/">`.

    The MJCF attachment keeps the arm where the scene declares it: first in the world body, so
    its bodies, joints and qpos come first as the `home` key expects (an MjSpec attach would
    append it after the rest of the world). The prefix is there because MuJoCo warns on an
    empty one. Here the names lose the prefix, the arm's own `home` key goes (the scene has
    one), ArmParams set its values and the gripper is attached with GripperParams values.
    """
    key = spec.key(ARM_PREFIX + 'home')
    if key is None or spec.body(ARM_PREFIX + 'robot_base') is None:
        raise InvalidValue(f'no UR10e attached with prefix {ARM_PREFIX!r} (see ARM_MODEL)')
    spec.delete(key)
    _strip_prefix(spec, ARM_PREFIX)
    configure_arm(spec, arm)
    attach_gripper(spec, gripper)
