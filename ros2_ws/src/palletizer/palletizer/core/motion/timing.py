"""Time parameterisation of dense joint paths: path-coordinate profiles (ruckig or time-optimal)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ruckig import InputParameter, Result, Ruckig, Trajectory

from palletizer.core.motion.errors import MotionError
from palletizer.core.motion.kinematics import JointLimits

__all__ = [
    'JointTrajectory',
    'PathLimits',
    'PathTiming',
    'SegmentTiming',
    'limit_jerk',
    'sample_segments',
    'time_optimal',
    'time_segment',
]

# Verified-sample rescaling: each retry slows the profile by the measured excess plus 1 %.
_MAX_RESCALE = 8


@dataclass(frozen=True, eq=False)
class JointTrajectory:
    """Joint trajectory sampled at a fixed rate.

    t (m,) [s] from 0; q (m, 6) [rad]; qd (m, 6) [rad/s]; qdd (m, 6) [rad/s^2].
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    @property
    def duration(self) -> float:
        return float(self.t[-1]) if len(self.t) else 0.0

    def __len__(self) -> int:
        return len(self.t)


@dataclass(frozen=True)
class PathLimits:
    """Limits of one segment's path coordinate s [m] (Cartesian length, yaw folded in)."""

    velocity: float
    acceleration: float
    jerk: float


@dataclass(frozen=True, eq=False)
class _DensePath:
    """A dense joint path q(s) (k, 6) on a uniform s grid with its path derivatives."""

    s: np.ndarray
    q: np.ndarray
    dq: np.ndarray  # dq/ds (k, 6)
    ddq: np.ndarray  # d2q/ds2 (k, 6)

    def _table(self) -> np.ndarray:
        """Per-interval coefficients (k - 1, 48): Hermite c0..c3 of q, then dq, ddq and their
        increments, for linear interpolation of the path derivatives."""
        table = self.__dict__.get('_coef')
        if table is None:
            h = self.s[1] - self.s[0]
            q0, q1 = self.q[:-1], self.q[1:]
            m0, m1 = self.dq[:-1] * h, self.dq[1:] * h
            c2 = 3 * (q1 - q0) - 2 * m0 - m1
            c3 = 2 * (q0 - q1) + m0 + m1
            dq0, ddq0 = self.dq[:-1], self.ddq[:-1]
            table = np.concatenate(
                [q0, m0, c2, c3, dq0, self.dq[1:] - dq0, ddq0, self.ddq[1:] - ddq0], axis=1
            )
            self.__dict__['_coef'] = table
        return table

    def joints(
        self, s: np.ndarray, sd: np.ndarray, sdd: np.ndarray, with_q: bool = True
    ) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
        """q, qd, qdd (m, 6) along the path: cubic Hermite in s, chain rule for the rates.

        with_q=False skips the positions (the limit checks only need the rates).
        """
        k = len(self.s)
        if k < 2:
            q = np.repeat(self.q[:1], len(s), axis=0)
            return q, np.zeros_like(q), np.zeros_like(q)
        h = self.s[1] - self.s[0]
        u = np.clip((s - self.s[0]) / h, 0.0, k - 1 - 1e-12)
        i = np.floor(u).astype(int)
        f = (u - i)[:, None]
        # One gather of the per-interval table instead of one per coefficient.
        g = self._table()[i]
        q = None
        if with_q:
            # Hermite cubic per interval in Horner form: q = ((c3 f + c2) f + c1) f + c0.
            q = ((g[:, 18:24] * f + g[:, 12:18]) * f + g[:, 6:12]) * f + g[:, 0:6]
        # The rate is the derivative of the Hermite cubic itself, so positions and rates agree
        # where the path's curvature changes fast (rounded corners); the second derivative
        # is the smoother linear interpolation of the grid's.
        dqds = (g[:, 6:12] + f * (2.0 * g[:, 12:18] + 3.0 * f * g[:, 18:24])) / h
        d2qds2 = g[:, 36:42] + f * g[:, 42:48]
        qd = dqds * sd[:, None]
        qdd = d2qds2 * (sd**2)[:, None] + dqds * sdd[:, None]
        return q, qd, qdd


