"""The robot's MJCF files (sim/models/ur10e.xml, vgp20.xml): each loads alone, collision and
visual settings live in named default classes, the files hold the config defaults, config values
reach the compiled model, and the cell built from the files is the reference model."""

from __future__ import annotations

import dataclasses
import hashlib
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest
import ur_analytic_ik
from palletizer.core.config import load_config
from palletizer.sim.gripper import VGP20_XML, GripperParams, cup_positions, gripper_spec
from palletizer.sim.robot import (
    ARM_JOINTS,
    UR10E_XML,
    ArmParams,
    T_world_dhbase,
    arm_spec,
    robot_model,
)
from palletizer.sim.scene import SceneOptions, build_scene_spec, compile_scene

CELL = load_config().cell

# Input arrays of a compiled model: what the MJCF says, after MuJoCo's frame composition and
# quaternion normalisation (no derived quantities such as invweight or bounding boxes).
_FIELDS = (
    'body_parentid',
    'body_pos',
    'body_quat',
    'body_ipos',
    'body_iquat',
    'body_mass',
    'body_inertia',
    'jnt_type',
    'jnt_qposadr',
    'jnt_axis',
    'jnt_pos',
    'jnt_range',
    'jnt_actfrcrange',
    'dof_armature',
    'dof_damping',
    'dof_frictionloss',
    'geom_type',
    'geom_size',
    'geom_pos',
    'geom_quat',
    'geom_contype',
    'geom_conaffinity',
    'geom_group',
    'geom_friction',
    'geom_margin',
    'geom_gap',
    'geom_rgba',
    'site_pos',
    'site_quat',
    'site_size',
    'actuator_trnid',
    'actuator_gear',
    'actuator_ctrlrange',
    'actuator_forcerange',
)
# Per object kind: the field prefix and the model's count attribute.
_KINDS = (
    ('body', mujoco.mjtObj.mjOBJ_BODY),
    ('jnt', mujoco.mjtObj.mjOBJ_JOINT),
    ('geom', mujoco.mjtObj.mjOBJ_GEOM),
    ('site', mujoco.mjtObj.mjOBJ_SITE),
    ('actuator', mujoco.mjtObj.mjOBJ_ACTUATOR),
)


