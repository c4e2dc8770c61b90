"""Wrench windows after a motion, and the hold / release verdicts."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from palletizer.core.errors import PalletizerError
from palletizer.execution import (
    ForceReading,
    VerifyParams,
    WrenchWindow,
    verify_hold,
    verify_release,
)

GRIPPER = np.array([0.0, 0.0, -60.0])  # the empty tool's weight in the sensor frame [N]


def _reading(force, n=5):
    return ForceReading(tuple(float(x) for x in force), n, 0.0)


def test_hold_is_seen_when_the_force_grows_by_the_cartons_weight():
    p = VerifyParams()
    v = verify_hold(_reading(GRIPPER), _reading(GRIPPER + [0.0, 0.0, -3.5 * 9.81]), p)
    assert v.ok
    np.testing.assert_allclose(v.delta_n, 3.5 * 9.81)
    assert 'holding 3.50 kg' in v.message


def test_hold_is_refused_when_the_force_barely_changes():
    v = verify_hold(_reading(GRIPPER), _reading(GRIPPER + [0.3, -0.2, -1.0]), VerifyParams())
    assert not v.ok
    assert 'nothing is held' in v.message and v.delta_n < v.threshold_n


def test_threshold_is_the_payload_floor_with_many_samples_and_noise_bound_with_few():
    p = VerifyParams(min_payload_kg=0.2, noise_force_n=1.0, noise_k=4.0)
    np.testing.assert_allclose(p.threshold_n(200, 200), 0.2 * 9.81)
    np.testing.assert_allclose(p.threshold_n(1, 1), 4.0 * np.sqrt(2.0))


def test_noisy_empty_readings_do_not_pass_as_a_hold():
    rng = np.random.default_rng(7)
    p = VerifyParams()
    passed = 0
    for _ in range(2000):
        a = GRIPPER + rng.normal(0, 1.0, (5, 3)).mean(axis=0)
        b = GRIPPER + rng.normal(0, 1.0, (5, 3)).mean(axis=0)
        passed += verify_hold(_reading(a), _reading(b), p).ok
    assert passed <= 10  # 4 sigma on a 3-axis difference: ~0.1 % expected


def test_release_is_judged_against_the_pre_pick_tare():
    p = VerifyParams()
    tare = _reading(GRIPPER)
    assert verify_release(tare, _reading(GRIPPER + [0.5, 0.0, 0.4]), p).ok
    held = verify_release(tare, _reading(GRIPPER + [0.0, 0.0, -20.0]), p)
    assert not held.ok and 'still holding' in held.message


def test_release_without_a_tare_needs_the_force_to_drop_from_the_loaded_reading():
    p = VerifyParams()
    loaded = _reading(GRIPPER + [0.0, 0.0, -30.0])
    assert verify_release(None, _reading(GRIPPER), p, loaded).ok
    assert not verify_release(None, loaded, p, loaded).ok
    with pytest.raises(PalletizerError, match='give the pre-pick tare or the loaded reading'):
        verify_release(None, _reading(GRIPPER), p)


def test_window_averages_the_still_dwell_at_the_end_of_the_motion_only():
    w = WrenchWindow()
    w.add(0.98, [0.0, 0.0, -99.0])  # before the motion
    mark = w.mark(now=1.0)
    for k in range(1, 101):  # 1.9 s of motion then a 0.1 s dwell, at 50 Hz
        t = 1.0 + 0.02 * k
        w.add(t, [0.0, 0.0, -60.0 if t > 2.89 else -75.0])
    w.add(3.0, [0.0, 0.0, -60.0])  # the sample published after the call
    r = w.reading_after(mark, motion_s=2.0, timeout_s=0.1, window_s=0.1)
    assert r is not None
    np.testing.assert_allclose(r.force, (0.0, 0.0, -60.0))
    assert r.samples == 6 and r.stamp == pytest.approx(3.0)


def test_window_waits_for_the_end_sample_that_arrives_after_the_controller_answer():
    w = WrenchWindow()
    w.add(5.0, [1.0, 0.0, 0.0])
    mark = w.mark(now=5.0)

    def late():
        w.add(5.0, [0.0, 2.0, 0.0])  # fast-forward: one sample after the call, same sim time

    threading.Timer(0.05, late).start()
    r = w.reading_after(mark, motion_s=0.0, timeout_s=2.0)
    assert r is not None and r.samples == 1
    np.testing.assert_allclose(r.force, (0.0, 2.0, 0.0))


def test_window_ends_no_earlier_than_the_controllers_answer():
    w = WrenchWindow()
    mark = w.mark(now=0.0)
    w.add(0.5, [0.0, 0.0, -70.0])  # a continuous stream: still moving at 0.5 s
    w.add(2.0, [0.0, 0.0, -60.0])  # the answer came at 2.0 s of a motion planned for 1.0 s
    r = w.reading_after(mark, motion_s=1.0, timeout_s=1.0, window_s=0.05, not_before=2.0)
    assert r is not None and r.samples == 1 and r.stamp == 2.0
    np.testing.assert_allclose(r.force, (0.0, 0.0, -60.0))


def test_window_without_new_samples_gives_none_after_the_timeout():
    clock = iter(np.arange(0.0, 100.0, 0.5))
    w = WrenchWindow(clock=lambda: float(next(clock)))
    w.add(1.0, [0.0, 0.0, -60.0])
    assert w.reading_after(w.mark(), motion_s=1.0, timeout_s=1.0) is None


def test_window_uses_the_newest_samples_when_the_end_stamp_never_comes():
    clock = iter(np.arange(0.0, 100.0, 0.5))
    w = WrenchWindow(clock=lambda: float(next(clock)))
    mark = w.mark(now=0.0)
    w.add(0.5, [0.0, 0.0, -61.0])
    r = w.reading_after(mark, motion_s=2.0, timeout_s=1.0, window_s=0.1)
    assert r is not None and r.samples == 1
    np.testing.assert_allclose(r.force, (0.0, 0.0, -61.0))


def test_bad_parameters_are_named():
    with pytest.raises(PalletizerError, match='VerifyParams.noise_k = -1'):
        VerifyParams(noise_k=-1.0)
    with pytest.raises(PalletizerError, match='window_s = -0.1, timeout_s = 1; expected >= 0'):
        WrenchWindow().reading_after(WrenchWindow().mark(), 1.0, 1, window_s=-0.1)


def test_release_with_a_noisy_reading_near_the_tare_is_still_a_release():
    import numpy as np
    from palletizer.execution.wrench import ForceReading, VerifyParams, verify_release

    p = VerifyParams()
    tare = ForceReading(np.array([0.0, 0.0, -25.0]), 5, 0.0)
    loaded = ForceReading(np.array([0.0, 0.0, -66.2]), 5, 1.0)
    noisy = ForceReading(np.array([0.0, 0.0, -28.2]), 5, 2.0)  # 3.2 N off, far from 66 N
    assert verify_release(tare, noisy, p, loaded).ok
    held = ForceReading(np.array([0.0, 0.0, -60.0]), 5, 2.0)
    assert not verify_release(tare, held, p, loaded).ok


def test_window_starts_over_when_a_reset_rewinds_sim_time():
    # The previous episode ended at 30 s; the next one starts again at 0 s. Its first motion's
    # mark must not carry the old 30 s, or its reading waits for a stamp that never comes.
    w = WrenchWindow()
    for k in range(10):
        w.add(29.9 + 0.01 * k, [0.0, 0.0, -99.0])
    w.add(0.004, [0.0, 0.0, -60.0])  # the first sample after the reset
    assert w.epoch == 1
    mark = w.mark(now=0.004)
    assert mark.stamp == pytest.approx(0.004)
    for k in range(1, 26):
        w.add(0.004 + 0.02 * k, [0.0, 0.0, -60.0])
    r = w.reading_after(mark, motion_s=0.5, timeout_s=0.1, window_s=0.1)
    assert r is not None and r.stamp == pytest.approx(0.504)
    np.testing.assert_allclose(r.force, (0.0, 0.0, -60.0))