@dataclass(frozen=True, eq=False)
class SegmentTiming(_DensePath):
    """A dense joint path and its rest-to-rest ruckig profile s(t) (jerk-limited)."""

    duration: float
    # Ruckig phase tables (7 phases): durations, jerks and the state at each phase start.
    phase_t: np.ndarray
    phase_j: np.ndarray
    phase_a: np.ndarray
    phase_v: np.ndarray
    phase_p: np.ndarray

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Path coordinate, speed and acceleration (s, sd, sdd) at times t (m,) [s]."""
        if self.duration == 0.0:
            z = np.zeros_like(t)
            return z + self.s[-1], z, z
        t = np.clip(t, 0.0, self.duration)
        ends = np.cumsum(self.phase_t)
        k = np.minimum(np.searchsorted(ends, t, side='right'), 6)
        starts = ends - self.phase_t
        dt = t - starts[k]
        j, a, v, p = self.phase_j[k], self.phase_a[k], self.phase_v[k], self.phase_p[k]
        s = p + dt * (v + dt * (a / 2 + dt * j / 6))
        sd = v + dt * (a + dt * j / 2)
        sdd = a + dt * j
        return np.clip(s, self.s[0], self.s[-1]), sd, sdd

    def rescaled(self, factor: float) -> SegmentTiming:
        """The same profile run `factor` times slower (t -> factor t)."""
        return _rescaled(self, factor)


@dataclass(frozen=True, eq=False)
class PathTiming(_DensePath):
    """A dense joint path and a profile s(t) tabulated on knots, constant path acceleration
    between them: the path's own grid (time_optimal) or the path coordinate at a uniform time
    step (limit_jerk).

    s_knot (n,) [m] the knots, t_knot (n,) [s] when each is passed, sd_knot (n,) path speed
    there, sdd (n - 1,) path acceleration per interval.
    """

    duration: float
    t_knot: np.ndarray
    sd_knot: np.ndarray
    sdd: np.ndarray
    s_knot: np.ndarray

    def evaluate(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Path coordinate, speed and acceleration (s, sd, sdd) at times t (m,) [s]."""
        t = np.asarray(t, dtype=float)
        sk = self.s_knot
        if self.duration == 0.0 or len(sk) < 2:
            z = np.zeros_like(t)
            return z + self.s[-1], z, z
        t = np.clip(t, 0.0, self.duration)
        i = np.clip(np.searchsorted(self.t_knot, t, side='right') - 1, 0, len(sk) - 2)
        dt = t - self.t_knot[i]
        sdd = self.sdd[i]
        sd = np.maximum(self.sd_knot[i] + sdd * dt, 0.0)
        s = np.clip(sk[i] + dt * (self.sd_knot[i] + dt * sdd / 2), sk[i], sk[i + 1])
        end = t >= self.duration
        # The end is at rest exactly, whatever the rounding of the last interval.
        return np.where(end, self.s[-1], s), np.where(end, 0.0, sd), np.where(end, 0.0, sdd)

    def rescaled(self, factor: float) -> PathTiming:
        """The same profile run `factor` times slower (t -> factor t)."""
        return PathTiming(
            self.s,
            self.q,
            self.dq,
            self.ddq,
            self.duration * factor,
            self.t_knot * factor,
            self.sd_knot / factor,
            self.sdd / factor**2,
            self.s_knot,
        )