def _robot_fingerprint(m: mujoco.MjModel) -> str:
    """SHA-256 of the robot's part of `m` (the subtree of `robot_base`, its joints, geoms, sites
    and motors): names in order, then the input arrays, element by element."""
    base = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, 'robot_base')
    bodies = [b for b in range(m.nbody) if b == base or base in _ancestors(m, b)]
    rows = {
        'body': bodies,
        'jnt': [j for j in range(m.njnt) if m.jnt_bodyid[j] in bodies],
        'geom': [g for g in range(m.ngeom) if m.geom_bodyid[g] in bodies],
        'site': [s for s in range(m.nsite) if m.site_bodyid[s] in bodies],
    }
    rows['actuator'] = [a for a in range(m.nu) if m.actuator_trnid[a, 0] in rows['jnt']]
    h = hashlib.sha256()
    for prefix, obj in _KINDS:
        names = [mujoco.mj_id2name(m, obj, i) or '' for i in rows[prefix]]
        h.update(repr((prefix, rows[prefix], names)).encode())
    for field in _FIELDS:
        prefix = 'jnt' if field.startswith('dof_') else field.split('_')[0]
        a = np.ascontiguousarray(getattr(m, field)[rows[prefix]])
        h.update(f'{field} {a.dtype} {a.shape}'.encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _ancestors(m: mujoco.MjModel, b: int) -> set[int]:
    out: set[int] = set()
    while b:
        b = int(m.body_parentid[b])
        out.add(b)
    return out


# Recorded from the cell's former f-string robot (commit 7b3eb62), MuJoCo 4.0.0, as
# a11677d77117d39833cfb476e53d96c147c1bfd40990dd6e28bbde559d4cb5e9. Re-recorded when the label
# camera added a world site, numbered before the robot's: the new model hashed with its robot
# site indices less 1 gives that value again, so only the numbering moved.
REFERENCE_SCENE_ROBOT = '9074f056664835da72a4ac1fd3a66e4ed9dd0a82faee88079a1a945da011921e'
REFERENCE_ID_MODEL = 'e085fd163b4d2b9d637656eeb99be8b19f10615c212acebd37ee99bfe3b5954e'


def _arrays(m: mujoco.MjModel) -> dict[str, object]:
    out: dict[str, object] = {'names': m.names}
    for name in dir(m):
        v = getattr(m, name, None)
        if isinstance(v, np.ndarray):
            out[name] = v.tobytes()
    return out


def _same(a: mujoco.MjModel, b: mujoco.MjModel) -> list[str]:
    """Names of the arrays that differ between two compiled models (none: the same model)."""
    x, y = _arrays(a), _arrays(b)
    return sorted(k for k in x.keys() | y.keys() if x.get(k) != y.get(k))


def test_each_model_file_loads_alone_in_mujoco():
    arm = mujoco.MjModel.from_xml_path(str(UR10E_XML))
    assert [arm.joint(i).name for i in range(arm.njnt)] == list(ARM_JOINTS)
    assert [arm.actuator(i).name for i in range(arm.nu)] == [
        j.removesuffix('_joint') + '_motor' for j in ARM_JOINTS
    ]
    assert arm.key('home').id == 0
    assert arm.nsite == 0  # the tool frame is an empty frame until a gripper is attached
    tool = mujoco.MjModel.from_xml_path(str(VGP20_XML))
    assert tool.nbody == 2 and tool.njnt == 0
    assert {tool.site(i).name for i in range(tool.nsite)} == {'flange', 'tcp'}
    assert [tool.geom(g).name for g in range(1, tool.ngeom)] == [f'cup_{k}' for k in range(16)]


@pytest.mark.parametrize('path', [UR10E_XML, VGP20_XML], ids=lambda p: p.name)
def test_collision_settings_live_in_named_default_classes(path):
    root = ET.parse(path).getroot()
    geoms = root.find('worldbody').iter('geom')
    for geom in geoms:
        assert not {'contype', 'conaffinity', 'group'} & set(geom.attrib), geom.attrib
        assert geom.get('class'), geom.attrib
    classes = {d.get('class') for d in root.iter('default')}
    assert 'collision' in classes
    assert root.find('option') is None  # physics options belong to the scene


def test_arm_and_gripper_defaults_are_the_config():
    robot, p = CELL.robot, ArmParams()
    assert p.base_pos == tuple(robot.base_pos)
    assert p.base_quat == tuple(robot.base_quat)
    assert (p.pedestal_radius, p.pedestal_height) == (
        robot.pedestal.radius,
        robot.pedestal.height,
    )
    assert {k: getattr(p, k) for k in dataclasses.asdict(robot.dh)} == dataclasses.asdict(robot.dh)
    assert p.link_masses == tuple(robot.link_masses_kg)
    assert p.torque_limits == tuple(float(v) for v in robot.torque_limits_nm)
    assert p.speed_limits == tuple(np.deg2rad(robot.joint_speed_limits_deg_s).tolist())
    assert (p.joint_lower, p.joint_upper) == (
        tuple(robot.joint_lower),
        tuple(robot.joint_upper),
    )
    assert p.home == tuple(robot.home)
    assert tuple(robot.joint_names) == ARM_JOINTS
    grip, g = CELL.gripper, GripperParams()
    cups = grip.cups
    assert g.mass == grip.mass_kg
    assert g.body == tuple(grip.body)
    assert g.tcp_offset == grip.tcp_offset
    assert (g.columns, g.rows, g.pitch_x, g.pitch_y, g.cup_radius) == (
        cups.columns,
        cups.rows,
        cups.pitch_x,
        cups.pitch_y,
        cups.radius,
    )
    assert (g.force_per_cup, g.derating, g.safety_factor) == (
        grip.force_per_cup_n,
        grip.derating,
        grip.safety_factor,
    )
    assert (g.cup_gap, g.seal_band) == (grip.cup_gap, grip.seal_band)


def test_model_files_hold_the_config_defaults():
    # Setting the default parameters through MjSpec changes nothing, bit for bit.
    raw_arm = mujoco.MjSpec.from_file(str(UR10E_XML)).compile()
    assert _same(raw_arm, arm_spec(ArmParams()).compile()) == []
    raw_tool = mujoco.MjSpec.from_file(str(VGP20_XML)).compile()
    assert _same(raw_tool, gripper_spec(GripperParams()).compile()) == []


def test_config_values_reach_the_compiled_cell():
    arm = ArmParams(
        base_pos=(0.55, -0.70, 0.50),
        pedestal_height=0.50,
        link_masses=(7.0, 13.0, 4.0, 2.0, 2.0, 0.6),
        torque_limits=(300.0, 300.0, 140.0, 50.0, 50.0, 50.0),
        joint_lower=(-6.0, -6.0, -3.0, -6.0, -6.0, -6.0),
        joint_upper=(6.0, 6.0, 3.0, 6.0, 6.0, 6.0),
        armature=0.2,
    )
    gripper = GripperParams(mass=3.0, columns=3, rows=4, body=(0.25, 0.18, 0.10), seal_band=0.003)
    m = compile_scene(build_scene_spec(options=SceneOptions(arm=arm, gripper=gripper)))
    np.testing.assert_array_equal(m.body('robot_base').pos, arm.base_pos)
    assert m.geom('pedestal').size[1] == 0.25
    bodies = [m.jnt_bodyid[m.joint(j).id] for j in ARM_JOINTS]
    np.testing.assert_array_equal(m.body_mass[bodies], arm.link_masses)
    np.testing.assert_array_equal(m.actuator_ctrlrange[:, 1], arm.torque_limits)
    np.testing.assert_array_equal(m.actuator_forcerange[:, 0], np.negative(arm.torque_limits))
    np.testing.assert_array_equal(m.jnt_actfrcrange[:6, 1], arm.torque_limits)
    np.testing.assert_array_equal(m.jnt_range[:6, 0], arm.joint_lower)
    np.testing.assert_array_equal(m.dof_armature[:6], 0.2)
    assert m.body('gripper').mass[0] == 3.0
    cups = [g for g in range(m.ngeom) if m.geom(g).name.startswith('cup_')]
    assert len(cups) == 12
    np.testing.assert_allclose(m.geom_pos[cups, :2], cup_positions(gripper), atol=1e-6)
    np.testing.assert_array_equal(m.geom_gap[cups], 0.003)
    assert m.site('tcp').pos[2] == 0.10
    # The moved base carries the flange (UR tool0) to where the DH chain from it puts it.
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key('home').id)
    mujoco.mj_kinematics(m, d)
    T = T_world_dhbase(arm) @ np.asarray(ur_analytic_ik.ur10e.forward_kinematics(*arm.home))
    np.testing.assert_allclose(d.site('flange').xpos, T[:3, 3], atol=1e-9)
    np.testing.assert_allclose(d.site('flange').xmat.reshape(3, 3), T[:3, :3], atol=1e-9)


