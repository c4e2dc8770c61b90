"""Timing kernels: the time-optimal phase-plane passes (TOPP) and their derivative, the
jerk-limiting box filter, profile evaluation and the per-sample limit check."""

from __future__ import annotations

import math

import numpy as np

from palletizer.core.motion._kernels._jit import njit

__all__ = ['box_smooth', 'derivative', 'evaluate_profile', 'over_limits', 'topp']


@njit
def derivative(f: np.ndarray, h: float) -> np.ndarray:
    """d/ds of samples f (k >= 3, m) on a uniform grid of step h: central differences inside,
    second-order one-sided at the ends (np.gradient with edge_order=2)."""
    k, m = f.shape
    d = np.empty((k, m))
    for i in range(1, k - 1):
        for j in range(m):
            d[i, j] = (f[i + 1, j] - f[i - 1, j]) / (2 * h)
    for j in range(m):
        d[0, j] = (-3 * f[0, j] + 4 * f[1, j] - f[2, j]) / (2 * h)
        d[k - 1, j] = (3 * f[k - 1, j] - 4 * f[k - 2, j] + f[k - 3, j]) / (2 * h)
    return d


@njit
def topp(
    q: np.ndarray,
    h: float,
    speed_cap: np.ndarray,
    acceleration: float,
    a_lim: np.ndarray,
    v_lim: np.ndarray,
    scale: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Time-optimal rest-to-rest profile of a dense path q (k >= 3, 6) on a uniform grid of
    step h: (dq/ds, d2q/ds2, knot times, path speed at each knot, path acceleration per interval).

    Phase plane u = sdot^2. Each joint j bounds the path acceleration at grid point i as
    |sdd| <= alpha - beta u with alpha = a_j scale_i / |q'_j| and beta = sign(q'_j) q''_j / |q'_j|.
    The maximum-velocity curve is the holdable one: the speed cap, every joint's speed limit and
    alpha / |beta| (sdd = 0 allowed). The forward pass accelerates as hard as every bound allows
    at both ends of each interval (the far end's bound with u_{i+1} = u_i + 2 h sdd substituted,
    dropped where that flips the inequality); the backward pass brakes likewise. Where the
    curvature forbids speeding up the pass holds the speed rather than letting it fall to zero.
    """
    k = q.shape[0]
    dq = derivative(q, h)
    ddq = derivative(dq, h)
    alpha = np.empty((k, 6))
    beta = np.empty((k, 6))
    u = np.empty(k)
    for i in range(k):
        um = speed_cap[i] ** 2
        for j in range(6):
            mag = max(abs(dq[i, j]), 1e-9)
            a = a_lim[j] * scale[i] / mag
            sgn = 1.0 if dq[i, j] > 0 else (-1.0 if dq[i, j] < 0 else 0.0)
            b = sgn * ddq[i, j] / mag
            alpha[i, j] = a
            beta[i, j] = b
            vv = (v_lim[j] / mag) ** 2
            if vv < um:
                um = vv
            if abs(b) > 1e-12:
                hold = a / abs(b)
                if hold < um:
                    um = hold
        u[i] = um
    u[0] = 0.0
    u[k - 1] = 0.0
    h2 = 2.0 * h
    for i in range(k - 1):
        ui = u[i]
        hi = acceleration
        for j in range(6):
            v = alpha[i, j] - beta[i, j] * ui
            if v < hi:
                hi = v
            den = 1.0 + h2 * beta[i + 1, j]
            if den > 1e-6:
                v = alpha[i + 1, j] / den - beta[i + 1, j] / den * ui
                if v < hi:
                    hi = v
        nxt = ui + h2 * (hi if hi > 0.0 else 0.0)
        if nxt < u[i + 1]:
            u[i + 1] = nxt if nxt > 0.0 else 0.0
    for i in range(k - 1, 0, -1):
        ui = u[i]
        lo = -acceleration
        for j in range(6):
            v = -alpha[i, j] - beta[i, j] * ui
            if v > lo:
                lo = v
            den = 1.0 - h2 * beta[i - 1, j]
            if den > 1e-6:
                v = -(alpha[i - 1, j] / den) - beta[i - 1, j] / den * ui
                if v > lo:
                    lo = v
        prev = ui - h2 * (lo if lo < 0.0 else 0.0)
        if prev < u[i - 1]:
            u[i - 1] = prev if prev > 0.0 else 0.0
    sd = np.empty(k)
    for i in range(k):
        sd[i] = math.sqrt(u[i] if u[i] > 0.0 else 0.0)
    t_knot = np.empty(k)
    sdd = np.empty(k - 1)
    t_knot[0] = 0.0
    for i in range(k - 1):
        dt = h2 / max(sd[i] + sd[i + 1], 1e-9)
        t_knot[i + 1] = t_knot[i] + dt
        sdd[i] = (sd[i + 1] - sd[i]) / dt
    return dq, ddq, t_knot, sd, sdd


@njit
def box_smooth(
    t_knot: np.ndarray,
    sd_knot: np.ndarray,
    sdd: np.ndarray,
    duration: float,
    dq: np.ndarray,
    j_lim: np.ndarray,
    step: float,
    share: float,
    length: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A profile's path speed averaged over a sliding window (see timing.limit_jerk):
    (knot times, speed and path position at each knot, acceleration per interval) on a uniform
    time step close to `step`, the window the fewest steps that keep max|q_j'| times the path
    jerk within `share` of joint j's jerk limit. `length` is the path length it covers."""
    n = max(2, math.ceil(duration / step))
    d = duration / n
    kk = t_knot.shape[0]
    sd = np.empty(n + 1)
    i = 0
    for step_i in range(n + 1):
        t = min(step_i * d, duration)
        if t >= duration:
            sd[step_i] = 0.0
            continue
        while i + 1 < kk and t_knot[i + 1] <= t:
            i += 1
        ii = min(i, kk - 2)
        v = sd_knot[ii] + sdd[ii] * (t - t_knot[ii])
        sd[step_i] = v if v > 0.0 else 0.0
    spread = sdd.max() - sdd.min()
    reach = 0.0
    for j in range(dq.shape[1]):
        big = 0.0
        for r in range(dq.shape[0]):
            big = max(big, abs(dq[r, j]))
        reach = max(reach, big / j_lim[j])
    m = max(1, math.ceil(spread * reach / share / d))
    # Full convolution with a box of m samples through one cumulative sum.
    total = n + m
    csum = np.empty(total + 1)
    csum[0] = 0.0
    for r in range(total):
        csum[r + 1] = csum[r] + (sd[r] if r <= n else 0.0)
    sd_f = np.empty(total)
    for r in range(total):
        sd_f[r] = (csum[r + 1] - (csum[r + 1 - m] if r >= m else 0.0)) / m
    sd_f[0] = 0.0
    sd_f[total - 1] = 0.0
    s_f = np.empty(total)
    s_f[0] = 0.0
    for r in range(total - 1):
        s_f[r + 1] = s_f[r] + (sd_f[r + 1] + sd_f[r]) * (d / 2)
    # The filter keeps the sum of the speeds; the trapezoid rounds it by ~1e-6.
    fix = length / s_f[total - 1]
    t_f = np.empty(total)
    acc = np.empty(total - 1)
    for r in range(total):
        sd_f[r] *= fix
        s_f[r] *= fix
        t_f[r] = r * d
    for r in range(total - 1):
        acc[r] = (sd_f[r + 1] - sd_f[r]) / d
    return t_f, sd_f, s_f, acc


