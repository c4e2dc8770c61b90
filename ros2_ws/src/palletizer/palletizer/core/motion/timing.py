"""Time parameterisation of dense joint paths: path-coordinate profiles (ruckig or time-optimal)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ruckig import InputParameter, Result, Ruckig, Trajectory

from palletizer.core.motion import _kernels as kern
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

    def joints(
        self, s: np.ndarray, sd: np.ndarray, sdd: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q, qd, qdd (m, 6) along the path: cubic Hermite in s, chain rule for the rates
        (kern.hermite_joints)."""
        k = len(self.s)
        if k < 2:
            q = np.repeat(self.q[:1], len(s), axis=0)
            return q, np.zeros_like(q), np.zeros_like(q)
        q, qd, qdd = kern.hermite_joints(
            np.ascontiguousarray(s, dtype=float),
            np.ascontiguousarray(sd, dtype=float),
            np.ascontiguousarray(sdd, dtype=float),
            float(self.s[0]),
            float(self.s[1] - self.s[0]),
            np.ascontiguousarray(self.q, dtype=float),
            np.ascontiguousarray(self.dq, dtype=float),
            np.ascontiguousarray(self.ddq, dtype=float),
        )
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
        t = np.ascontiguousarray(t, dtype=float)
        if self.duration == 0.0 or len(self.s_knot) < 2:
            z = np.zeros_like(t)
            return z + self.s[-1], z, z
        # The end is at rest exactly, whatever the rounding of the last interval.
        return kern.evaluate_profile(
            t,
            self.t_knot,
            self.sd_knot,
            self.sdd,
            self.s_knot,
            float(self.duration),
            float(self.s[-1]),
        )

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
    q = np.ascontiguousarray(q, dtype=float)
    dq = kern.derivative(q, float(s[1] - s[0]))
    ddq = kern.derivative(dq, float(s[1] - s[0]))
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
    q = np.ascontiguousarray(q, dtype=float)
    a_lim = _TOPP_ACCEL_SHARE * np.asarray(limits.acceleration, dtype=float)
    v_lim = np.asarray(limits.velocity, dtype=float) * (_JERK_SPEED_SHARE if jerk_limited else 1.0)
    scale = np.ones(k) if accel_scale is None else np.asarray(accel_scale, dtype=float)
    # The phase-plane passes (kern.topp). Its maximum-velocity curve is the holdable one: the
    # largest u at which sdd = 0 is still allowed, every joint's curvature term within its
    # budget. The wider curve of u at which only some nonzero sdd is allowed left the passes
    # holding the speed against the bounds, and the samples over the acceleration limits at
    # rounded corners: 70 local re-timings on the 50 bench pick+place plans, 5 with this one,
    # and the moves 0.2 % shorter.
    dq, ddq, t_knot, sd, sdd = kern.topp(
        q,
        h,
        np.ascontiguousarray(speed_cap, dtype=float),
        float(acceleration),
        a_lim,
        v_lim,
        np.ascontiguousarray(scale),
    )
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
    t_f, sd_f, s_f, sdd_f = kern.box_smooth(
        seg.t_knot,
        seg.sd_knot,
        seg.sdd,
        float(seg.duration),
        np.ascontiguousarray(seg.dq, dtype=float),
        np.asarray(limits.jerk, dtype=float),
        _JERK_TABLE_STEP,
        _JERK_SHARE,
        float(seg.s[-1] - seg.s[0]),
    )
    return PathTiming(
        seg.s, seg.q, seg.dq, seg.ddq, float(t_f[-1]), t_f, sd_f, sdd_f, s_f + seg.s[0]
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
    v_lim = np.asarray(limits.velocity, dtype=float)
    a_lim = np.asarray(limits.acceleration, dtype=float)
    j_lim = np.asarray(limits.jerk, dtype=float)
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
            over_v, over_a, over_j = kern.over_limits(
                qd, qdd, v_lim, a_lim, j_lim, float(rate_hz), bool(check_jerk and n > 1)
            )
            factor = max(over_v, math.sqrt(float(over_a.max())), over_j ** (1.0 / 3.0))
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
