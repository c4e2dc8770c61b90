"""CameraView keeps its pose to POSE_DECIMALS: a pose that reached the node graph through tf2's
quaternion arithmetic, a last bit off, is the in-process loop's pose to the bit."""

from __future__ import annotations

import math

import numpy as np
from palletizer.core.views import CameraView


def _view(T: np.ndarray) -> CameraView:
    return CameraView('pallet_top', np.zeros((2, 2), np.float32), None, np.eye(3), T)


def test_a_pose_a_last_bit_off_is_the_same_pose():
    sim = np.array(
        [[0.0, -1.0, 0.0, -0.25], [-1.0, 0.0, 0.0, -0.86], [0.0, 0.0, -1.0, 2.4], [0, 0, 0, 1.0]]
    )
    via_tf = sim.copy()
    via_tf[0, 0] = 2.220446049250313e-16  # as tf2 gave it back (level 11, scripts/bench graph)
    via_tf[1, 1] = -2.220446049250313e-16
    via_tf[2, 2] = np.nextafter(-1.0, -2.0)
    assert not np.array_equal(sim, via_tf)
    a, b = _view(sim).T_world_optical, _view(via_tf).T_world_optical
    assert a.tobytes() == b.tobytes()


def test_no_negative_zero_is_left_to_flip_an_angle():
    T = np.eye(4)
    T[1, 0] = -1e-17
    got = _view(T).T_world_optical
    assert math.copysign(1.0, got[1, 0]) == 1.0  # atan2(-0.0, -1) would be -pi, not pi
    assert math.atan2(got[1, 0], -1.0) == math.pi