@njit
def evaluate_profile(
    t: np.ndarray,
    t_knot: np.ndarray,
    sd_knot: np.ndarray,
    sdd: np.ndarray,
    s_knot: np.ndarray,
    duration: float,
    s_end: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Path coordinate, speed and acceleration at times t (m,) of a profile tabulated on knots
    with constant acceleration between them; at rest at s_end from `duration` on."""
    m = t.shape[0]
    kk = s_knot.shape[0]
    s_out = np.empty(m)
    sd_out = np.empty(m)
    sdd_out = np.empty(m)
    for r in range(m):
        tr = min(max(t[r], 0.0), duration)
        if tr >= duration:
            s_out[r] = s_end
            sd_out[r] = 0.0
            sdd_out[r] = 0.0
            continue
        i = np.searchsorted(t_knot, tr, side='right') - 1
        i = min(max(i, 0), kk - 2)
        dt = tr - t_knot[i]
        a = sdd[i]
        v = sd_knot[i] + a * dt
        s = s_knot[i] + dt * (sd_knot[i] + dt * a / 2)
        s_out[r] = min(max(s, s_knot[i]), s_knot[i + 1])
        sd_out[r] = v if v > 0.0 else 0.0
        sdd_out[r] = a
    return s_out, sd_out, sdd_out


@njit
def over_limits(
    qd: np.ndarray,
    qdd: np.ndarray,
    v_lim: np.ndarray,
    a_lim: np.ndarray,
    j_lim: np.ndarray,
    rate_hz: float,
    check_jerk: bool,
) -> tuple[float, np.ndarray, float]:
    """How far samples (m, 6) exceed the limits, as ratios: the largest |qd| / v over all
    samples, the largest |qdd| / a of each sample (m,), and (with check_jerk, else 0) the
    largest jerk between successive samples |qdd_{r+1} - qdd_r| rate / J."""
    m = qd.shape[0]
    over_v = 0.0
    over_a = np.zeros(m)
    over_j = 0.0
    for r in range(m):
        for j in range(6):
            over_v = max(over_v, abs(qd[r, j]) / v_lim[j])
            over_a[r] = max(over_a[r], abs(qdd[r, j]) / a_lim[j])
            if check_jerk and r + 1 < m:
                over_j = max(over_j, abs(qdd[r + 1, j] - qdd[r, j]) * (rate_hz / j_lim[j]))
    return over_v, over_a, over_j
