"""Weighing on the lift: the streams put on one clock, the lift found, its start left out."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.contracts import Observation
from palletizer.core.errors import PalletizerError
from palletizer.core.gauge import WeighError
from palletizer.core.gauge_lift import (
    LiftHistory,
    LiftSamples,
    lift_start,
    sim_stamp,
    weigh_on_lift,
    weigh_topped_up,
)
from palletizer.core.gauge_motion import (
    VGP20,
    MotionGaugeParams,
    RigidLoad,
    box_inertia,
    rigid_wrench,
    sensor_motion,
    weigher_for_grasp,
)
from palletizer.core.motion import UR10eKinematics, tool_down

KIN = UR10eKinematics()
DIMS = (0.42, 0.30, 0.18)  # std_m (configs/catalogue.yaml)
TCP, GAP = 0.092, 0.0015  # configs/cell.yaml gripper
SIGMA = np.array([1.667] * 3 + [0.0667] * 3)  # configs/cell.yaml wrench noise per sample
SEAL = (0.15, -0.75, 0.40, 0.3)  # x, y, z [m], yaw [rad] of the tool at the seal
HOME = np.array([-1.57, -1.57, 1.57, -1.57, -1.57, 0.0])


def _ease(u: np.ndarray) -> np.ndarray:
    """Rest-to-rest minimum-jerk profile on [0, 1]."""
    u = np.clip(u, 0.0, 1.0)
    return u**3 * (10 - 15 * u + 6 * u**2)


LIFT_T0 = 0.5  # [s] the lift begins


def _tool_z(t: np.ndarray) -> np.ndarray:
    """The descent onto the lid (0.3 s), the tool still at the seal (0.2 s: the cups seal and
    the vacuum is awaited), a 0.35 m lift (0.5 s), at rest."""
    z0 = SEAL[2]
    down = z0 + 0.1 * (1 - _ease(t / 0.3))
    # While the vacuum pulls (the last 0.1 s before the lift) the arm creeps up 0.12 mm, as
    # the hardware profile's did (joint speeds ~0.002 rad/s): the seal stays the lowest point.
    creep = 0.12e-3 * np.clip((t - (LIFT_T0 - 0.1)) / 0.1, 0.0, 1.0)
    up = z0 + creep + 0.35 * _ease((t - LIFT_T0) / 0.5)
    return np.where(t < LIFT_T0, down + creep, up)


def _joints(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint angles, rates and accelerations along the move (IK per instant, differences)."""
    h = 1e-4
    q = []
    ref = HOME
    for ti in np.concatenate([t - h, t, t + h]):
        x, y, _, yaw = SEAL
        sol = KIN.ik_nearest(tool_down(x, y, float(_tool_z(np.array([ti]))[0]), yaw), ref)
        assert sol is not None
        q.append(sol)
        ref = sol
    qa = np.array(q).reshape(3, len(t), 6)
    return qa[1], (qa[2] - qa[0]) / (2 * h), (qa[2] - 2 * qa[1] + qa[0]) / h**2


def _carton(mass: float) -> RigidLoad:
    # The CoM 25 mm and -12 mm off the lid's centre below the cups, 10 mm above mid-height.
    com = (0.025, -0.012, TCP + GAP + DIMS[2] / 2 - 0.01)
    I_c = box_inertia(mass, DIMS)
    return RigidLoad(mass, com, tuple(tuple(float(v) for v in r) for r in I_c))


def _streams(mass: float, noise: float = 0.0, support_s: float = 0.01, seed: int = 1):
    """The wrench at 500 Hz and the joint states at 50 Hz of the move, as the zeroed sensor and
    the driver give them: the tool's own inertial wrench change since its zero, plus the
    carton's once it hangs on the cups. From the vacuum (0.1 s before the lift) the cups pull
    the carton against its support: the sensor reads a 20 N preload and half the weight, and
    during the first `support_s` of the lift the support still carries half its weight."""
    t = np.round(np.arange(0, 1.3, 0.002), 6)
    q, qd, qdd = _joints(t)
    motion = sensor_motion(KIN, t, q, qd, qdd)
    rest = sensor_motion(KIN, t[:1], q[:1], np.zeros((1, 6)), np.zeros((1, 6)))
    w = rigid_wrench(VGP20, motion) - rigid_wrench(VGP20, rest)
    vacuum = t >= LIFT_T0 - 0.1
    hanging = np.where(~vacuum, 0.0, np.where(t < LIFT_T0 + support_s, 0.5, 1.0))
    w = w + hanging[:, None] * rigid_wrench(_carton(mass), motion)
    w[:, 2] -= np.where(vacuum & (t < LIFT_T0), 20.0, 0.0)
    w = w + np.random.default_rng(seed).normal(0.0, 1.0, w.shape) * SIGMA * noise
    wrench = [(sim_stamp(ti), wi) for ti, wi in zip(t, w, strict=True)]
    joints = [(sim_stamp(t[i]), q[i], qd[i]) for i in range(0, len(t), 10)]
    return wrench, joints, float(sim_stamp(t[-1]))


