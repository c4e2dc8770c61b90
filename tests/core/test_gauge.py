"""The wrist gauge recovers mass and planar CoM from synthetic wrenches, and says when it can't."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.gauge import GaugeParams, WeighError, average_wrench, weigh

G = 9.81


def _wrench(mass, com, g_sensor):
    f = mass * np.asarray(g_sensor)
    return np.concatenate([f, np.cross(com, f)])


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


@pytest.mark.parametrize('yaw', [0.0, 0.7, np.pi / 2])
def test_plumb_reading_recovers_mass_and_planar_cog_in_the_package_frame(yaw):
    g_sensor = np.array([0.0, 0.0, G])  # tool plumb, sensor z along gravity
    centre = np.array([0.01, -0.02, 0.092 + 0.09])  # carton centre below the cups
    R = _rz(yaw)
    offset_true = np.array([0.05, -0.03, -0.02])
    com = centre + R @ offset_true
    tool = _wrench(2.55, [0.0, 0.0, 0.038], g_sensor)
    loaded = tool + _wrench(4.2, com, g_sensor)
    r = weigh(
        tool,
        loaded,
        package_id='std_m-00',
        type_name='std_m',
        dims=(0.42, 0.3, 0.18),
        centre_sensor=centre,
        R_sensor_package=R,
    )
    assert abs(r.spec.mass_kg - 4.2) < 1e-9
    np.testing.assert_allclose(r.spec.cog_offset_m[:2], offset_true[:2], atol=1e-9)
    # The vertical component is blind on a plumb reading: it stays at the prior.
    assert r.spec.cog_offset_m[2] == pytest.approx(0.0, abs=1e-9)


def test_noisy_samples_average_within_a_gram_and_half_a_millimetre():
    rng = np.random.default_rng(7)
    g_sensor = np.array([0.0, 0.0, G])
    centre = np.array([0.0, 0.0, 0.2])
    com = centre + np.array([0.03, 0.01, 0.0])
    clean = _wrench(5.0, com, g_sensor)
    samples = clean + rng.normal(0, [0.05] * 3 + [0.002] * 3, size=(2000, 6))
    mean = average_wrench(samples)
    r = weigh(
        np.zeros(6),
        mean,
        package_id='p',
        type_name='t',
        dims=(0.4, 0.3, 0.2),
        centre_sensor=centre,
        R_sensor_package=np.eye(3),
    )
    assert abs(r.spec.mass_kg - 5.0) < 0.001
    np.testing.assert_allclose(r.spec.cog_offset_m[:2], [0.03, 0.01], atol=0.0005)


def test_empty_cups_are_no_payload():
    with pytest.raises(WeighError, match='cups hold nothing') as e:
        weigh(
            np.zeros(6),
            [0, 0, 0.1, 0, 0, 0],
            package_id='p',
            type_name='t',
            dims=(0.3, 0.2, 0.1),
            centre_sensor=(0, 0, 0.2),
            R_sensor_package=np.eye(3),
        )
    assert e.value.verdict == 'no_payload'


def test_a_carton_slipping_while_sampled_is_refused():
    samples = np.tile(_wrench(3.0, [0, 0, 0.2], [0, 0, G]), (30, 1))
    samples[15:, 2] *= 0.8  # the load dropped by a fifth halfway through
    with pytest.raises(WeighError, match='moved while weighing') as e:
        average_wrench(samples, GaugeParams(noise_sigma_n=0.1))
    assert e.value.verdict == 'slipped'


def test_the_carton_centre_follows_the_cup_block_the_flange_stood_over():
    """The executor may take another cup block than the rule's (a pick beside a wall): where
    the flange stood over the lid says which, a few mm of aim error included."""
    from palletizer.core.gauge import carton_centre_in_sensor, lid_in_tool
    from palletizer.core.motion import plan_grasp, tool_down, tool_to_world_xy

    dims = (0.182, 0.167, 0.212)
    rule = plan_grasp(dims[0], dims[1]).offset
    lid = (-0.006, -1.165)
    for yaw in (1.56, -0.3):
        for off in (rule, (0.0747, -0.024), (0.0, 0.024)):
            d = tool_to_world_xy(off, yaw)
            T = tool_down(lid[0] - d[0] + 0.003, lid[1] - d[1] - 0.002, 0.9, yaw)
            got = lid_in_tool(lid, T)
            assert math.dist(got, off) < 0.005
            centre = carton_centre_in_sensor(dims, 0.092, 0.0015, got)
            np.testing.assert_allclose(centre[:2], off, atol=1e-9)
            assert centre[2] == pytest.approx(0.092 + 0.0015 + 0.106)
    # Without a measurement the rule's block stands.
    np.testing.assert_allclose(carton_centre_in_sensor(dims, 0.092, 0.0015)[:2], rule)