def test_the_cell_built_from_the_files_is_the_reference_model():
    # The cheap form of the identity check run when the robot moved from Python f-strings to
    # these files: the robot's names and input arrays, in the cell and in the servo's model.
    m = compile_scene(build_scene_spec())
    assert m.body(1).name == 'robot_base' and m.body(8).name == 'gripper'
    assert [m.joint(j).name for j in range(6)] == list(ARM_JOINTS)
    assert m.nu == 6 and m.key('home').id == 0
    np.testing.assert_array_equal(m.key_qpos[0, :6], ArmParams().home)
    assert _robot_fingerprint(m) == REFERENCE_SCENE_ROBOT
    assert _robot_fingerprint(robot_model()) == REFERENCE_ID_MODEL


def test_the_checks_capsules_cover_the_simulated_arms_forearm_and_wrist_geoms():
    """The motion checks and the camera self-filter model the forearm and wrists as capsules
    (RobotBody.shapes; the kernel's arm_box_hits uses the same): each collision geom of the
    simulated arm past the elbow must lie inside them, or a move the checks pass can strike
    furniture (level 15 seed 1: wrist 2's geom ran 25 mm behind its capsule, into the pick
    table's corner)."""
    from palletizer.core.heightmap_fusion import RobotBody

    model = arm_spec().compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    base = model.body('robot_base').id
    body = RobotBody(
        base_pos=tuple(data.xpos[base]), base_quat=tuple(data.xquat[base]), margin=0.0
    )
    names = ['forearm_col1', 'wrist_1_col', 'wrist_2_col0', 'wrist_2_col1', 'wrist_3_col']
    rng = np.random.default_rng(3)
    for _ in range(20):
        q = rng.uniform(-np.pi, np.pi, 6)
        data.qpos[:6] = q
        mujoco.mj_forward(model, data)
        caps, _ = body.shapes(q)
        for name in names:
            g = model.geom(name).id
            r, h = model.geom_size[g][0], model.geom_size[g][1]
            axis = data.geom_xmat[g].reshape(3, 3)[:, 2]
            for f in np.linspace(-1.0, 1.0, 9):
                p = data.geom_xpos[g] + f * h * axis
                room = max(
                    rk
                    - np.linalg.norm(
                        p - (a + np.clip((p - a) @ (b - a) / ((b - a) @ (b - a)), 0, 1) * (b - a))
                    )
                    for a, b, rk in caps[4:]
                )
                assert room >= r - 1e-3, (name, f, q.round(3).tolist(), room, r)