def _derivative(f: np.ndarray, h: float) -> np.ndarray:
    """d/ds of samples f (k >= 3, ...) on a uniform grid of step h: central differences inside,
    second-order one-sided at the ends (np.gradient edge_order=2, without its overhead)."""
    d = np.empty_like(f)
    d[1:-1] = (f[2:] - f[:-2]) / (2 * h)
    d[0] = (-3 * f[0] + 4 * f[1] - f[2]) / (2 * h)
    d[-1] = (3 * f[-1] - 4 * f[-2] + f[-3]) / (2 * h)
    return d


def _ruckig(length: float, lim: PathLimits) -> tuple[float, list[np.ndarray]]:
    """Rest-to-rest 1-DOF profile over `length`: (duration, [t, j, a, v, p] phase tables)."""
    otg = Ruckig(1)
    inp = InputParameter(1)
    inp.current_position = [0.0]
    inp.target_position = [length]
    inp.max_velocity = [lim.velocity]
    inp.max_acceleration = [lim.acceleration]
    inp.max_jerk = [lim.jerk]
    traj = Trajectory(1)
    result = otg.calculate(inp, traj)
    if result not in (Result.Working, Result.Finished):
        raise MotionError(f'ruckig failed with {result} for length {length!r} and limits {lim!r}')
    prof = traj.profiles[0][0]
    if prof.brake.duration > 0 or prof.accel.duration > 0:
        raise MotionError('ruckig returned a brake/accel pre-phase for a rest-to-rest profile')
    tables = [np.asarray(prof.t), np.asarray(prof.j)]
    tables += [np.asarray(prof.a)[:7], np.asarray(prof.v)[:7], np.asarray(prof.p)[:7]]
    return float(traj.duration), tables


def time_segment(
    s: np.ndarray,
    q: np.ndarray,
    cartesian: PathLimits,
    limits: JointLimits,
    curvature_share: float = 0.3,
) -> SegmentTiming:
    """Time-parameterise one dense path q(s) (k, 6) on a uniform grid s (k,) [m], rest to rest.

    Method (documented choice): ruckig on the 1-DOF path coordinate, so the TCP stays on the
    straight line and only its timing is shaped. Path limits are the Cartesian ones tightened by
    each joint: sdot <= v_j / max|q_j'|, sddot <= (1 - share) a_j / max|q_j'|, sdddot <=
    (1 - share) J_j / max|q_j'|; `share` of the acceleration budget is left for the curvature
    term q''(s) sdot^2. That term is not bounded a priori (a global bound on |q''| made moves
    40 % slower); instead `sample_segments` checks every sample against the joint speed and
    acceleration limits and slows the offending segment in time until all samples pass.
    """
    k = len(s)
    if k < 2 or s[-1] - s[0] <= 0:
        z = np.zeros((max(k, 1), 6))
        zeros7 = np.zeros(7)
        return SegmentTiming(
            np.array([0.0]),
            q[:1].copy(),
            z[:1],
            z[:1],
            0.0,
            zeros7,
            zeros7,
            zeros7,
            zeros7,
            np.full(7, 0.0),
        )
    dq = _derivative(q, float(s[1] - s[0]))
    ddq = _derivative(dq, float(s[1] - s[0]))
    d1 = np.abs(dq).max(axis=0)
    v_lim = np.asarray(limits.velocity)
    a_lim = np.asarray(limits.acceleration)
    j_lim = np.asarray(limits.jerk)
    eps = 1e-12
    vel = min(cartesian.velocity, float(np.min(v_lim / np.maximum(d1, eps))))
    acc = min(
        cartesian.acceleration,
        float(np.min((1 - curvature_share) * a_lim / np.maximum(d1, eps))),
    )
    jerk = min(cartesian.jerk, float(np.min((1 - curvature_share) * j_lim / np.maximum(d1, eps))))
    length = float(s[-1] - s[0])
    duration, (pt, pj, pa, pv, pp) = _ruckig(length, PathLimits(vel, acc, jerk))
    return SegmentTiming(s - s[0], q, dq, ddq, duration, pt, pj, pa, pv, pp)


