"""The UR10e model: official kinematics, UR masses and limits, named frames."""

from __future__ import annotations

import mujoco
import numpy as np
import ur_analytic_ik
from palletizer.sim.robot import ARM_JOINTS, ArmParams, T_world_dhbase, robot_model


def _model() -> mujoco.MjModel:
    return robot_model()


def test_flange_matches_ur_analytic_ik_forward_kinematics():
    m = _model()
    d = mujoco.MjData(m)
    site = m.site('flange').id
    T0 = T_world_dhbase()
    rng = np.random.default_rng(7)
    for q in rng.uniform(-np.pi, np.pi, (200, 6)):
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        T = T0 @ np.asarray(ur_analytic_ik.ur10e.forward_kinematics(*q))
        np.testing.assert_allclose(d.site_xpos[site], T[:3, 3], atol=1e-9)
        np.testing.assert_allclose(d.site_xmat[site].reshape(3, 3), T[:3, :3], atol=1e-9)


def test_tcp_sits_92_mm_along_the_flange_axis():
    m = _model()
    d = mujoco.MjData(m)
    d.qpos[:] = ArmParams().home
    mujoco.mj_kinematics(m, d)
    f, t = m.site('flange').id, m.site('tcp').id
    z = d.site_xmat[f].reshape(3, 3)[:, 2]
    np.testing.assert_allclose(d.site_xpos[t] - d.site_xpos[f], 0.092 * z, atol=1e-12)


def test_home_pose_points_the_tool_straight_down():
    m = _model()
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, m.key('home').id)
    mujoco.mj_kinematics(m, d)
    z = d.site_xmat[m.site('tcp').id].reshape(3, 3)[:, 2]
    np.testing.assert_allclose(z, [0.0, 0.0, -1.0], atol=1e-4)


def test_link_masses_are_the_ur_published_ones():
    m = _model()
    masses = [m.body_mass[m.jnt_bodyid[m.joint(j).id]] for j in ARM_JOINTS]
    np.testing.assert_allclose(masses, [7.369, 13.051, 3.989, 2.1, 1.98, 0.615])
    np.testing.assert_allclose(m.body_mass[m.body('gripper').id], 2.55)


def test_motors_saturate_at_the_ur10e_torque_limits():
    m = _model()
    limits = np.array([330, 330, 150, 56, 56, 56], dtype=float)
    np.testing.assert_allclose(m.actuator_forcerange[:, 1], limits)
    np.testing.assert_allclose(m.actuator_ctrlrange[:, 1], limits)
    np.testing.assert_allclose(m.jnt_actfrcrange[:, 1], limits)
    assert np.all(m.dof_damping == 0.0)


def test_dh_base_is_parallel_to_world_at_the_pedestal_top():
    T = T_world_dhbase()
    np.testing.assert_allclose(T[:3, :3], np.eye(3), atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], [0.60, -0.72, 0.48])
