"""In-motion weighing: the rigid-body model, the tool's motion from FK, the fit and its rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.core.contracts import Observation
from palletizer.core.gauge import GaugeParams, R_sensor_package, WeighError, weigh, weigh_held
from palletizer.core.gauge_motion import (
    VGP20,
    InMotionWeigher,
    MotionGaugeParams,
    RigidLoad,
    SensorMotion,
    box_inertia,
    empty_tool_bias,
    regressor,
    rigid_wrench,
    sensor_motion,
    still_motion,
    weigher_for_grasp,
)
from palletizer.core.motion import UR10eKinematics, tool_down

SIGMA = np.array([1.667] * 3 + [0.0667] * 3)  # configs/cell.yaml wrench noise per sample
DIMS = (0.42, 0.30, 0.18)  # std_m (configs/catalogue.yaml)


def _load(mass: float, com: tuple[float, float, float], dims=DIMS) -> RigidLoad:
    I_c = box_inertia(mass, dims)
    return RigidLoad(mass, com, tuple(tuple(float(v) for v in r) for r in I_c))


def _random_motion(n: int, seed: int, accel: float = 3.0) -> SensorMotion:
    rng = np.random.default_rng(seed)
    down = np.tile([0.0, 0.0, 9.81], (n, 1))
    return SensorMotion(
        np.arange(n) * 0.002,
        rng.normal(0.0, accel, (n, 3)) - down,
        rng.normal(0.0, 1.0, (n, 3)),
        rng.normal(0.0, 3.0, (n, 3)),
        down,
    )


def _plumb_still(n: int) -> SensorMotion:
    return still_motion(_random_motion(n, 1))


def test_the_regressor_is_newton_euler_for_any_rigid_load_and_motion():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(3, 3))
    load = RigidLoad(4.2, (0.03, -0.02, 0.30), tuple(tuple(r) for r in A @ A.T * 0.05))
    m = _random_motion(40, 2)
    W = rigid_wrench(load, m)
    np.testing.assert_allclose(np.einsum('nij,j->ni', regressor(m), load.params()), W, atol=1e-12)
    # The sign of the static gauge: a still payload, tool plumb (flange z down), reads
    # F = -m g_s, so F_z = -m g, and tau = c x F.
    w = rigid_wrench(load, _plumb_still(1))[0]
    np.testing.assert_allclose(w[:3], [0.0, 0.0, -4.2 * 9.81])
    np.testing.assert_allclose(w[3:], np.cross(load.com, w[:3]))


def test_a_still_sample_weighs_as_the_static_gauge_does():
    load = _load(3.5, (0.02, -0.015, 0.21))
    m = _plumb_still(200)
    w = rigid_wrench(load, m)
    R = R_sensor_package(0.0, 0.0)
    static = weigh(
        np.zeros(6),
        w[0],
        package_id='std_s-01',
        type_name='std_s',
        dims=DIMS,
        centre_sensor=(0.0, 0.0, 0.21),
        R_sensor_package=R,
    )
    g = InMotionWeigher((0.0, 0.0, 0.21), DIMS, R, tool=None)
    g.add(w, m)
    moving = g.reading('std_s-01', 'std_s')
    assert moving.spec.mass_kg == pytest.approx(static.spec.mass_kg, rel=1e-9)
    # Within a micrometre: the weak CoM prior pulls a little (the static gauge has none).
    np.testing.assert_allclose(moving.com_sensor[:2], static.com_sensor[:2], atol=1e-6)


def test_the_sensor_motion_is_the_derivative_of_forward_kinematics():
    kin = UR10eKinematics()
    q0 = kin.ik_nearest(
        tool_down(0.2, -0.6, 0.9, 0.3), np.array([-1.57, -1.57, 1.57, -1.57, -1.57, 0])
    )
    assert q0 is not None
    amp = np.array([0.3, 0.2, -0.25, 0.2, 0.15, 0.4])
    w = np.array([2.0, 2.5, 3.0, 1.5, 2.2, 3.5])  # [rad/s]

    def q_at(t):
        return q0 + amp * np.sin(np.outer(t, w))

    t = np.linspace(0.1, 1.0, 7)
    m = sensor_motion(
        kin, t, q_at(t), amp * w * np.cos(np.outer(t, w)), -amp * w**2 * np.sin(np.outer(t, w))
    )
    # Independent: central differences of the flange pose in time, 0.1 ms apart.
    h = 1e-4
    T = [kin.fk(q_at(t + d)) @ np.linalg.inv(kin.T_flange_tcp) for d in (-h, 0.0, h)]
    acc = (T[2][:, :3, 3] - 2 * T[1][:, :3, 3] + T[0][:, :3, 3]) / h**2
    R = T[1][:, :3, :3]
    Rd = (T[2][:, :3, :3] - T[0][:, :3, :3]) / (2 * h)
    W = Rd @ np.transpose(R, (0, 2, 1))
    omega_w = np.stack([W[:, 2, 1], W[:, 0, 2], W[:, 1, 0]], 1)
    f_s = np.einsum('nji,nj->ni', R, acc - [0.0, 0.0, -9.81])
    np.testing.assert_allclose(m.f, f_s, atol=2e-3)
    np.testing.assert_allclose(m.omega, np.einsum('nji,nj->ni', R, omega_w), atol=1e-6)
    # alpha: the derivative of omega (world), by central differences of the computed omega.
    mp = sensor_motion(
        kin,
        t + h,
        q_at(t + h),
        amp * w * np.cos(np.outer(t + h, w)),
        -amp * w**2 * np.sin(np.outer(t + h, w)),
    )
    mm = sensor_motion(
        kin,
        t - h,
        q_at(t - h),
        amp * w * np.cos(np.outer(t - h, w)),
        -amp * w**2 * np.sin(np.outer(t - h, w)),
    )
    Rp, Rm = T[2][:, :3, :3], T[0][:, :3, :3]
    wp = np.einsum('nij,nj->ni', Rp, mp.omega)
    wm = np.einsum('nij,nj->ni', Rm, mm.omega)
    np.testing.assert_allclose(m.alpha, np.einsum('nji,nj->ni', R, (wp - wm) / (2 * h)), atol=1e-4)
    # At rest with the tool down, the flange z points down: f = (0, 0, -g).
    still = sensor_motion(kin, [0.0], q0[None], np.zeros((1, 6)), np.zeros((1, 6)))
    np.testing.assert_allclose(still.f[0], [0.0, 0.0, -9.81], atol=1e-6)
    np.testing.assert_allclose(still.gravity[0], [0.0, 0.0, 9.81], atol=1e-9)


def test_noise_free_moving_samples_give_the_load_exactly_even_its_height():
    R = R_sensor_package(0.0, 0.0)
    truth = _load(6.2, (0.01, -0.04, 0.23), dims=(0.48, 0.34, 0.22))
    m = _random_motion(300, 5)
    w = rigid_wrench(truth, m) + rigid_wrench(VGP20, m) - rigid_wrench(VGP20, _plumb_still(1))
    g = InMotionWeigher((0.0, 0.0, 0.2035), (0.48, 0.34, 0.22), R)
    g.add(w, m)
    e = g.estimate()
    # Exact up to the inertia's fixed point after its five passes (a few ppm here, where the
    # random motion turns the tool hard).
    assert e.mass == pytest.approx(6.2, rel=1e-5)
    # The vertical CoM too: the horizontal accelerations excite it (25 mm off the prior).
    np.testing.assert_allclose(e.com_sensor, truth.com, atol=1e-5)
    assert e.converged and e.residual_scale < 1e-3


def test_the_rule_waits_for_its_samples_and_for_its_sigmas():
    R = R_sensor_package(0.0, 0.0)
    rng = np.random.default_rng(7)
    m = _random_motion(2000, 8, accel=1.0)
    w = rigid_wrench(_load(2.0, (0.02, 0.0, 0.19)), m) + rng.normal(0, 1, (2000, 6)) * SIGMA
    g = InMotionWeigher((0.0, 0.0, 0.19), DIMS, R, tool=None)
    g.add(w[:50], m[:50])
    e = g.estimate()
    assert not e.converged and '50 of 100 samples' in e.why
    # A 2 kg carton: sigma(m) = 1.667 N / (9.81 m/s^2 sqrt(n)) is 0.4 % of it at n ~ 470.
    g.add(w[50:300], m[50:300])
    e = g.estimate()
    assert not e.converged and 'sigma(m)' in e.why
    g.add(w[300:], m[300:])
    e = g.estimate()
    assert e.converged, e.why
    assert e.sigma_mass == pytest.approx(1.667 / 9.81 / math.sqrt(2000), rel=0.1)


def test_the_fit_covariance_is_honest_over_seeds():
    """95 % of the estimates lie within 1.96 sigma of the truth (within the binomial scatter
    of 50 tries: at least 42)."""
    R = R_sensor_package(0.0, 0.0)
    truth = _load(3.5, (0.02, 0.02, 0.19))
    m = _random_motion(300, 9)
    clean = rigid_wrench(truth, m)
    inside_m = inside_c = 0
    for seed in range(1, 51):
        rng = np.random.default_rng(seed)
        g = InMotionWeigher((0.0, 0.0, 0.19), DIMS, R, tool=None)
        g.add(clean + rng.normal(0, 1, clean.shape) * SIGMA, m)
        e = g.estimate()
        inside_m += abs(e.mass - 3.5) <= 1.96 * e.sigma_mass
        inside_c += abs(e.com_sensor[0] - 0.02) <= 1.96 * e.sigma_com[0]
    assert inside_m >= 42 and inside_c >= 42


def test_the_bias_is_fitted_when_asked_and_the_motion_excites_it():
    R = R_sensor_package(0.0, 0.0)
    truth = _load(4.2, (0.05, 0.0, 0.19))
    m = _random_motion(400, 11)
    bias = np.array([0.8, -0.5, 1.2, 0.05, -0.03, 0.02])
    w = rigid_wrench(truth, m) + bias
    trusting = InMotionWeigher((0.0, 0.0, 0.19), DIMS, R, tool=None)
    fitting = InMotionWeigher(
        (0.0, 0.0, 0.19), DIMS, R, tool=None, params=MotionGaugeParams(fit_bias=True)
    )
    for g in (trusting, fitting):
        g.add(w, m)
    assert abs(trusting.estimate().mass - 4.2) > 0.01  # the bias leaks into a trusting fit
    e = fitting.estimate()
    assert e.mass == pytest.approx(4.2, rel=1e-5)
    np.testing.assert_allclose(e.bias, bias, atol=1e-4)


def test_empty_cups_are_no_payload():
    m = _random_motion(200, 12)
    g = InMotionWeigher((0.0, 0.0, 0.19), DIMS, R_sensor_package(0.0, 0.0), tool=None)
    g.add(np.random.default_rng(1).normal(0, 1, (200, 6)) * SIGMA, m)
    with pytest.raises(WeighError) as err:
        g.estimate()
    assert err.value.verdict == 'no_payload'


def test_the_bias_is_tracked_on_the_empty_tool_and_its_sigma_delays_the_hand_over():
    rng = np.random.default_rng(13)
    bias = np.array([0.9, -0.6, 0.7, 0.04, -0.05, 0.01])
    empty = _random_motion(1000, 14)
    tool_change = rigid_wrench(VGP20, empty) - rigid_wrench(VGP20, _plumb_still(1))[0]
    b, sb = empty_tool_bias(tool_change + bias + rng.normal(0, 1, (1000, 6)) * SIGMA, empty)
    np.testing.assert_allclose(sb, SIGMA / math.sqrt(1000), rtol=0.1)
    assert np.all(np.abs(b - bias) <= 4 * sb)
    # Weighing with it: the bias leaves the mass; its sigma joins the fit's.
    truth = _load(2.0, (0.02, 0.0, 0.19))
    m = _random_motion(3000, 15, accel=1.0)
    w = (
        rigid_wrench(truth, m)
        + rigid_wrench(VGP20, m)
        - rigid_wrench(VGP20, _plumb_still(1))[0]
        + bias
        + rng.normal(0, 1, (3000, 6)) * SIGMA
    )
    R = R_sensor_package(0.0, 0.0)
    kw = {'prior_com': (0.0, 0.0, 0.19), 'dims': DIMS, 'R_sensor_package': R}
    trusting = InMotionWeigher(**kw)
    tracked = InMotionWeigher(**kw, bias=tuple(b))
    unsure = InMotionWeigher(**kw, bias=tuple(b), bias_sigma=tuple(10 * sb))
    for g in (trusting, tracked, unsure):
        g.add(w, m)
    assert abs(trusting.estimate().mass - 2.0) > 0.02  # 0.7 N along gravity: 3.6 %
    e = tracked.estimate()
    assert abs(e.mass - 2.0) < 0.01 and e.converged
    assert not unsure.estimate().converged and 'sigma(m)' in unsure.estimate().why


def test_a_weigher_for_a_grasp_reads_still_samples_as_weigh_held_does():
    kin = UR10eKinematics()
    yaw = 0.4
    q = kin.ik_nearest(
        tool_down(0.1, -0.7, 0.8, yaw), np.array([-1.57, -1.57, 1.57, -1.57, -1.57, 0])
    )
    assert q is not None
    obs = Observation('std_m-03', (0.103, -0.698, 0.71), yaw + 0.01, DIMS, 0.9)
    g = weigher_for_grasp(obs, q, kin=kin, tcp_offset=0.092, cup_gap=0.0015)
    truth = _load(4.2, (0.03, -0.01, 0.19))
    still = sensor_motion(
        kin, np.arange(200) * 0.002, np.tile(q, (200, 1)), np.zeros((200, 6)), np.zeros((200, 6))
    )
    g.add(rigid_wrench(truth, still), still)
    moving = g.reading(obs.package_id, 'std_m')
    static = weigh_held(
        np.zeros(6),
        rigid_wrench(truth, still)[0],
        obs,
        q,
        kin=kin,
        tcp_offset=0.092,
        cup_gap=0.0015,
        params=GaugeParams(),
    )
    assert moving.spec.mass_kg == pytest.approx(static.spec.mass_kg, rel=1e-9)
    np.testing.assert_allclose(
        moving.spec.cog_offset_m[:2], static.spec.cog_offset_m[:2], atol=1e-6
    )


def test_the_reading_reports_the_vertical_at_the_centre_as_a_still_weigh_does():
    # Whatever the fit puts on the vertical (here a CoM well off the centre along z, and a
    # motion that excites it), the reported offset keeps the geometric centre's height, as
    # core.gauge.weigh reports it; the sensor-frame CoM keeps the fit's.
    kin = UR10eKinematics()
    q0 = kin.ik_nearest(
        tool_down(0.2, -0.6, 0.9, 0.3), np.array([-1.57, -1.57, 1.57, -1.57, -1.57, 0])
    )
    assert q0 is not None
    amp = np.array([0.3, 0.2, -0.25, 0.2, 0.15, 0.4])
    w = np.array([2.0, 2.5, 3.0, 1.5, 2.2, 3.5])
    t = np.arange(400) * 0.002
    q = q0 + amp * np.sin(np.outer(t, w))
    qd = amp * w * np.cos(np.outer(t, w))
    qdd = -amp * w**2 * np.sin(np.outer(t, w))
    motion = sensor_motion(kin, t, q, qd, qdd)
    truth = _load(4.2, (0.03, -0.01, 0.29))  # 80 mm above the 0.21 m centre
    R = R_sensor_package(0.0, 0.0)
    g = InMotionWeigher((0.0, 0.0, 0.21), DIMS, R, tool=None)
    g.add(rigid_wrench(truth, motion), motion)
    r = g.reading('std_m-03', 'std_m')
    assert r.com_sensor[2] > 0.25  # the fit sees the high CoM ...
    assert r.spec.cog_offset_m[2] == 0.0  # ... the reading keeps the centre's height
    planar = (np.asarray(R).T @ np.subtract(truth.com, (0.0, 0.0, 0.21)))[:2]
    np.testing.assert_allclose(r.spec.cog_offset_m[:2], planar, atol=1e-3)