# Share of each joint's acceleration limit the time-optimal pass may plan with: the explicit
# steps on a 5 mm grid misjudge the curvature term by a few per cent, and a violation found
# on the samples slows the whole segment, so a small margin up front is cheaper.
_TOPP_ACCEL_SHARE = 0.95


def _passes(u: list, fa: list, fb: list, ba: list, bb: list, h2: float, acc: float) -> list:
    """Forward (accelerate as hard as allowed) and backward (brake as hard as allowed)
    passes over u = sdot^2, in place on plain floats.

    fa[i], fb[i] hold, for the interval from grid point i to i + 1, the alphas and betas of
    12 upper bounds sdd <= alpha - beta u_i: each joint's at point i, and at point i + 1 with
    u_{i+1} = u_i + h2 sdd substituted, so the acceleration holds at both ends of the
    interval where the curvature term changes fast. ba[i - 1], bb[i - 1] likewise the lower
    bounds sdd >= -alpha - beta u_i for braking from point i back to i - 1. Unrolled: this loop is
    most of the planning time.
    """
    k = len(u)
    for i in range(k - 1):
        ui = u[i]
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = fa[i]
        b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11 = fb[i]
        hi = min(
            acc, a0 - b0 * ui, a1 - b1 * ui, a2 - b2 * ui, a3 - b3 * ui, a4 - b4 * ui,
            a5 - b5 * ui, a6 - b6 * ui, a7 - b7 * ui, a8 - b8 * ui, a9 - b9 * ui,
            a10 - b10 * ui, a11 - b11 * ui,
        )  # fmt: skip
        # Where the curvature forbids speeding up, hold the speed rather than let it fall to
        # zero (which would stop the path there); the samples are verified afterwards.
        nxt = ui + h2 * (hi if hi > 0.0 else 0.0)
        if nxt < u[i + 1]:
            u[i + 1] = nxt if nxt > 0.0 else 0.0
    for i in range(k - 1, 0, -1):
        ui = u[i]
        a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11 = ba[i - 1]
        b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11 = bb[i - 1]
        lo = max(
            -acc, -a0 - b0 * ui, -a1 - b1 * ui, -a2 - b2 * ui, -a3 - b3 * ui, -a4 - b4 * ui,
            -a5 - b5 * ui, -a6 - b6 * ui, -a7 - b7 * ui, -a8 - b8 * ui, -a9 - b9 * ui,
            -a10 - b10 * ui, -a11 - b11 * ui,
        )  # fmt: skip
        prev = ui - h2 * (lo if lo < 0.0 else 0.0)
        if prev < u[i - 1]:
            u[i - 1] = prev if prev > 0.0 else 0.0
    return u


def _two_ended(alpha: np.ndarray, beta: np.ndarray, h2: float) -> tuple[list, ...]:
    """The (alpha, beta) pairs of _passes: per interval, each joint's bound at its near end
    and, with the speed change over the interval substituted, at its far end (dropped where
    that substitution flips the inequality: it then bounds the other side)."""
    with np.errstate(divide='ignore', invalid='ignore'):
        den_f = 1.0 + h2 * beta[1:]
        ok_f = den_f > 1e-6
        af = np.where(ok_f, alpha[1:] / den_f, np.inf)
        bf = np.where(ok_f, beta[1:] / den_f, 0.0)
        den_b = 1.0 - h2 * beta[:-1]
        ok_b = den_b > 1e-6
        ab = np.where(ok_b, alpha[:-1] / den_b, np.inf)
        bb = np.where(ok_b, beta[:-1] / den_b, 0.0)
    fa = np.concatenate([alpha[:-1], af], axis=1)
    fb = np.concatenate([beta[:-1], bf], axis=1)
    ba = np.concatenate([alpha[1:], ab], axis=1)
    bbeta = np.concatenate([beta[1:], bb], axis=1)
    return fa.tolist(), fb.tolist(), ba.tolist(), bbeta.tolist()


