"""Wrist-wrench readings after a motion and the hold / release verdicts drawn from them."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from palletizer.core.errors import PalletizerError
from palletizer.core.streams import rewound

__all__ = [
    'ForceReading',
    'Verdict',
    'VerifyParams',
    'WrenchMark',
    'WrenchWindow',
    'verify_hold',
    'verify_release',
]


@dataclass(frozen=True)
class VerifyParams:
    """Thresholds of the wrench checks.

    min_payload_kg: the smallest change of |F| that counts as a carton [kg] (0.2 kg, issue 4);
    noise_force_n: sensor force noise per axis and sample [N] (cell.yaml wrench.noise_force_n);
    noise_k: how many standard deviations of the averaged difference noise the threshold must
    clear, so that a few-sample reading never passes on noise alone (4 sigma: < 0.2 % of
    empty-gripper readings of a 3-axis Gaussian exceed it); g [m/s^2].
    """

    min_payload_kg: float = 0.2
    noise_force_n: float = 1.0
    noise_k: float = 4.0
    g: float = 9.81

    def __post_init__(self) -> None:
        for name in ('min_payload_kg', 'noise_force_n', 'noise_k', 'g'):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise PalletizerError(f'VerifyParams.{name} = {v!r}; expected a finite value >= 0')

    def threshold_n(self, n_a: int, n_b: int) -> float:
        """|ΔF| [N] that separates a payload from noise for means of n_a and n_b samples."""
        noise = self.noise_k * self.noise_force_n * math.sqrt(1.0 / n_a + 1.0 / n_b)
        return max(self.min_payload_kg * self.g, noise)


@dataclass(frozen=True)
class ForceReading:
    """Mean force at the flange [N] over `samples` samples ending at sim time `stamp` [s]."""

    force: tuple[float, float, float]
    samples: int
    stamp: float

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise PalletizerError(f'ForceReading.samples = {self.samples}; expected >= 1')


@dataclass(frozen=True)
class Verdict:
    """A wrench check: ok, the measured |ΔF| and the threshold it was held to [N], why."""

    ok: bool
    delta_n: float
    threshold_n: float
    message: str


def _delta(a: ForceReading, b: ForceReading) -> float:
    return float(np.linalg.norm(np.subtract(b.force, a.force)))


def verify_hold(tare: ForceReading, loaded: ForceReading, params: VerifyParams) -> Verdict:
    """The carton is held when |F| grew past the threshold since the tare before sealing.

    Both readings are taken with the tool plumb and still, so gravity on the gripper is the
    same vector in the sensor frame and the difference is the payload's weight.
    """
    d = _delta(tare, loaded)
    thr = params.threshold_n(tare.samples, loaded.samples)
    if d > thr:
        return Verdict(True, d, thr, f'holding {d / params.g:.2f} kg')
    return Verdict(
        False,
        d,
        thr,
        f'the wrist force changed by {d:.2f} N after the lift, below {thr:.2f} N: nothing is held',
    )


def verify_release(
    tare: ForceReading | None,
    after: ForceReading,
    params: VerifyParams,
    loaded: ForceReading | None = None,
) -> Verdict:
    """The carton is gone when |F| is back within the threshold of the pre-pick tare.

    Without a tare (the pick ran before this process started) the reading must instead have
    dropped by more than the threshold from `loaded`, taken at the release pose before the
    vacuum went off.
    """
    if tare is not None:
        d = _delta(tare, after)
        thr = params.threshold_n(tare.samples, after.samples)
        if d <= thr:
            return Verdict(True, d, thr, 'released')
        if loaded is not None and d < _delta(loaded, after) and _delta(tare, loaded) > 2 * thr:
            # A few noisy samples can sit a little beyond the noise bound; what decides is
            # whether the force is nearer the empty tare or the loaded reading.
            return Verdict(True, d, thr, 'released (nearer the empty tare than the loaded force)')
        return Verdict(
            False,
            d,
            thr,
            f'the wrist force is {d:.2f} N off the pre-pick tare after the retract, above '
            f'{thr:.2f} N: still holding',
        )
    if loaded is None:
        raise PalletizerError('verify_release: give the pre-pick tare or the loaded reading')
    d = _delta(loaded, after)
    thr = params.threshold_n(loaded.samples, after.samples)
    if d > thr:
        return Verdict(True, d, thr, 'released')
    return Verdict(
        False,
        d,
        thr,
        f'the wrist force dropped by only {d:.2f} N after the release, below {thr:.2f} N: '
        'still holding',
    )


@dataclass(frozen=True)
class WrenchMark:
    """Where the stream stood when a motion began: samples seen and sim time [s]."""

    count: int
    stamp: float


class WrenchWindow:
    """Thread-safe buffer of stamped force samples; averages the still end of each motion.

    The sensor keeps streaming while the arm moves. A motion's reading is the mean of the
    samples in its last `window_s` (the still dwell the controller holds at the end), taken
    only from samples that arrived after the mark, so a sample from before the motion (or one
    still in flight when the controller answered) is never mixed in. A sample stamped earlier
    than the newest one starts a new episode (the cell's reset rewinds sim time): the samples
    before it are dropped, and `epoch` counts such rewinds.
    """

    def __init__(self, capacity: int = 5000, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._samples: deque[tuple[int, float, np.ndarray]] = deque(maxlen=capacity)
        self._count = 0
        self.epoch = 0

    @property
    def count(self) -> int:
        """Samples received so far."""
        with self._cond:
            return self._count

    def add(self, stamp: float, force: Sequence[float]) -> None:
        """One sample: sim time [s] and force (3,) [N]."""
        f = np.asarray(force, dtype=float).reshape(3)
        with self._cond:
            if self._samples and rewound(self._samples[-1][1], float(stamp)):
                self._samples.clear()
                self.epoch += 1
            self._count += 1
            self._samples.append((self._count, float(stamp), f))
            self._cond.notify_all()

    def mark(self, now: float = -math.inf) -> WrenchMark:
        """Before a motion: the sample count and the later of `now` and the newest stamp [s]."""
        with self._cond:
            last = self._samples[-1][1] if self._samples else -math.inf
            return WrenchMark(self._count, max(float(now), last))

    def reading_after(
        self,
        mark: WrenchMark,
        motion_s: float,
        timeout_s: float,
        window_s: float = 0.0,
        not_before: float = -math.inf,
        eps_s: float = 0.01,
    ) -> ForceReading | None:
        """Mean of the samples in the last window_s [s] of a motion of motion_s [s] from `mark`.

        The motion ends at the later of mark.stamp + motion_s and `not_before` (the clock when
        the controller answered) [s]. Waits up to timeout_s (wall) for a new sample stamped at
        that end (within eps_s, half a 50 Hz controller tick). On timeout the newest new
        samples are used; None when no sample arrived at all.
        """
        if window_s < 0 or timeout_s < 0:
            raise PalletizerError(
                f'reading_after: window_s = {window_s}, timeout_s = {timeout_s}; expected >= 0'
            )
        end = max(mark.stamp + max(0.0, float(motion_s)), float(not_before)) - eps_s
        deadline = self._clock() + timeout_s
        with self._cond:
            while True:
                new = [s for s in self._samples if s[0] > mark.count]
                done = next((s for s in new if s[1] >= end), None)
                if done is not None:
                    break
                left = deadline - self._clock()
                if left <= 0:
                    if not new:
                        return None
                    done = new[-1]
                    break
                self._cond.wait(min(left, 0.05))
        last = done[1]
        lo = last - window_s - eps_s
        rows = [s[2] for s in new if s[0] <= done[0] and s[1] >= lo]
        mean = np.mean(rows, axis=0)
        return ForceReading((float(mean[0]), float(mean[1]), float(mean[2])), len(rows), last)