def _obs() -> Observation:
    x, y, z, yaw = SEAL
    return Observation('std_m-00', (x, y, z - TCP - GAP - DIMS[2] / 2), yaw, DIMS, 0.95)


def _weigh(mass: float, skip_s: float = 0.02, **kw):
    wrench, joints, end = _streams(mass, **kw)
    samples = LiftSamples.from_streams(wrench, joints, end, 3.0)
    return weigh_on_lift(
        samples, np.zeros(6), _obs(), kin=KIN, tcp_offset=TCP, cup_gap=GAP, skip_s=skip_s
    )


def test_a_message_stamp_reads_back_as_sim_stamp_gives_it():
    for t in (0.0, 0.002, 1.234567891, 12.3456789014, 3599.998):
        ns = int(round(t * 1e9))
        sec, nanosec = ns // 1_000_000_000, ns % 1_000_000_000
        assert sim_stamp(t) == sec + nanosec * 1e-9  # what a node computes from the message
    assert sim_stamp(0.1 + 0.2) == sim_stamp(0.3)


def test_the_streams_meet_on_the_wrench_stamps_one_row_per_instant():
    q0, v = np.arange(6) * 0.1, np.full(6, 0.5)
    joints = [(t, q0 + v * t, v) for t in (0.0, 0.02, 0.04, 0.06)]
    # A sample before the joint states' span, one published twice, one after the window.
    wrench = [(t, np.full(6, t)) for t in (-0.01, 0.01, 0.03, 0.03, 0.05, 0.07)]
    wrench[3] = (0.03, np.full(6, 9.0))  # the later of the two at 0.03 s counts
    s = LiftSamples.from_streams(wrench, joints, until=0.06, span_s=0.1)
    np.testing.assert_allclose(s.t, [0.01, 0.03, 0.05])
    np.testing.assert_allclose(s.wrench[:, 0], [0.01, 9.0, 0.05])
    np.testing.assert_allclose(s.q, q0 + np.outer(s.t, v), atol=1e-15)  # linear: exact
    np.testing.assert_allclose(s.qd, np.tile(v, (3, 1)))
    # Too few joint states: no samples, not an error.
    assert len(LiftSamples.from_streams(wrench, joints[:1], 0.06, 0.1).t) == 0


def test_bad_samples_are_refused_naming_what_is_wrong():
    with pytest.raises(PalletizerError, match='3 stamps, 2 wrenches'):
        LiftSamples.of(np.arange(3), np.zeros((2, 6)), np.zeros((3, 6)), np.zeros((3, 6)))
    with pytest.raises(PalletizerError, match='increase strictly'):
        LiftSamples.of([0.0, 0.0], np.zeros((2, 6)), np.zeros((2, 6)), np.zeros((2, 6)))
    with pytest.raises(PalletizerError, match='skip_s'):
        _weigh(4.2, skip_s=-0.1)
    with pytest.raises(PalletizerError, match='span_s'):
        LiftHistory(0.0)


def test_the_lift_starts_where_the_tool_first_moves_after_the_seal():
    wrench, joints, end = _streams(4.2)
    s = LiftSamples.from_streams(wrench, joints, end, 3.0)
    # Not the seal (0.3 s, the lowest), nor the descent's last motion: the lift's first.
    assert LIFT_T0 < s.t[lift_start(s, KIN)] <= LIFT_T0 + 0.02