def time_optimal(
    s: np.ndarray,
    q: np.ndarray,
    speed_cap: np.ndarray,
    acceleration: float,
    limits: JointLimits,
    accel_scale: np.ndarray | None = None,
    jerk_limited: bool = False,
) -> PathTiming:
    """Time-optimal rest-to-rest profile of a dense path q(s) (k, 6) on a uniform grid s (k,).

    speed_cap (k,) [m/s]: the largest path speed at each grid point (the Cartesian speed of the
    stretch it lies on); acceleration [m/s^2]: the Cartesian bound on |sdd|. Every joint's speed
    and acceleration limit shapes the profile locally (numerical integration of the phase plane
    u = sdot^2: maximum-velocity curve, forward pass accelerating, backward pass braking), so a
    path is slow only where its joints need it, unlike one speed for the whole segment.
    Acceleration is piecewise constant; with `jerk_limited` the profile is then smoothed so
    every joint's jerk stays within its limit (`limit_jerk`). `sample_segments` verifies the
    joint speed and acceleration (and jerk) of every sample. accel_scale (k,): share of the
    joint acceleration limits allowed at each grid point (1 when None); `sample_segments`
    lowers it where samples exceeded the limits.
    """
    k = len(s)
    if k < 3 or s[-1] - s[0] <= 0:
        z = np.zeros((1, 6))
        zero = np.zeros(1)
        return PathTiming(np.array([0.0]), q[:1].copy(), z, z, 0.0, zero, zero, np.zeros(0), zero)
    h = float(s[1] - s[0])
    dq = _derivative(q, h)
    ddq = _derivative(dq, h)
    eps = 1e-9
    mag = np.maximum(np.abs(dq), eps)
    a_lim = _TOPP_ACCEL_SHARE * np.asarray(limits.acceleration)
    v_lim = np.asarray(limits.velocity) * (_JERK_SPEED_SHARE if jerk_limited else 1.0)
    scale = np.ones(k) if accel_scale is None else np.asarray(accel_scale, dtype=float)
    alpha = a_lim * scale[:, None] / mag
    beta = np.sign(dq) * ddq / mag
    u_max = np.minimum(np.asarray(speed_cap, dtype=float) ** 2, np.min((v_lim / mag) ** 2, axis=1))
    # Maximum-velocity curve of the acceleration limits, holdable: the largest u at which
    # sdd = 0 is still allowed, every joint's curvature term within its budget, |q''| u <= a
    # (it implies the pairwise room between joints' bounds and the Cartesian bound). The
    # wider curve of u at which only some nonzero sdd is allowed left the passes holding the
    # speed against the bounds, and the samples over the acceleration limits at rounded
    # corners: 70 local re-timings on the 50 bench pick+place plans, 5 with this one, and the
    # moves 0.2 % shorter.
    with np.errstate(divide='ignore'):
        hold = np.where(np.abs(beta) > 1e-12, alpha / np.abs(beta), np.inf).min(axis=1)
    u_max = np.minimum(u_max, hold)
    u_max[0] = u_max[-1] = 0.0
    u = _passes(u_max.tolist(), *_two_ended(alpha, beta, 2.0 * h), 2.0 * h, acceleration)
    sd = np.sqrt(np.maximum(np.asarray(u), 0.0))
    dt = 2 * h / np.maximum(sd[:-1] + sd[1:], eps)
    t_knot = np.concatenate([[0.0], np.cumsum(dt)])
    sdd = (sd[1:] - sd[:-1]) / dt
    s0 = s - s[0]
    out = PathTiming(s0, q, dq, ddq, float(t_knot[-1]), t_knot, sd, sdd, s0)
    if jerk_limited:
        out = limit_jerk(out, limits)
    # What it takes to time the path again with a lower local acceleration budget.
    out.__dict__['_retime'] = (s, q, speed_cap, acceleration, limits, scale, jerk_limited)
    return out


