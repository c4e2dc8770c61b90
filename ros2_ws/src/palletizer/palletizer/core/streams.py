"""Sim-time stamped sample buffers that survive the episode boundary, where sim time rewinds.

Resetting the cell for the next episode starts its clock again at zero. A buffer that kept the
previous episode's samples would hold stamps far ahead of the new ones: a request for the new
episode's time would look answered at once, by samples of another episode. These buffers
start an epoch whenever a sample is stamped earlier than the newest one, dropping what came
before, and they only answer a request from samples of the epoch that reached its stamp.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ['StampedBuffer', 'rewound']

# A stamp this much earlier than the newest one is a rewind, not jitter: the cell's streams are
# monotonic within an episode, so anything earlier at all is a new epoch; the tolerance only
# absorbs float round-off of sec + nanosec.
REWIND_TOL_S = 1e-6


def rewound(newest: float, stamp: float) -> bool:
    """Whether `stamp` [s] starts a new epoch after a stream whose newest stamp is `newest` [s]."""
    return stamp < newest - REWIND_TOL_S


class StampedBuffer:
    """Thread-safe buffer of (stamp [s], sample (k,)) that starts over when sim time rewinds.

    `epoch` counts the rewinds seen. `on_rewind` (optional) is called, under the buffer's lock,
    with the stamp that started the new epoch.
    """

    def __init__(self, maxlen: int, on_rewind: Callable[[float], None] | None = None) -> None:
        self._rows: deque[tuple[float, np.ndarray]] = deque(maxlen=maxlen)
        self._cond = threading.Condition()
        self._on_rewind = on_rewind
        self.newest = -np.inf  # [s] stamp of the newest sample of this epoch
        self.epoch = 0

    def add(self, stamp: float, sample: ArrayLike) -> None:
        row = np.asarray(sample, dtype=float)
        with self._cond:
            if rewound(self.newest, stamp):
                self._rows.clear()
                self.epoch += 1
                if self._on_rewind is not None:
                    self._on_rewind(stamp)
                self.newest = stamp
            self._rows.append((float(stamp), row))
            self.newest = max(self.newest, float(stamp))
            self._cond.notify_all()

    def window(
        self, want: float, span_s: float, timeout_s: float, clock_tol_s: float = 1e-9
    ) -> tuple[np.ndarray, float]:
        """Samples stamped in (want - span_s, want] [s] once the stream has reached `want`.

        Waits up to timeout_s (wall) for a sample stamped at or after `want` and no later than
        want + span_s: a newest stamp far beyond the request belongs to another epoch (the
        previous episode's, whose rewind has not arrived yet), so it does not count as reached.
        Returns (rows (N, k), newest stamp); N == 0 when the wait timed out.
        """

        def reached() -> bool:
            return want - clock_tol_s <= self.newest <= want + span_s + clock_tol_s

        with self._cond:
            if not self._cond.wait_for(reached, timeout=timeout_s):
                return np.empty((0, 0)), self.newest
            rows = [
                r for t, r in self._rows if want - span_s - clock_tol_s < t <= want + clock_tol_s
            ]
            newest = self.newest
        return (np.array(rows) if rows else np.empty((0, 0))), newest
