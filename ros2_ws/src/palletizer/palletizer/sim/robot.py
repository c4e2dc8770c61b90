"""UR10e arm as MJCF: official DH kinematics, UR link masses, capsule collision geometry."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    'ARM_JOINTS',
    'ArmParams',
    'arm_actuators_xml',
    'arm_body_xml',
    'arm_defaults_xml',
    'robot_model_xml',
    'T_world_dhbase',
]

ARM_JOINTS: tuple[str, ...] = (
    'shoulder_pan_joint',
    'shoulder_lift_joint',
    'elbow_joint',
    'wrist_1_joint',
    'wrist_2_joint',
    'wrist_3_joint',
)


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


def _f(v: float | tuple[float, ...] | list[float]) -> str:
    if isinstance(v, (tuple, list)):
        return ' '.join(_f(x) for x in v)
    return f'{float(v):.10g}'


def arm_defaults_xml() -> str:
    """Default classes of the arm: `visual` (no contacts) and `collision` (primitives).

    Arm collision geoms use contype 2 / conaffinity 0: they touch furniture (conaffinity 2 set in
    the scene's `solid` class) but never cartons (contype/conaffinity 1) nor each other.
    """
    return """
    <default class="arm">
      <joint armature="0.1" damping="0" frictionloss="0"/>
      <default class="visual">
        <geom contype="0" conaffinity="0" group="2" density="0"/>
      </default>
      <default class="collision">
        <!-- friction 0.8: reference arm friction (docs/cell.md §3.9) -->
        <geom type="capsule" contype="2" conaffinity="0" group="3" density="0"
              friction="0.8 0.01 0.001" rgba="0.3 0.5 0.8 0.4"/>
      </default>
    </default>"""


def arm_body_xml(tool_xml: str, params: ArmParams = ArmParams()) -> str:
    """The pedestal and arm body tree with `tool_xml` (the gripper body) mounted at the flange.

    Frames follow the Menagerie UR10e layout with the official DH lengths, so the flange frame
    equals UR's `tool0`. Inertials: UR link masses with Menagerie centre-of-mass positions and
    inertia tensors scaled by the mass ratio (UR publishes masses and CoMs, not tensors).
    """
    p = params
    m = p.link_masses
    # Menagerie inertia (per kg) so that tensors scale with UR's masses.
    shoulder_I = np.array([0.0314743, 0.0314743, 0.0218756]) / 7.778 * m[0]
    upper_I = np.array([0.421754, 0.421754, 0.0363656]) / 12.93 * m[1]
    fore_I = np.array([0.11107, 0.11107, 0.0108844]) / 3.87 * m[2]
    wrist_I = np.array([0.0055125, 0.00510825, 0.00510825]) / 1.96
    w3_I = np.array([0.000526462, 0.000526462, 0.000568125]) / 0.202 * m[5]
    lim = p.torque_limits
    rng = list(zip(p.joint_lower, p.joint_upper, strict=True))
    ped_h = p.pedestal_height
    return f"""
    <body name="robot_base" pos="{_f(p.base_pos)}" quat="{_f(p.base_quat)}" childclass="arm">
      <!-- pedestal: part of the static base so the shoulder may sit on it (docs/cell.md §3.1) -->
      <geom name="pedestal" class="collision" type="cylinder"
            size="{_f(p.pedestal_radius)} {_f(ped_h / 2)}" pos="0 0 {_f(-ped_h / 2)}"
            contype="3" conaffinity="3" group="0" rgba="0.25 0.25 0.27 1"/>
      <geom class="visual" type="cylinder" size="0.075 0.02" pos="0 0 0.02"
            rgba="0.7 0.7 0.7 1"/>
      <body name="shoulder_link" pos="0 0 {_f(p.d1)}">
        <inertial pos="0 0 0" mass="{_f(m[0])}" diaginertia="{_f(shoulder_I.tolist())}"/>
        <joint name="{ARM_JOINTS[0]}" axis="0 0 1" range="{_f(rng[0])}"
               actuatorfrcrange="{_f((-lim[0], lim[0]))}"/>
        <!-- capsule radii / half-lengths: mujoco-notes "UR10e" collision table; each sits on
             its joint housing (along the joint axis) or centred on the link shaft, following
             the Menagerie UR10e collision layout. Inertial positions: Menagerie UR10e. -->
        <geom name="shoulder_col" class="collision" size="0.078 0.08" pos="0 0 0"/>
        <body name="upper_arm_link" pos="0 {_f(p.upper_arm_y)} 0" quat="1 0 1 0">
          <inertial pos="0 0 0.306" mass="{_f(m[1])}" diaginertia="{_f(upper_I.tolist())}"/>
          <joint name="{ARM_JOINTS[1]}" axis="0 1 0" range="{_f(rng[1])}"
                 actuatorfrcrange="{_f((-lim[1], lim[1]))}"/>
          <geom name="upper_arm_col0" class="collision" size="0.078 0.08" quat="1 1 0 0"/>
          <geom name="upper_arm_col1" class="collision" size="0.06 0.3" pos="0 0 0.3"/>
          <body name="forearm_link" pos="0 {_f(p.forearm_y)} {_f(-p.a2)}">
            <inertial pos="0 0 0.286" mass="{_f(m[2])}" diaginertia="{_f(fore_I.tolist())}"/>
            <joint name="{ARM_JOINTS[2]}" axis="0 1 0" range="{_f(rng[2])}"
                   actuatorfrcrange="{_f((-lim[2], lim[2]))}"/>
            <geom name="forearm_col0" class="collision" size="0.058 0.065" quat="1 1 0 0"/>
            <geom name="forearm_col1" class="collision" size="0.043 0.28" pos="0 0 0.29"/>
            <body name="wrist_1_link" pos="0 0 {_f(-p.a3)}" quat="1 0 1 0">
              <inertial pos="0 0.127 0" mass="{_f(m[3])}"
                        diaginertia="{_f((wrist_I * m[3]).tolist())}"/>
              <joint name="{ARM_JOINTS[3]}" axis="0 1 0" range="{_f(rng[3])}"
                     actuatorfrcrange="{_f((-lim[3], lim[3]))}"/>
              <geom name="wrist_1_col" class="collision" size="0.05 0.07" pos="0 0.06 0"
                    quat="1 1 0 0"/>
              <body name="wrist_2_link" pos="0 {_f(p.wrist_2_y)} 0">
                <inertial pos="0 0 0.1" mass="{_f(m[4])}"
                          diaginertia="{_f((wrist_I * m[4]).tolist())}"/>
                <joint name="{ARM_JOINTS[4]}" axis="0 0 1" range="{_f(rng[4])}"
                       actuatorfrcrange="{_f((-lim[4], lim[4]))}"/>
                <geom name="wrist_2_col0" class="collision" size="0.046 0.065" pos="0 0 0.01"/>
                <geom name="wrist_2_col1" class="collision" size="0.046 0.043"
                      pos="0 0.02 {_f(p.d5)}" quat="1 1 0 0"/>
                <body name="wrist_3_link" pos="0 0 {_f(p.d5)}">
                  <inertial pos="0 0.0771 0" quat="1 0 0 1" mass="{_f(m[5])}"
                            diaginertia="{_f(w3_I.tolist())}"/>
                  <joint name="{ARM_JOINTS[5]}" axis="0 1 0" range="{_f(rng[5])}"
                         actuatorfrcrange="{_f((-lim[5], lim[5]))}"/>
                  <geom name="wrist_3_col" class="collision" type="cylinder" size="0.046 0.02"
                        pos="0 {_f(p.d6 - 0.02)} 0" quat="1 1 0 0"/>
                  <!-- flange = UR tool0: z out of the flange (Menagerie attachment frame) -->
                  <frame pos="0 {_f(p.d6)} 0" quat="1 -1 0 0">
{tool_xml}
                  </frame>
                </body>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>"""


def arm_actuators_xml(params: ArmParams = ArmParams()) -> str:
    """Torque motors, one per joint, saturating at the UR10e torque limits [N m]."""
    lines = []
    for name, lim in zip(ARM_JOINTS, params.torque_limits, strict=True):
        lines.append(
            f'    <motor name="{name.removesuffix("_joint")}_motor" joint="{name}" gear="1" '
            f'ctrlrange="{_f(-lim)} {_f(lim)}" forcerange="{_f(-lim)} {_f(lim)}"/>'
        )
    return '\n'.join(lines)


def robot_model_xml(tool_xml: str, params: ArmParams = ArmParams(), *, sensors: str = '') -> str:
    """A standalone model of the arm and tool only (inverse dynamics, FK checks)."""
    from palletizer.sim.gripper import gripper_defaults_xml

    return f"""<mujoco model="ur10e_vgp20">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="0.002" integrator="implicitfast" cone="elliptic"/>
  <default>{arm_defaults_xml()}{gripper_defaults_xml()}
  </default>
  <worldbody>{arm_body_xml(tool_xml, params)}
  </worldbody>
  <actuator>
{arm_actuators_xml(params)}
  </actuator>
  <sensor>{sensors}
  </sensor>
  <keyframe>
    <key name="home" qpos="{_f(params.home)}"/>
  </keyframe>
</mujoco>"""
