"""Wrist F/T error model: the seed-drawn offset and the slow drift are deterministic and bounded."""

from __future__ import annotations

import math

import numpy as np
import pytest
from palletizer.sim.cell import Cell, CellOptions
from palletizer.sim.wrench import WrenchNoise

DRIFT = WrenchNoise(drift_force=1.0, drift_torque=0.1, drift_period_s=(300.0, 1800.0))


def test_drift_is_a_pure_function_of_seed_and_time_within_its_bound_and_rate():
    t = np.arange(0.0, 3600.0, 0.5)
    d = DRIFT.drift(7, t)
    assert d.shape == (len(t), 6)
    np.testing.assert_array_equal(d, DRIFT.drift(7, t))  # same (seed, t), same drift
    np.testing.assert_array_equal(d[123], DRIFT.drift(7, float(t[123])))
    assert not np.allclose(d, DRIFT.drift(8, t))  # another seed, another drift
    assert np.abs(d[:, :3]).max() <= 1.0 and np.abs(d[:, 3:]).max() <= 0.1
    # It wanders across its band within the hour, slowly: at most 2 pi A / T_min per second.
    assert np.ptp(d[:, :3], axis=0).max() > 1.0
    rate = np.abs(np.diff(d, axis=0)).max(axis=0) / 0.5
    assert rate[:3].max() <= 2 * math.pi * 1.0 / 300.0
    assert rate[3:].max() <= 2 * math.pi * 0.1 / 300.0


def test_offset_is_drawn_once_per_seed_within_the_accuracy_bound():
    noise = WrenchNoise(offset_force=5.5, offset_torque=0.5)
    offsets = np.array([noise.offset(s) for s in range(1, 51)])
    np.testing.assert_array_equal(offsets[0], noise.offset(1))
    assert np.abs(offsets[:, :3]).max() <= 5.5 and np.abs(offsets[:, 3:]).max() <= 0.5
    assert np.abs(offsets[:, :3]).max() > 4.0  # spread over the band, not stuck near zero
    np.testing.assert_array_equal(WrenchNoise().offset(3), np.zeros(6))


def test_the_model_rejects_a_negative_or_empty_band():
    with pytest.raises(ValueError, match='drift_force'):
        WrenchNoise(drift_force=-1.0)
    with pytest.raises(ValueError, match='drift_period_s'):
        WrenchNoise(drift_period_s=(600.0, 300.0))


@pytest.mark.sim
def test_a_reading_is_truth_plus_offset_plus_drift_at_that_instant():
    noise = WrenchNoise(
        offset_force=5.5, offset_torque=0.5, drift_force=1.0, drift_torque=0.1,
        drift_period_s=(300.0, 1800.0),
    )  # fmt: skip
    cell = Cell(options=CellOptions(wrench_noise=noise), seed=4)
    cell.settle(1.0)
    w, truth = cell.wrench(), cell._wrench.true()
    expect = noise.offset(4) + noise.drift(4, cell.time)
    np.testing.assert_allclose(w.force - truth.force, expect[:3], atol=1e-12)
    np.testing.assert_allclose(w.torque - truth.torque, expect[3:], atol=1e-12)


@pytest.mark.sim
def test_a_noisy_drifting_sample_depends_on_the_instant_not_on_the_read_rate():
    noise = WrenchNoise(
        force_sigma=5.0 / 3, torque_sigma=0.2 / 3, offset_force=5.5, drift_force=1.0
    )
    a, b = (Cell(options=CellOptions(wrench_noise=noise), seed=2) for _ in range(2))
    for _ in range(20):
        a.step(1)
        a.wrench()  # read every step on one cell, never on the other
    b.step(20)
    np.testing.assert_array_equal(a.wrench().force, b.wrench().force)
    np.testing.assert_array_equal(a.wrench().torque, b.wrench().torque)
