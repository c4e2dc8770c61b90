"""Weighing on the lift: core.gauge_motion's fit over the wrist samples of the move that lifts
the carton off its station, so the arm need not stand still to weigh it.

The gauge keeps the last seconds of the streams a UR driver offers: the wrench and the joint
states (angles and rates, no accelerations), each at its own rate; the joint states are
interpolated to the wrench's stamps (LiftSamples.from_streams). When asked to weigh, it finds the lift in them
(the first motion after the seal, the lowest the tool went: `lift_start`), drops the first
`skip_s` after it (the cups pull the carton off its support: until it is clear, the support
carries part of its weight), and fits mass and CoM to the rest, with the
tool's motion from forward kinematics at the measured rates and their time derivative.

Only a converged fit (MotionGaugeParams' rule) is handed on; the caller weighs still otherwise.

The same streams zero the gauge on the move (`zero_on_move`): the empty tool's readings over the
move back to the source, less the gripper's known wrench change (core.gauge_motion
`empty_tool_bias`), are the tare a still zero would read, so the arm need not stand still
there either; only where they are less certain than a still zero does it hold.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from palletizer.core.contracts import Observation, PackageSpec
from palletizer.core.errors import PalletizerError
from palletizer.core.gauge import WeighError, type_from_label
from palletizer.core.gauge_motion import (
    InMotionWeigher,
    MotionGaugeParams,
    empty_tool_bias,
    sensor_motion,
    weigher_for_grasp,
)
from palletizer.core.motion.kinematics import UR10eKinematics
from palletizer.core.streams import rewound

__all__ = [
    'LIFT_SPAN_S',
    'TOP_UP_S',
    'LiftHistory',
    'MotionGauge',
    'LiftSamples',
    'LiftWeigh',
    'MoveZero',
    'lift_start',
    'sim_stamp',
    'weigh_on_lift',
    'weigh_topped_up',
    'weigh_topped_up',
    'zero_on_move',
]


def sim_stamp(t: float) -> float:
    """Sim time [s] as a message stamp carries it and a node reads it back (whole ns, then
    sec + nanosec 1e-9): an in-process gauge stamps its samples so, to the last bit."""
    ns = int(round(float(t) * 1e9))
    return float(ns // 1_000_000_000 + (ns % 1_000_000_000) * 1e-9)


def _latest_per_stamp(rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows (stamp, ...) in stamp order, one per stamp (the last given): a stream publishes
    the state again after each call, at the same instant."""
    by: dict[float, tuple[Any, ...]] = {}
    for r in rows:
        by[float(r[0])] = r
    return [by[t] for t in sorted(by)]


@dataclass(frozen=True, eq=False)
class LiftSamples:
    """Stamped samples of the wrist streams, oldest first: t (n,) [s sim], wrench (n, 6)
    [N, N m] as the (zeroed) sensor reads it, q and qd (n, 6) [rad, rad/s] in the planner's
    joint order, each row taken at its t."""

    t: np.ndarray
    wrench: np.ndarray
    q: np.ndarray
    qd: np.ndarray

    @classmethod
    def of(cls, t: ArrayLike, wrench: ArrayLike, q: ArrayLike, qd: ArrayLike) -> LiftSamples:
        s = cls(
            np.asarray(t, dtype=float).reshape(-1),
            np.asarray(wrench, dtype=float).reshape(-1, 6),
            np.asarray(q, dtype=float).reshape(-1, 6),
            np.asarray(qd, dtype=float).reshape(-1, 6),
        )
        n = len(s.t)
        if not (len(s.wrench) == len(s.q) == len(s.qd) == n):
            raise PalletizerError(
                f'LiftSamples: {n} stamps, {len(s.wrench)} wrenches, {len(s.q)} joint angles '
                f'and {len(s.qd)} rates; expected one of each per stamp'
            )
        if n > 1 and not bool(np.all(np.diff(s.t) > 0)):
            raise PalletizerError('LiftSamples: stamps must increase strictly')
        return s

    @classmethod
    def from_streams(
        cls,
        wrench: Sequence[tuple[float, ArrayLike]],
        joints: Sequence[tuple[float, ArrayLike, ArrayLike]],
        until: float,
        span_s: float,
    ) -> LiftSamples:
        """The two streams as a UR driver gives them, each at its own rate, on the wrench's
        stamps: wrench rows (t, (6,)) and joint-state rows (t, q (6,), qd (6,)) in
        (until - span_s, until] [s], one per stamp; the angles and rates interpolated linearly
        to each wrench stamp within the joint states' span (the wrench samples outside it are
        left out)."""
        lo, eps = until - span_s, 1e-9
        w = _latest_per_stamp([r for r in wrench if lo < r[0] <= until + eps])
        j = _latest_per_stamp([r for r in joints if lo < r[0] <= until + eps])
        if len(j) < 2 or not w:
            return cls.of(np.empty(0), np.empty((0, 6)), np.empty((0, 6)), np.empty((0, 6)))
        tj = np.array([r[0] for r in j])
        tw = np.array([r[0] for r in w])
        keep = (tw >= tj[0] - eps) & (tw <= tj[-1] + eps)
        tw = tw[keep]
        qj = np.array([np.asarray(r[1], dtype=float) for r in j])
        qdj = np.array([np.asarray(r[2], dtype=float) for r in j])
        q = np.stack([np.interp(tw, tj, qj[:, k]) for k in range(6)], axis=1)
        qd = np.stack([np.interp(tw, tj, qdj[:, k]) for k in range(6)], axis=1)
        rows = np.array([np.asarray(r[1], dtype=float) for r in w])[keep]
        return cls.of(tw, rows.reshape(-1, 6), q, qd)


