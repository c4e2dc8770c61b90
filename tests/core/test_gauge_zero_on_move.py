"""Zeroing on the move: the empty tool's move back gives the tare a still zero would read."""

from __future__ import annotations

import numpy as np
import pytest
from palletizer.core.errors import PalletizerError
from palletizer.core.gauge_lift import LiftSamples, zero_on_move
from palletizer.core.gauge_motion import VGP20, MotionGaugeParams, rigid_wrench, sensor_motion
from palletizer.core.motion import UR10eKinematics, tool_down

KIN = UR10eKinematics()
SIGMA = np.array([1.667] * 3 + [0.0667] * 3)  # configs/cell.yaml wrench noise per sample
HOME = np.array([-1.57, -1.57, 1.57, -1.57, -1.57, 0.0])
STILL = SIGMA / np.sqrt(600)  # a still zero of 600 samples (configs/perception.yaml gauge)
# The tare a still, plumb zero reads: the sensor's bias with the empty gripper's weight in it.
TARE = np.array([3.1, -2.4, -27.0, 0.21, -0.33, 0.02])


def _ease(u: np.ndarray) -> np.ndarray:
    u = np.clip(u, 0.0, 1.0)
    return u**3 * (10 - 15 * u + 6 * u**2)


def _move(duration: float = 2.4) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A tool-down move back to the source, rest to rest: 0.6 m across, 0.25 m down and a
    0.8 rad turn of the tool, joint angles, rates and accelerations at 500 Hz."""
    t = np.round(np.arange(0.0, duration + 1e-9, 0.002), 6)

    def pose(ti: float) -> np.ndarray:
        u = float(_ease(np.array([ti / duration]))[0])
        return tool_down(0.6 - 0.6 * u, -0.2 - 0.5 * u, 0.95 - 0.25 * u, 0.8 * u)

    h, q, ref = 1e-4, [], HOME
    for ti in np.concatenate([t - h, t, t + h]):
        sol = KIN.ik_nearest(pose(float(ti)), ref)
        assert sol is not None
        q.append(sol)
        ref = sol
    qa = np.array(q).reshape(3, len(t), 6)
    return t, qa[1], (qa[2] - qa[0]) / (2 * h), (qa[2] - 2 * qa[1] + qa[0]) / h**2


T, Q, QD, QDD = _move()


def _samples(bias: np.ndarray, noise: float = 1.0, bump_n: float = 0.0, seed: int = 3):
    """The empty tool's readings on the move as the sensor gives them: its wrench change since
    a still, plumb pose, plus the tare and the bias since it, plus noise; `bump_n` [N] on
    the force's x for 0.3 s mid-move (the tool brushing something)."""
    motion = sensor_motion(KIN, T, Q, QD, QDD)
    rest = sensor_motion(KIN, T[:1], Q[:1], np.zeros((1, 6)), np.zeros((1, 6)))
    w = rigid_wrench(VGP20, motion) - rigid_wrench(VGP20, rest) + TARE + bias
    w = w + np.random.default_rng(seed).normal(0.0, 1.0, w.shape) * SIGMA * noise
    w[(T > 1.0) & (T < 1.3), 0] += bump_n
    return LiftSamples.of(T, w, Q, QD)


def _zero(samples: LiftSamples, tare: np.ndarray = TARE, since: float = 0.0):
    return zero_on_move(samples, tare, kin=KIN, since=since, still_samples=600)


def test_the_move_gives_the_tare_plus_the_drift_to_within_a_still_zeros_noise():
    drift = np.array([0.4, -0.3, 0.6, 0.02, -0.01, 0.015])
    z = _zero(_samples(drift))
    assert z.tare is not None, z.why
    assert z.samples == len(T)
    assert np.all(z.sigma <= STILL)  # at least as certain as the still zero it replaces
    np.testing.assert_array_less(np.abs(z.tare - (TARE + drift)), 3 * STILL)
    # Noise-free, the tool's model is the whole of the reading: exact but for the joint
    # accelerations, differenced from the rates as a UR driver streams no accelerations.
    exact = _zero(_samples(drift, noise=0.0))
    np.testing.assert_allclose(exact.tare, TARE + drift, atol=1e-5)


def test_the_tare_it_is_taken_against_does_not_matter():
    s = _samples(np.zeros(6))
    a, b = _zero(s), _zero(s, tare=np.zeros(6))
    assert a.tare is not None and b.tare is not None
    np.testing.assert_allclose(a.tare, b.tare, atol=1e-9)


def test_too_short_a_move_or_a_bump_on_it_leaves_the_zero_to_a_still_hold():
    short = _zero(_samples(np.zeros(6)), since=float(T[-1]) - 1.0)  # 501 samples < 600
    assert short.tare is None and 'fewer than 600' in short.why
    # A 15 N brush for 0.3 s spreads the readings about the tool's model: not certain enough.
    bumped = _zero(_samples(np.zeros(6), bump_n=15.0))
    assert bumped.tare is None and 'axis 0' in bumped.why and 'above a still zero' in bumped.why


def test_an_error_of_the_grippers_mass_mostly_averages_out_of_a_rest_to_rest_move():
    # A gripper 10 % heavier than its model leaves 0.1 x its inertial wrench in every
    # reading; over a move from rest to rest the mean acceleration is zero in the world. The
    # vertical force, the one a mass reads, keeps its axis: its part averages out. The tool's
    # turn on the way keeps the horizontal part from vanishing in the sensor's frame; it stays
    # within a still zero's noise.
    motion = sensor_motion(KIN, T, Q, QD, QDD)
    rest = sensor_motion(KIN, T[:1], Q[:1], np.zeros((1, 6)), np.zeros((1, 6)))
    extra = 0.1 * (rigid_wrench(VGP20, motion) - rigid_wrench(VGP20, rest))
    s = _samples(np.zeros(6), noise=0.0)
    z = _zero(LiftSamples.of(s.t, s.wrench + extra, s.q, s.qd))
    assert z.tare is not None, z.why
    err = np.abs(z.tare - TARE)
    np.testing.assert_array_less(err[:3], STILL[:3])
    assert err[2] < 1e-4 < 0.01 < np.abs(extra[:, 2]).max()


def test_bad_arguments_are_refused():
    with pytest.raises(PalletizerError, match='still_samples'):
        zero_on_move(_samples(np.zeros(6)), TARE, kin=KIN, since=0.0, still_samples=0)
    p = MotionGaugeParams()
    empty = LiftSamples.of(np.empty(0), np.empty((0, 6)), np.empty((0, 6)), np.empty((0, 6)))
    z = zero_on_move(empty, TARE, kin=KIN, since=0.0, still_samples=600, params=p)
    assert z.tare is None and '0 samples' in z.why
