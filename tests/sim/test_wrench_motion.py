"""Synthetic wrist readings along a trajectory: the sensor's own error model, the tool's model."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace as NS

import mujoco
import numpy as np
import palletizer.sim
import pytest
from palletizer.core.gauge_motion import VGP20, RigidLoad, SensorMotion, rigid_wrench, still_motion
from palletizer.sim.wrench import WrenchNoise, WrenchSensor
from palletizer.sim.wrench_motion import synthetic_readings

NOISE = WrenchNoise(
    force_sigma=5.0 / 3,
    torque_sigma=0.2 / 3,
    offset_force=5.5,
    offset_torque=0.5,
    drift_force=1.0,
    drift_torque=0.1,
)


def _motion(n: int) -> SensorMotion:
    rng = np.random.default_rng(4)
    down = np.tile([0.0, 0.0, 9.81], (n, 1))
    a = rng.normal(0.0, 2.0, (n, 3))
    return SensorMotion(
        np.arange(n) * 0.002,
        a - down,
        rng.normal(0, 0.5, (n, 3)),
        rng.normal(0, 2.0, (n, 3)),
        down,
    )


def _stub_sensor(noise: WrenchNoise, seed: int) -> tuple[WrenchSensor, NS]:
    """A WrenchSensor over a stand-in for MuJoCo's model and data: sensordata is set by hand."""
    model = NS(
        sensor=lambda name: NS(adr=[0 if name == 'ft_force' else 3]), opt=NS(timestep=0.002)
    )
    data = NS(sensordata=np.zeros(6), time=0.0)
    return WrenchSensor(model, data, noise, seed=seed), data


def test_noise_free_readings_equal_the_cell_sensors_after_its_zero():
    """Bias, offset and drift as WrenchSensor adds them; the zero removes them at its instant."""
    quiet = WrenchNoise(
        offset_force=5.5,
        offset_torque=0.5,
        drift_force=1.0,
        drift_torque=0.1,
        force_bias=(0.3, 0.0, -0.2),
    )
    load = RigidLoad(4.2, (0.05, 0.0, 0.19), ((0.05, 0, 0), (0, 0.07, 0), (0, 0, 0.09)))
    m = _motion(30)
    rest = still_motion(m[:1])
    sensor, data = _stub_sensor(quiet, 7)
    data.time, data.sensordata = 400.0, rigid_wrench(VGP20, rest)[0]
    sensor.zero()
    truth = rigid_wrench(VGP20, m) + rigid_wrench(load, m)
    expect = []
    for i in range(len(m)):
        data.time, data.sensordata = 405.0 + m.t[i], truth[i]
        r = sensor.read()
        expect.append(np.concatenate([r.force, r.torque]))
    got = synthetic_readings(
        load, m, noise=quiet, seed=7, t_start=405.0, t_zero=400.0, zero_motion=rest
    )
    np.testing.assert_allclose(got, np.array(expect), atol=1e-12)


def test_the_white_noise_has_the_models_sigmas():
    m = _motion(4000)
    w = synthetic_readings(
        None, m, noise=NOISE, seed=3, t_start=10.0, t_zero=10.0, zero_motion=m[:1]
    )
    resid = w - (rigid_wrench(VGP20, m) - rigid_wrench(VGP20, m[:1])[0])
    np.testing.assert_allclose(resid.std(axis=0), [5 / 3] * 3 + [0.2 / 3] * 3, rtol=0.05)


def test_the_weighers_tool_is_the_simulated_gripper():
    xml = Path(palletizer.sim.__file__).parent / 'models' / 'vgp20.xml'
    inertial = ET.parse(xml).getroot().find(".//body[@name='gripper']/inertial")
    assert inertial is not None
    assert float(inertial.get('mass')) == VGP20.mass
    np.testing.assert_array_equal([float(v) for v in inertial.get('pos').split()], VGP20.com)
    np.testing.assert_array_equal(
        [float(v) for v in inertial.get('diaginertia').split()], np.diag(VGP20.inertia)
    )


# A load on a wrist that slides and turns freely, with the cell's F/T sensor pair on its site.
_SWING_XML = """
<mujoco>
  <worldbody>
    <body name="wrist">
      <inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
      <joint type="slide" axis="1 0 0"/><joint type="slide" axis="0 1 0"/>
      <joint type="slide" axis="0 0 1"/><joint type="hinge" axis="0 0 1"/>
      <joint type="hinge" axis="1 0 0"/>
      <body name="load" quat="0 1 0 0">
        <inertial pos="0.03 -0.02 0.25" mass="4.2"
                  fullinertia="0.05 0.07 0.09 0.004 -0.003 0.002"/>
        <site name="flange"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <force name="ft_force" site="flange"/>
    <torque name="ft_torque" site="flange"/>
  </sensor>
</mujoco>"""


@pytest.mark.sim
def test_the_rigid_body_wrench_is_what_mujocos_sensor_reads_in_motion():
    """The sign and the inertial terms of the weigher's model against MuJoCo's force and torque
    sensors (the cell's, sim/wrench.py) on a load that accelerates and turns."""
    model = mujoco.MjModel.from_xml_string(_SWING_XML)
    data = mujoco.MjData(model)
    I_c = ((0.05, 0.004, -0.003), (0.004, 0.07, 0.002), (-0.003, 0.002, 0.09))
    load = RigidLoad(4.2, (0.03, -0.02, 0.25), I_c)
    rng = np.random.default_rng(5)
    for _ in range(5):
        data.qpos[:] = rng.normal(0.0, 0.5, 5)
        data.qvel[:] = rng.normal(0.0, 1.0, 5)
        data.qacc[:] = rng.normal(0.0, 3.0, 5)
        mujoco.mj_inverse(model, data)
        mujoco.mj_rnePostConstraint(model, data)
        R = data.site_xmat[0].reshape(3, 3)
        v, a = np.zeros(6), np.zeros(6)  # (angular, linear), world axes
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_SITE, 0, v, 0)
        # MuJoCo's accelerations carry -g (its recursion starts the world at -g): a - g.
        mujoco.mj_objectAcceleration(model, data, mujoco.mjtObj.mjOBJ_SITE, 0, a, 0)
        motion = SensorMotion(
            np.zeros(1),
            (R.T @ a[3:])[None],
            (R.T @ v[:3])[None],
            (R.T @ a[:3])[None],
            (R.T @ np.array([0.0, 0.0, -9.81]))[None],
        )
        np.testing.assert_allclose(rigid_wrench(load, motion)[0], data.sensordata, atol=1e-9)
