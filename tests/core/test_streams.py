"""Stamped buffers start over when a reset rewinds sim time, and answer only from their epoch."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from palletizer.core.streams import StampedBuffer, rewound


def test_a_stamp_earlier_than_the_newest_is_a_rewind_and_equal_stamps_are_not():
    assert rewound(30.0, 0.004)
    assert not rewound(30.0, 30.0)  # an idle cell streams the same sim time again
    assert not rewound(30.0, 30.0 - 1e-9)  # float round-off of sec + nanosec


def test_a_request_of_the_next_episode_is_not_answered_by_the_previous_episodes_samples():
    rewinds = []
    buf = StampedBuffer(100, on_rewind=rewinds.append)
    for k in range(60):
        buf.add(29.76 + 0.004 * k, [1.0, 2.0])
    # The tare of the next episode asks for 0.54 s before its samples have arrived: the old
    # newest stamp (30 s) is far past the request, so it waits for the new epoch.

    def new_episode():
        for k in range(1, 137):  # 250 Hz, off the window's edges
            buf.add(0.004 * k - 0.002, [3.0, 4.0])

    threading.Timer(0.05, new_episode).start()
    rows, newest = buf.window(0.54, 0.24, timeout_s=5.0)
    assert rewinds == [pytest.approx(0.002)] and buf.epoch == 1
    assert newest == pytest.approx(0.542)
    assert rows.shape == (60, 2)
    np.testing.assert_allclose(rows, np.tile([3.0, 4.0], (60, 1)))


def test_a_request_waits_then_gives_no_rows_when_its_stamp_never_comes():
    buf = StampedBuffer(10)
    buf.add(1.0, [0.0])
    rows, newest = buf.window(2.0, 0.24, timeout_s=0.05)
    assert rows.shape[0] == 0 and newest == 1.0