LIFT_SPAN_S = 3.0
"""[s] the streams' span a fit on the lift looks at: the pick's descent, seal and lift, not
the previous place (lower than some stations: `lift_start` looks for the lowest pose)."""

TOP_UP_S = 0.1
"""[s] the hold between two fits of a lift that has not converged (`weigh_topped_up`)."""

_T = TypeVar('_T')


def weigh_topped_up(
    fit: Callable[[], _T | None],
    hold: Callable[[float], None],
    hold_s: float,
    step: float = TOP_UP_S,
) -> tuple[_T | None, float]:
    """fit() after the lift; while it has not converged (None), hold the arm still `step` [s]
    more and fit again, over the lift's samples and the still readings since, until less
    than a step of the still weigh's hold_s [s] is left. Returns the fit (None where none
    converged) and the time held [s]: a still weigh after it holds only the rest of hold_s,
    as its reading takes the newest samples, those held here among them. So the most a
    carton is held stays the still weigh's hold, and a fit a little short of converging
    on the lift (a light carton: mass sigma 0.54 % against 0.5 %) converges a step or a few
    later instead of a whole still weigh later."""
    if step <= 0:
        raise PalletizerError(f'weigh_topped_up: step = {step}; expected > 0')
    out, held = fit(), 0.0
    while out is None and held + step < hold_s - 1e-9:
        hold(step)
        held += step
        out = fit()
    return out, held


class LiftHistory:
    """The last `span_s` of the wrench and joint-state streams, thread-safe, as a gauge keeps
    them for weighing on the lift and zeroing on the move. A stamp earlier than the newest of its stream starts a new
    episode (the cell's reset rewinds sim time): both streams start over."""

    def __init__(self, span_s: float = 3.0) -> None:
        if not span_s > 0:
            raise PalletizerError(f'LiftHistory: span_s = {span_s}; expected > 0')
        self.span_s = float(span_s)
        self._cond = threading.Condition()
        self._wrench: deque[tuple[float, np.ndarray]] = deque()
        self._joints: deque[tuple[float, np.ndarray, np.ndarray]] = deque()

    def clear(self) -> None:
        with self._cond:
            self._wrench.clear()
            self._joints.clear()

    def _keep(self, rows: deque[Any], row: tuple[Any, ...]) -> None:
        if rows and rewound(rows[-1][0], row[0]):
            self._wrench.clear()
            self._joints.clear()
        rows.append(row)
        while rows and rows[0][0] < row[0] - self.span_s - 0.5:
            rows.popleft()
        self._cond.notify_all()

    def add_wrench(self, stamp: float, wrench: ArrayLike) -> None:
        """One wrench sample (6,) [N, N m] at sim time `stamp` [s]."""
        with self._cond:
            self._keep(self._wrench, (float(stamp), np.asarray(wrench, dtype=float).reshape(6)))

    def add_joints(self, stamp: float, q: ArrayLike, qd: ArrayLike) -> None:
        """One joint state: angles and rates (6,) [rad, rad/s] at sim time `stamp` [s]."""
        row = (float(stamp), np.array(q, dtype=float), np.array(qd, dtype=float))
        with self._cond:
            self._keep(self._joints, row)

    def wait_joints(self, want: float, timeout_s: float) -> bool:
        """Wait up to timeout_s (wall) for a joint state stamped at `want` [s] or later."""
        with self._cond:
            return self._cond.wait_for(
                lambda: bool(self._joints) and self._joints[-1][0] >= want - 1e-9,
                timeout=timeout_s,
            )

    def samples(self, until: float, span_s: float | None = None) -> LiftSamples:
        """LiftSamples.from_streams over the last span_s (at most the span kept; None: all of
        it) before `until` [s]."""
        span = self.span_s if span_s is None else min(float(span_s), self.span_s)
        with self._cond:
            wrench, joints = list(self._wrench), list(self._joints)
        return LiftSamples.from_streams(wrench, joints, until, span)