def test_a_previous_place_lower_than_the_seal_is_not_taken_for_the_lift():
    """A fast cycle brings the previous release into the samples, 0.2 m below this seal: the
    lift is still found after this seal, the lowest point of the last valley."""
    t = np.arange(0.0, 2.0, 0.002)
    z0 = SEAL[2]
    z = np.select(
        [t < 0.3, t < 0.8, t < 1.1, t < 1.3],
        [
            np.full_like(t, z0 - 0.2),  # the previous release
            z0 - 0.2 + 0.6 * _ease((t - 0.3) / 0.5),  # retract and move back
            z0 + 0.4 - 0.4 * _ease((t - 0.8) / 0.3),  # down onto this lid
            np.full_like(t, z0),  # the seal
        ],
        z0 + 0.35 * _ease((t - 1.3) / 0.5),  # the lift
    )
    q = [HOME]
    for zi in z:
        q.append(KIN.ik_nearest(tool_down(SEAL[0], SEAL[1], float(zi), SEAL[3]), q[-1]))
    q = np.array(q[1:])
    s = LiftSamples.of(t, np.zeros((len(t), 6)), q, np.gradient(q, t, axis=0))
    assert 1.3 < s.t[lift_start(s, KIN)] <= 1.32


def test_a_lift_weighs_the_carton_and_its_support_is_left_out():
    fit = _weigh(4.2)
    assert fit.weigher is not None, fit.why
    e = fit.weigher.estimate()
    assert e.mass == pytest.approx(4.2, rel=0.002)
    np.testing.assert_allclose(e.com_sensor[:2], [0.025, -0.012], atol=0.5e-3)  # sensor frame
    # Fitted from the seal, the vacuum's preload and the support's share count: it reads wrong.
    wrench, joints, end = _streams(4.2)
    s = LiftSamples.from_streams(wrench, joints, end, 3.0)
    seal = int(np.argmin(np.abs(s.t - (LIFT_T0 - 0.1))))
    early = weigher_for_grasp(_obs(), s.q[seal], kin=KIN, tcp_offset=TCP, cup_gap=GAP)
    qdd = np.gradient(s.qd, s.t, axis=0)
    early.add(s.wrench[seal:], sensor_motion(KIN, s.t[seal:], s.q[seal:], s.qd[seal:], qdd[seal:]))
    assert abs(early.estimate().mass / 4.2 - 1) > 0.005  # the lift's own: < 0.002


def test_with_the_sensor_noise_a_heavy_carton_converges_and_a_light_one_waits():
    heavy = _weigh(4.2, noise=1.0)
    assert heavy.weigher is not None, heavy.why
    assert heavy.weigher.estimate().mass == pytest.approx(4.2, rel=0.01)
    light = _weigh(0.6, noise=1.0)
    assert light.weigher is None
    assert 'not converged' in light.why and 'sigma(m)' in light.why


def test_too_short_a_lift_and_empty_cups_are_said_so():
    wrench, joints, end = _streams(4.2)
    short = LiftSamples.from_streams(wrench, joints, LIFT_T0 + 0.1, 3.0)
    fit = weigh_on_lift(
        short, np.zeros(6), _obs(), kin=KIN, tcp_offset=TCP, cup_gap=GAP, skip_s=0.05
    )
    assert fit.weigher is None and f'fewer than {MotionGaugeParams().min_samples}' in fit.why
    with pytest.raises(WeighError, match='cups hold nothing'):
        _weigh(0.0)


def test_the_history_keeps_its_span_and_starts_over_when_time_rewinds():
    h = LiftHistory(1.0)
    for i in range(1000):
        t = sim_stamp(i * 0.002)
        h.add_wrench(t, np.full(6, float(i)))
        if i % 10 == 0:
            h.add_joints(t, np.zeros(6), np.zeros(6))
    s = h.samples(sim_stamp(1.98))
    assert s.t[0] > 0.98 - 1e-9 and s.t[-1] == pytest.approx(1.98)
    assert h.wait_joints(1.98, 0.0) and not h.wait_joints(2.5, 0.0)
    h.add_wrench(0.0, np.zeros(6))  # a new episode
    assert len(h.samples(0.0).t) == 0


def test_a_lift_short_of_converging_is_topped_up_with_short_holds_never_past_the_still_hold():
    held: list[float] = []
    answers = iter([None, None, 'spec'])
    out, total = weigh_topped_up(lambda: next(answers), held.append, 1.5)
    assert out == 'spec' and held == [0.1, 0.1] and total == pytest.approx(0.2)
    held.clear()
    out, total = weigh_topped_up(lambda: None, held.append, 1.5)
    # Never converged: 14 steps held, a still weigh then holds the last 0.1 s of its 1.5 s.
    assert out is None and len(held) == 14 and total == pytest.approx(1.4)
    out, total = weigh_topped_up(lambda: 'spec', held.append, 1.5)
    assert out == 'spec' and total == 0.0
    with pytest.raises(PalletizerError, match='step'):
        weigh_topped_up(lambda: None, held.append, 1.5, step=0.0)
