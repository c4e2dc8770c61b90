"""heuristic_windows.run_max: the largest entry of every run along an axis, by doubling, equal
to the w-wide reduction of a sliding window view for every window size."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from palletizer.core.errors import PalletizerError
from palletizer.core.planning.heuristic_windows import run_max


@pytest.mark.parametrize('axis', [0, 1])
def test_run_max_equals_the_sliding_window_reduction_for_every_width(axis):
    rng = np.random.default_rng(7)
    a = rng.random((23, 37))
    a[rng.random(a.shape) < 0.1] = -np.inf  # the padding the planner uses
    for w in range(1, a.shape[axis] + 1):
        want = sliding_window_view(a, w, axis=axis).max(axis=-1)
        got = run_max(a, w, axis)
        assert got.shape == want.shape and np.array_equal(got, want), w


def test_run_max_of_booleans_says_whether_a_run_holds_a_true():
    rng = np.random.default_rng(3)
    s = rng.random((19, 31)) < 0.08
    for w in (1, 2, 3, 5, 8, 13, 19):
        want = sliding_window_view(s, w, axis=0).any(axis=-1)
        got = run_max(s, w, 0)
        assert got.dtype == bool and np.array_equal(got, want), w


def test_a_window_wider_than_the_axis_is_refused_naming_both():
    with pytest.raises(PalletizerError, match='window 6 on an axis of 5'):
        run_max(np.zeros((5, 4)), 6, 0)