@dataclass(frozen=True)
class LiftWeigh:
    """A fit on the lift: the weigher (its estimate and reading), or why there is none."""

    weigher: InMotionWeigher | None
    why: str = ''
    lift_s: float = 0.0  # [s] from the seal to the last sample used


def lift_start(
    samples: LiftSamples,
    kin: UR10eKinematics,
    still_m: float = 2e-6,
    moving: float = 0.01,
    rim_m: float = 0.10,
) -> int:
    """The index where the lift begins: the first sample, after the tool stood lowest (the
    seal; within still_m [m]), at which a joint moves faster than `moving` [rad/s].

    Lowest in the last valley: back from the newest sample, up to where the tool stood rim_m
    [m] above the lowest point so far (every pick comes down onto its lid from at least the
    place clearance, 0.18 m, above it). A faster cycle brings the previous place, lower than
    some stations, into the samples (level 12: 2 of 6 lifts fitted from the previous release).

    Not the seal itself: the cups may hold the carton on its support a while before the lift
    (the hardware profile waits for the vacuum input: 80 ms to 0.4 s, the wrench reading a
    suction preload and part of the weight), and the arm creeps by a tenth of a millimetre
    meanwhile; 0.01 rad/s is above that creep (0.004 rad/s) and reached in the lift's first
    few milliseconds."""
    if len(samples.t) == 0:
        raise PalletizerError('lift_start: no samples')
    z = kin.fk(samples.q)[:, 2, 3]
    lowest = np.minimum.accumulate(z[::-1])[::-1]  # the lowest from each sample on
    above = np.flatnonzero(z > lowest + rim_m)
    first = int(above[-1]) + 1 if len(above) else 0
    valley = z[first:]
    low = first + int(np.flatnonzero(valley <= valley.min() + still_m)[-1])
    fast = np.flatnonzero(np.abs(samples.qd[low:]).max(axis=1) > moving)
    return low + int(fast[0]) if len(fast) else len(samples.t) - 1


def weigh_on_lift(
    samples: LiftSamples,
    tare: ArrayLike,
    observation: Observation,
    *,
    kin: UR10eKinematics,
    tcp_offset: float,
    cup_gap: float,
    skip_s: float,
    params: MotionGaugeParams | None = None,
) -> LiftWeigh:
    """Fit mass and CoM to the samples from `skip_s` after the seal to the newest.

    tare (6,): the empty tool's still, plumb reading that the samples are taken against (the
    gauge's zero). Raises core.gauge.WeighError('no_payload') when the fit finds nothing on the cups.
    """
    if skip_s < 0:
        raise PalletizerError(f'weigh_on_lift: skip_s = {skip_s}; expected >= 0')
    p = params or MotionGaugeParams()
    if len(samples.t) < 3:
        return LiftWeigh(None, f'{len(samples.t)} wrist samples: too few to find a lift')
    i = lift_start(samples, kin)
    use = samples.t >= samples.t[i] + skip_s
    n = int(use.sum())
    if n < p.min_samples:
        return LiftWeigh(None, f'{n} samples after the lift began, fewer than {p.min_samples}')
    qdd = np.gradient(samples.qd, samples.t, axis=0)
    motion = sensor_motion(kin, samples.t[use], samples.q[use], samples.qd[use], qdd[use], g=p.g)
    weigher = weigher_for_grasp(
        observation, samples.q[i], kin=kin, tcp_offset=tcp_offset, cup_gap=cup_gap, params=p
    )
    weigher.add(samples.wrench[use] - np.asarray(tare, dtype=float).reshape(1, 6), motion)
    estimate = weigher.estimate()  # WeighError('no_payload') propagates
    lift_s = float(samples.t[-1] - samples.t[i])
    if not estimate.converged:
        return LiftWeigh(None, f'not converged on the lift: {estimate.why}', lift_s)
    return LiftWeigh(weigher, '', lift_s)


