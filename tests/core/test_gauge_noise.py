"""The gauge at a UR10e's wrist noise: still readings pass the slip test, weighs meet the targets."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.contracts import PackageSpec
from palletizer.core.gauge import GaugeParams, WeighError, average_wrench, gauge_errors, weigh

G = 9.81
SIGMA = np.array([5.0 / 3] * 3 + [0.2 / 3] * 3)  # [N, N m] cell.yaml wrench, per sample
SAMPLES = 400  # perception.yaml gauge.samples
PARAMS = GaugeParams(noise_sigma_n=5.0 / 3)
TOOL = np.array([0.0, 0.0, -2.55 * G, 0.0, 0.0, 0.0])  # empty gripper, plumb [N, N m]


def _rz(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _loaded(mass, com):
    f = np.array([0.0, 0.0, -mass * G])
    return TOOL + np.concatenate([f, np.cross(com, f)])


def test_gauge_errors_are_signed_percent_and_planar_millimetres():
    truth = PackageSpec('p', 't', (0.4, 0.3, 0.2), 4.0, (0.03, -0.02, 0.01))
    measured = PackageSpec('p', 't', (0.4, 0.3, 0.2), 3.96, (0.033, -0.016, -0.05))
    mass_pct, com_mm = gauge_errors(measured, truth)
    assert mass_pct == pytest.approx(-1.0)
    assert com_mm == pytest.approx(5.0)  # the vertical component is blind and not counted


def test_still_readings_of_many_noisy_samples_are_not_taken_for_a_slip():
    # The range of single samples grows with their number (~6 sigma for 400): tested that way,
    # still readings were refused now and then (2 of these 300).
    rng = np.random.default_rng(11)
    clean = _loaded(3.0, [0.0, 0.0, 0.2])
    for _ in range(300):
        average_wrench(clean + rng.normal(0.0, SIGMA, (SAMPLES, 6)), PARAMS)


def test_a_slip_within_many_noisy_samples_is_refused():
    rng = np.random.default_rng(12)
    samples = _loaded(3.0, [0.0, 0.0, 0.2]) + rng.normal(0.0, SIGMA, (SAMPLES, 6))
    samples[SAMPLES // 2 :, 2] += 0.1 * 3.0 * G  # a tenth of the load let go halfway
    with pytest.raises(WeighError, match='moved while weighing'):
        average_wrench(samples, PARAMS)


def test_weighs_at_ur10e_noise_meet_one_percent_and_three_millimetres_at_p95():
    rng = np.random.default_rng(5)
    mass_err, com_err = [], []
    for _ in range(200):
        mass = rng.uniform(2.0, 8.5)
        yaw = rng.uniform(-np.pi, np.pi)
        centre = np.array([rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), 0.2])
        offset = np.array([rng.uniform(-0.06, 0.06), rng.uniform(-0.04, 0.04), 0.0])
        R = _rz(yaw)
        tare = average_wrench(TOOL + rng.normal(0.0, SIGMA, (SAMPLES, 6)), PARAMS)
        noisy = _loaded(mass, centre + R @ offset) + rng.normal(0.0, SIGMA, (SAMPLES, 6))
        r = weigh(
            tare,
            average_wrench(noisy, PARAMS),
            package_id='p',
            type_name='t',
            dims=(0.4, 0.3, 0.2),
            centre_sensor=centre,
            R_sensor_package=R,
            params=PARAMS,
        )
        m, c = gauge_errors(r.spec, PackageSpec('p', 't', (0.4, 0.3, 0.2), mass, offset))
        mass_err.append(abs(m))
        com_err.append(c)
    assert np.percentile(mass_err, 95) <= 1.0
    assert np.percentile(com_err, 95) <= 3.0
