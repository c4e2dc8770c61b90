"""Tests of the path-coordinate time parameterisations (ruckig, time-optimal) and the sampler."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from palletizer.core.motion import JointLimits, MotionError
from palletizer.core.motion.timing import (
    PathLimits,
    limit_jerk,
    sample_segments,
    time_optimal,
    time_segment,
)
from ruckig import InputParameter, Ruckig, Trajectory


def _line(length: float, direction: np.ndarray, k: int = 101):
    s = np.linspace(0.0, length, k)
    return s, s[:, None] * direction[None, :]


def test_straight_joint_line_takes_the_ruckig_time_of_its_path_coordinate():
    # q = s * e0 with generous joint limits: the Cartesian path limits alone set the profile.
    s, q = _line(0.8, np.array([1.0, 0, 0, 0, 0, 0]))
    lim = PathLimits(0.5, 1.0, 10.0)
    seg = time_segment(s, q, lim, JointLimits(acceleration=(50.0,) * 6, jerk=(500.0,) * 6))
    otg, inp, tr = Ruckig(1), InputParameter(1), Trajectory(1)
    inp.current_position, inp.target_position = [0.0], [0.8]
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = [0.5], [1.0], [10.0]
    otg.calculate(inp, tr)
    assert seg.duration == pytest.approx(tr.duration, rel=1e-9)
    t = np.linspace(0, seg.duration, 37)
    s_t, sd_t, sdd_t = seg.evaluate(t)
    ref = np.array([tr.at_time(ti) for ti in t])[:, :, 0]
    np.testing.assert_allclose(s_t, ref[:, 0], atol=1e-9)
    np.testing.assert_allclose(sd_t, ref[:, 1], atol=1e-9)
    np.testing.assert_allclose(sdd_t, ref[:, 2], atol=1e-9)


def test_joint_speed_limit_tightens_the_path_speed():
    # Joint 0 moves 3 rad per path metre: its 2.09 rad/s limit caps sdot at 0.698 m/s.
    s, q = _line(1.0, np.array([3.0, 0, 0, 0, 0, 0]))
    lim = JointLimits()
    tr = sample_segments([time_segment(s, q, PathLimits(5.0, 50.0, 500.0), lim)], lim, 500.0)
    assert np.abs(tr.qd[:, 0]).max() <= lim.velocity[0] + 1e-9
    assert np.abs(tr.qd[:, 0]).max() > 0.95 * lim.velocity[0]


def test_curved_path_is_slowed_until_every_sample_respects_acceleration():
    # A tight joint-space arc: the curvature term q'' sdot^2 would break 1 rad/s^2 unchecked.
    s = np.linspace(0.0, 1.0, 201)
    q = np.zeros((201, 6))
    q[:, 0] = np.sin(6 * s)
    q[:, 1] = np.cos(6 * s)
    lim = JointLimits(acceleration=(1.0,) * 6, jerk=(10.0,) * 6)
    seg = time_segment(s, q, PathLimits(2.0, 5.0, 50.0), lim)
    tr = sample_segments([seg], lim, 500.0)
    assert np.abs(tr.qdd).max() <= 1.0 + 1e-9
    assert np.abs(tr.qd).max(axis=0)[0] <= lim.velocity[0] + 1e-9
    assert tr.duration > seg.duration  # it had to be slowed
    np.testing.assert_allclose(tr.q[[0, -1]], q[[0, -1]], atol=1e-9)


def test_segments_chain_on_one_uniform_grid_of_whole_periods():
    s, q = _line(0.3, np.array([0, 1.0, 0, 0, 0, 0]))
    lim = JointLimits()
    a = time_segment(s, q, PathLimits(1.0, 2.0, 20.0), lim)
    b = time_segment(s, q[::-1].copy(), PathLimits(1.0, 2.0, 20.0), lim)
    tr = sample_segments([a, b], lim, 125.0)
    # Each segment is stretched to whole periods: by less than one period each.
    assert a.duration + b.duration <= tr.duration < a.duration + b.duration + 2 / 125.0
    np.testing.assert_allclose(np.diff(tr.t), 1 / 125.0)
    np.testing.assert_allclose(tr.q[-1], q[0], atol=1e-12)


def test_sampler_rejects_a_nonpositive_rate():
    s, q = _line(0.3, np.array([0, 1.0, 0, 0, 0, 0]))
    lim = JointLimits()
    with pytest.raises(MotionError, match='rate_hz'):
        sample_segments([time_segment(s, q, PathLimits(1.0, 2.0, 20.0), lim)], lim, 0.0)


def test_time_optimal_is_slow_only_where_a_joint_needs_it():
    # Joint 0 needs 3 rad per metre on the middle fifth only: one segment-wide speed (ruckig on
    # the worst |q'|) crawls the whole way; the time-optimal profile only there.
    s = np.linspace(0.0, 1.0, 201)
    q = np.zeros((201, 6))
    q[:, 0] = np.cumsum(np.where((s > 0.4) & (s < 0.6), 3.0, 0.3)) * (s[1] - s[0])
    lim = JointLimits()
    fast = sample_segments([time_optimal(s, q, np.full(201, 1.5), 2.0, lim)], lim, 500.0)
    slow = sample_segments([time_segment(s, q, PathLimits(1.5, 2.0, 20.0), lim)], lim, 500.0)
    assert fast.duration < 0.75 * slow.duration
    assert np.all(np.abs(fast.qd) <= np.asarray(lim.velocity) + 1e-9)
    assert np.all(np.abs(fast.qdd) <= np.asarray(lim.acceleration) + 1e-9)
    np.testing.assert_allclose(fast.q[[0, -1]], q[[0, -1]], atol=1e-9)
    np.testing.assert_allclose(fast.qd[[0, -1]], 0.0, atol=1e-12)


def test_time_optimal_keeps_each_grid_points_speed_cap():
    # A straight joint line at 1 rad per metre: fast for 0.6 m, then capped at 0.3 m/s.
    s, q = _line(0.8, np.array([0, 0, 1.0, 0, 0, 0]), k=161)
    cap = np.where(s < 0.6, 1.5, 0.3)
    seg = time_optimal(s, q, cap, 2.0, JointLimits())
    t = np.arange(0.0, seg.duration, 1e-3)
    s_t, sd_t, sdd_t = seg.evaluate(t)
    assert np.all(sd_t[s_t >= 0.6] <= 0.3 + 1e-9)
    assert sd_t.max() > 1.0  # it does go fast before the slow stretch
    assert np.all(np.abs(sdd_t) <= 2.0 + 1e-9)
    # It never stops in between: the speed only reaches zero at the two ends.
    assert sd_t[(t > 0.05) & (t < seg.duration - 0.05)].min() > 0.05


def test_a_path_that_turns_the_wrist_sharply_keeps_moving_and_stays_in_limits():
    """A rounded level-13 path whose first centimetres turn wrist 3 at 15 rad/m: the speed
    must not drop to zero inside the segment (it once planned a 1e7 s move)."""
    data = np.load(Path(__file__).parent / 'data' / 'sharp_turn_path.npz')
    lim = JointLimits()
    seg = time_optimal(data['s'], data['q'], data['cap'], float(data['acc']), lim)
    assert 0.0 < seg.duration < 5.0
    assert np.all(seg.sd_knot[1:-1] > 0.0)
    tr = sample_segments([seg], lim, 500.0)
    assert np.all(np.abs(tr.qd) <= np.asarray(lim.velocity) + 1e-9)
    assert np.all(np.abs(tr.qdd) <= np.asarray(lim.acceleration) + 1e-9)


def test_limit_jerk_ramps_the_acceleration_steps_and_costs_exactly_its_window():
    # A straight joint line: the time-optimal profile is bang-bang at the Cartesian 2 m/s^2.
    s, q = _line(0.8, np.array([1.0, 0, 0, 0, 0, 0]), k=161)
    lim = JointLimits(jerk=(100.0,) * 6)
    raw = time_optimal(s, q, np.full(161, 1.5), 2.0, lim)
    smooth = limit_jerk(raw, lim)
    # Window: spread of sdd (4 m/s^2) x |dq/ds| (1 rad/m) / (0.8 x 100 rad/s^3) = 50 ms.
    assert smooth.duration - raw.duration == pytest.approx(0.05, abs=2e-3)
    t = np.linspace(0.0, smooth.duration, 4001)
    s_t, sd_t, sdd_t = smooth.evaluate(t)
    assert s_t[0] == 0.0 and s_t[-1] == pytest.approx(0.8, abs=1e-9)
    assert sd_t[0] == 0.0 and sd_t[-1] == 0.0 and sd_t.min() >= 0.0
    assert sd_t.max() <= raw.sd_knot.max() + 1e-9
    # Within the original's range, up to the 1e-6 length correction of the integration.
    assert raw.sdd.min() * (1 + 1e-5) <= sdd_t.min() and sdd_t.max() <= raw.sdd.max() * (1 + 1e-5)
    path_jerk = np.abs(np.diff(smooth.sdd)) / np.diff(smooth.t_knot[:-1])
    assert path_jerk.max() <= 4.0 / 0.05 * 1.05
    # Sampled, every joint within its jerk limit; unsmoothed, 2 m/s^2 steps in one period.
    tr = sample_segments([smooth], lim, 500.0, check_jerk=True)
    assert np.abs(np.diff(tr.qdd, axis=0)).max() * 500.0 <= 100.0 + 1e-9
    bare = sample_segments([raw], lim, 500.0)
    assert np.abs(np.diff(bare.qdd, axis=0)).max() * 500.0 > 1000.0
    np.testing.assert_allclose(tr.q[[0, -1]], q[[0, -1]], atol=1e-9)


def test_jerk_check_slows_a_segment_where_the_path_curvature_adds_jerk():
    # A joint-space arc: the curvature terms of the joint jerk are not in the window's sizing.
    s = np.linspace(0.0, 1.0, 201)
    q = np.zeros((201, 6))
    q[:, 0] = np.sin(6 * s) / 2
    q[:, 1] = np.cos(6 * s) / 2
    lim = JointLimits(acceleration=(8.0,) * 6, jerk=(30.0,) * 6)
    seg = time_optimal(s, q, np.full(201, 2.0), 2.0, lim, jerk_limited=True)
    loose = sample_segments([seg], lim, 500.0)
    checked = sample_segments([seg], lim, 500.0, check_jerk=True)
    jerk = np.abs(np.diff(checked.qdd, axis=0)).max(axis=0) * 500.0
    assert np.all(jerk <= 30.0 + 1e-9)
    assert np.abs(np.diff(loose.qdd, axis=0)).max() * 500.0 > 30.0
    assert checked.duration > loose.duration


def test_time_optimal_speed_can_be_held_at_every_grid_point():
    # Where a joint's curvature term alone would use up its acceleration budget the profile
    # must not be faster: above that only a nonzero path acceleration keeps the joint within
    # its limit, which the knots cannot hold, and the samples came out over the limit.
    s = np.linspace(0.0, 1.0, 201)
    q = np.zeros((201, 6))
    q[:, 2] = 0.2 * np.sin(8 * s)  # |q''| up to 12.8 rad/m^2
    q[:, 0] = 0.8 * s
    lim = JointLimits()
    seg = time_optimal(s, q, np.full(201, 1.5), 5.0, lim)
    a = 0.95 * np.asarray(lim.acceleration)
    assert np.all(np.abs(seg.ddq) * seg.sd_knot[:, None] ** 2 <= a * (1 + 1e-9))
    tr = sample_segments([seg], lim, 500.0)
    # Sampled in one go: the first timing already keeps every joint within its limit.
    assert tr.duration == pytest.approx(seg.duration, abs=2e-3)
    assert np.abs(tr.qdd).max(axis=0)[2] <= lim.acceleration[2]
