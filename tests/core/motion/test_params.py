"""Motion parameters come from configs/cell.yaml; the dataclass defaults match it."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np
import pytest
from palletizer.core.config import load_config
from palletizer.core.motion import MotionError, MotionParams


def test_the_shipped_config_gives_the_default_parameters():
    got = MotionParams.from_config(load_config().cell)
    want = MotionParams()
    for f in dataclasses.fields(MotionParams):
        if f.name != 'limits':
            assert getattr(got, f.name) == getattr(want, f.name), f.name
    for name in ('lower', 'upper', 'velocity', 'acceleration', 'jerk'):
        # cell.yaml writes 2 pi as 6.2832
        np.testing.assert_allclose(
            getattr(got.limits, name), getattr(want.limits, name), atol=1e-4
        )


def test_a_config_value_and_an_override_reach_the_parameters():
    cell = load_config().cell
    cell = replace(
        cell, motion=replace(cell.motion, approach_speed=0.2, joint_accel_limits=(3.0,) * 6)
    )
    got = MotionParams.from_config(cell, rate_hz=125.0)
    assert got.approach_speed == 0.2 and got.rate_hz == 125.0
    assert got.limits.acceleration == (3.0,) * 6


def test_a_bad_config_value_is_refused_by_name():
    cell = load_config().cell
    cell = replace(cell, motion=replace(cell.motion, cartesian_accel=0.0))
    with pytest.raises(MotionError, match=r'MotionParams.cartesian_accel = 0.0; expected > 0'):
        MotionParams.from_config(cell)


def test_an_unknown_timing_is_refused_with_the_allowed_ones():
    with pytest.raises(MotionError, match=r"timing = 'topp'; expected one of jerk_limited, "):
        MotionParams(timing='topp')
    cell = load_config().cell
    cell = replace(cell, motion=replace(cell.motion, timing='ruckig'))
    assert MotionParams.from_config(cell).timing == 'ruckig'