# Share of each joint's jerk limit the smoothing window is sized for; the path-curvature
# terms of the joint jerk (those with q'' and q''' of the path) take the rest, verified on
# the samples.
_JERK_SHARE = 0.8
# Time step [s] of the smoothed profile's table (2 per 500 Hz controller period).
_JERK_TABLE_STEP = 1e-3
# Share of each joint's speed limit the profile to be smoothed may use: the box filter moves
# speed along the path by a few millimetres, past where a joint's limit tightens. Bench
# plans (scripts/bench motion, 40 pick+place): at 1.0 most segments came out 0.1 % over and
# were slowed by 1.1 %; at 0.995 none was over on speed, the moves 1 % shorter in all.
_JERK_SPEED_SHARE = 0.995


def limit_jerk(seg: PathTiming, limits: JointLimits) -> PathTiming:
    """The profile `seg` made jerk-limited: its path speed averaged over a sliding window T.

    A box filter on the speed (the finite-impulse-response way to an S-curve) keeps the
    acceleration within the original's range and turns each acceleration step into a ramp:
    the path jerk is at most (max sdd - min sdd) / T. T is the smallest whole table step that
    keeps max |q_j'(s)| times that within _JERK_SHARE of joint j's jerk limit; the move takes
    exactly T longer and covers the same path, from rest to rest. Speeds never exceed the
    original's largest in the window, so the joint limits hold up to how fast they change
    along the path; `sample_segments` verifies every sample (the path-curvature terms of the
    joint jerk, which a wider window barely reduces, slow the segment there).
    """
    if seg.duration == 0.0 or len(seg.s) < 3:
        return seg
    n = max(2, math.ceil(seg.duration / _JERK_TABLE_STEP))
    d = seg.duration / n
    _, sd, _ = seg.evaluate(np.arange(n + 1) * d)
    spread = float(seg.sdd.max() - seg.sdd.min())
    reach = float(np.max(np.abs(seg.dq).max(axis=0) / np.asarray(limits.jerk)))
    m = max(1, math.ceil(spread * reach / _JERK_SHARE / d))
    # Full convolution with a box of m samples, through one cumulative sum.
    csum = np.concatenate([[0.0], np.cumsum(np.concatenate([sd, np.zeros(m - 1)]))])
    sd_f = (csum[1:] - np.concatenate([np.zeros(m), csum[1 : len(csum) - m]])) / m
    sd_f[0] = sd_f[-1] = 0.0
    s_f = np.concatenate([[0.0], np.cumsum((sd_f[1:] + sd_f[:-1]) * (d / 2))])
    # The sum of the speeds is kept by the filter; the trapezoid rounds it by ~1e-6.
    fix = (seg.s[-1] - seg.s[0]) / s_f[-1]
    sd_f *= fix
    s_f *= fix
    return PathTiming(
        seg.s,
        seg.q,
        seg.dq,
        seg.ddq,
        (len(sd_f) - 1) * d,
        np.arange(len(sd_f)) * d,
        sd_f,
        np.diff(sd_f) / d,
        s_f + seg.s[0],
    )


def _rescaled(seg: SegmentTiming, factor: float) -> SegmentTiming:
    """The same profile run `factor` times slower (t -> factor t)."""
    return SegmentTiming(
        seg.s,
        seg.q,
        seg.dq,
        seg.ddq,
        seg.duration * factor,
        seg.phase_t * factor,
        seg.phase_j / factor**3,
        seg.phase_a / factor**2,
        seg.phase_v / factor,
        seg.phase_p,
    )