@dataclass(frozen=True)
class MoveZero:
    """A zero on the move: the new tare (6,) [N, N m] and its sigma (6,), or why there is none
    (tare None); samples: how many readings it averaged."""

    tare: np.ndarray | None
    sigma: np.ndarray | None = None
    samples: int = 0
    why: str = ''


def zero_on_move(
    samples: LiftSamples,
    tare: ArrayLike,
    *,
    kin: UR10eKinematics,
    since: float,
    still_samples: int,
    params: MotionGaugeParams | None = None,
) -> MoveZero:
    """The tare from the empty tool's move that began at `since` [s sim] (the samples from then
    on): the current tare plus the bias `empty_tool_bias` finds against it, i.e. the mean of
    the readings less the gripper's wrench change, whatever tare (6,) the samples are taken
    against (zeros where there is none yet).

    Handed on only when at least as certain as the still zero it replaces, an average of
    `still_samples` readings at rest: at least that many samples, and each axis's sigma (the
    datasheet noise or the samples' own spread about the tool's model, whichever is larger,
    over sqrt n) within the still zero's (the datasheet noise over sqrt still_samples). A
    tool model that does not hold on the move, or a bump, widens the spread and the gauge
    holds still to zero instead. The move should run rest to rest (the return to the source
    does): its mean acceleration is then zero, and an error of the gripper's mass drops out
    of the mean force.
    """
    if still_samples < 1:
        raise PalletizerError(f'zero_on_move: still_samples = {still_samples}; expected >= 1')
    p = params or MotionGaugeParams()
    use = samples.t >= since - 1e-9
    n = int(use.sum())
    if n < still_samples:
        return MoveZero(None, None, n, f'{n} samples on the move, fewer than {still_samples}')
    qdd = np.gradient(samples.qd, samples.t, axis=0)
    motion = sensor_motion(kin, samples.t[use], samples.q[use], samples.qd[use], qdd[use], g=p.g)
    t0 = np.asarray(tare, dtype=float).reshape(6)
    bias, sigma = empty_tool_bias(samples.wrench[use] - t0, motion, params=p)
    still = np.array([p.force_sigma_n] * 3 + [p.torque_sigma_nm] * 3) / np.sqrt(still_samples)
    if bool(np.any(sigma > still * (1 + 1e-9))):
        k = int(np.argmax(sigma / still))
        return MoveZero(
            None,
            sigma,
            n,
            f'axis {k} sigma {sigma[k]:.4g} on the move, above a still zero of '
            f'{still_samples} samples ({still[k]:.4g})',
        )
    return MoveZero(t0 + bias, sigma, n)


@dataclass(frozen=True, eq=False)
class MotionGauge:
    """A gauge's in-motion half over the streams it keeps (`history`), as both gauges (the
    in-process WristGauge and the wrist_gauge node) use it: weigh on the lift, zero on the move.

    tcp_offset, cup_gap [m]: the gripper's (configs/cell.yaml gripper); params: the fits' noise
    model and convergence rule; skip_s [s]: weigh_on_lift's; still_samples: the readings a
    still zero averages (configs/perception.yaml gauge.samples), what a zero on the move must
    be as certain as.
    """

    history: LiftHistory
    kin: UR10eKinematics
    tcp_offset: float
    cup_gap: float
    params: MotionGaugeParams
    skip_s: float
    still_samples: int

    def weigh(
        self, until: float, tare: ArrayLike, observation: Observation
    ) -> tuple[PackageSpec | None, str]:
        """The carton weighed on the lift that ended at `until` [s sim] against `tare` (6,):
        (its spec, ''), or (None, why) where that fit did not converge or found nothing."""
        try:
            fit = weigh_on_lift(
                self.history.samples(until, LIFT_SPAN_S),
                tare,
                observation,
                kin=self.kin,
                tcp_offset=self.tcp_offset,
                cup_gap=self.cup_gap,
                skip_s=self.skip_s,
                params=self.params,
            )
        except WeighError as exc:
            return None, f'on the lift: {exc}'
        if fit.weigher is None:
            return None, fit.why
        pid = observation.package_id
        return fit.weigher.reading(pid, type_from_label(pid)).spec, ''

    def zero(self, until: float, since: float, tare: ArrayLike | None) -> MoveZero:
        """zero_on_move over the empty tool's move from `since` to `until` [s sim], against
        `tare` (6,; None: zeros, there being none yet)."""
        return zero_on_move(
            self.history.samples(until),
            np.zeros(6) if tare is None else tare,
            kin=self.kin,
            since=since,
            still_samples=self.still_samples,
            params=self.params,
        )