def sample_segments(
    segments: list[SegmentTiming | PathTiming],
    limits: JointLimits,
    rate_hz: float,
    check_jerk: bool = False,
) -> JointTrajectory:
    """Chain rest-to-rest segments and sample them on one uniform grid at `rate_hz`.

    Each segment is stretched to a whole number of periods (by less than one period), so the
    global grid is each segment's own grid and segments are checked independently. Every sample
    is checked against the joint speed and acceleration limits, and with `check_jerk` the jerk
    between successive samples against the jerk limits; a segment that exceeds them (the
    curvature terms are not bounded a priori) is slowed in time by the measured excess and
    resampled. Raises MotionError if that does not converge or positions leave the limits.
    """
    if rate_hz <= 0:
        raise MotionError(f'rate_hz = {rate_hz!r}; expected > 0')
    dt = 1.0 / rate_hz
    v_lim = np.asarray(limits.velocity)
    a_lim = np.asarray(limits.acceleration)
    j_lim = np.asarray(limits.jerk)
    ts, qs, qds, qdds = [], [], [], []
    offset = 0.0
    last: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    for seg in segments:
        if seg.duration == 0.0:
            continue
        for attempt in range(_MAX_RESCALE):
            retime = seg.__dict__.get('_retime')
            n = max(1, math.ceil(seg.duration / dt - 1e-9))
            stretch = n * dt / seg.duration
            seg = seg.rescaled(stretch)
            t = np.arange(n + 1) * dt
            s_t, sd_t, sdd_t = seg.evaluate(t)
            q, qd, qdd = seg.joints(s_t, sd_t, sdd_t)
            over_v = float(np.max(np.abs(qd) / v_lim))
            over_a = np.max(np.abs(qdd) / a_lim, axis=1)
            factor = max(over_v, math.sqrt(float(over_a.max())))
            if check_jerk and n > 1:
                over_j = float(np.max(np.abs(np.diff(qdd, axis=0)) * (rate_hz / j_lim)))
                factor = max(factor, over_j ** (1.0 / 3.0))
            if factor <= 1.0:
                break
            if (
                retime is not None
                and over_v <= 1.0
                and over_a.max() > 1.0
                and attempt < _MAX_RESCALE // 2
            ):
                # Where the curvature changes fast (rounded corners) the grid misjudges the
                # acceleration: lower the budget around the offending samples and time again,
                # rather than slowing the whole segment.
                s_grid, q_grid, cap, acc, lim, scale, smooth = retime
                worst = np.ones(len(scale))
                for i in np.nonzero(over_a > 1.0)[0]:
                    g = int(np.searchsorted(s_grid - s_grid[0], s_t[i]))
                    lo, hi = max(g - 3, 0), min(g + 3, len(scale))
                    worst[lo:hi] = np.maximum(worst[lo:hi], min(over_a[i] * 1.02, 2.0))
                again = time_optimal(s_grid, q_grid, cap, acc, lim, scale / worst, smooth)
                # Only when that stays a local change; else the uniform slow-down below.
                if again.duration <= seg.duration * factor:
                    seg = again
                    continue
            seg = seg.rescaled(factor * 1.01)
        else:
            raise MotionError('time parameterisation did not converge within the joint limits')
        # The last sample is at rest where the next segment starts: keep it only at the end.
        ts.append(t[:-1] + offset)
        qs.append(q[:-1])
        qds.append(qd[:-1])
        qdds.append(qdd[:-1])
        last = (q[-1:], qd[-1:], qdd[-1:])
        offset += n * dt
    if last is None:  # nothing moves: one sample at the start
        q0 = segments[0].q[:1].copy() if segments else np.zeros((1, 6))
        return JointTrajectory(np.zeros(1), q0, np.zeros_like(q0), np.zeros_like(q0))
    t = np.append(np.concatenate(ts), offset)
    q = np.concatenate([*qs, last[0]])
    qd = np.concatenate([*qds, last[1]])
    qdd = np.concatenate([*qdds, last[2]])
    if not np.all(limits.within(q)):
        raise MotionError('sampled trajectory leaves the joint position limits')
    return JointTrajectory(t, q, qd, qdd)
