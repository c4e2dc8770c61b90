"""Compiled inner loops of the motion math (numba): the time-optimal phase-plane passes, the
jerk-limiting filter, profile evaluation, the Hermite joint interpolation, the sample limit
check, the analytic IK, the wrist-against-mount check and the swept-volume collision test.

Each kernel is a plain Python function over numpy arrays, compiled on first use and cached on
disk (`scripts/setup` compiles them once, so nodes start warm). They run sample by sample where
numpy needs dozens of whole-array passes and their temporaries: a checked pick + place plan
took 10 ms in numpy, most of it per-call overhead. The arithmetic is written in the same order
as the numpy it replaced (no fast-math: IEEE results, no reassociation), and each kernel's
Python definition stays callable as `kernel.py_func`; the tests hold both to the same result.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    'box_smooth',
    'derivative',
    'evaluate_profile',
    'first_hit',
    'fk_flange',
    'follow_branch',
    'hermite_joints',
    'ik_branches',
    'max_under',
    'nearest_in_family',
    'over_limits',
    'topp',
    'wrists_near_mount',
    'arm_box_hits',
]

_JIT = {'cache': True, 'nogil': True}


@njit(**_JIT)
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


@njit(**_JIT)
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


@njit(**_JIT)
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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
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


@njit(**_JIT)
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


@njit(**_JIT)
def hermite_joints(
    s: np.ndarray,
    sd: np.ndarray,
    sdd: np.ndarray,
    s0: float,
    h: float,
    q: np.ndarray,
    dq: np.ndarray,
    ddq: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, qd, qdd (m, 6) along a dense path (k >= 2 points from s0, step h): cubic Hermite in s
    for the position and its own derivative for dq/ds (so positions and rates agree where the
    curvature changes fast), linear interpolation for d2q/ds2, the chain rule for the rates."""
    m = s.shape[0]
    k = q.shape[0]
    q_out = np.empty((m, 6))
    qd_out = np.empty((m, 6))
    qdd_out = np.empty((m, 6))
    top = k - 1 - 1e-12
    for r in range(m):
        u = min(max((s[r] - s0) / h, 0.0), top)
        i = int(math.floor(u))
        f = u - i
        v = sd[r]
        v2 = v**2
        a = sdd[r]
        for j in range(6):
            q0 = q[i, j]
            q1 = q[i + 1, j]
            m0 = dq[i, j] * h
            m1 = dq[i + 1, j] * h
            c2 = 3 * (q1 - q0) - 2 * m0 - m1
            c3 = 2 * (q0 - q1) + m0 + m1
            q_out[r, j] = ((c3 * f + c2) * f + m0) * f + q0
            dqds = (m0 + f * (2.0 * c2 + 3.0 * f * c3)) / h
            d2 = ddq[i, j] + f * (ddq[i + 1, j] - ddq[i, j])
            qd_out[r, j] = dqds * v
            qdd_out[r, j] = d2 * v2 + dqds * a
    return q_out, qd_out, qdd_out


@njit(**_JIT)
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


# Kinematics -----------------------------------------------------------------------------------
@njit(**_JIT)
def _dh_into(out: np.ndarray, theta: float, a: float, d: float, alpha: float) -> None:
    """The DH transform of one joint at angle theta, written into out (4, 4)."""
    ct, st = math.cos(theta), math.sin(theta)
    ca, sa = math.cos(alpha), math.sin(alpha)
    out[0, 0], out[0, 1], out[0, 2], out[0, 3] = ct, -st * ca, st * sa, a * ct
    out[1, 0], out[1, 1], out[1, 2], out[1, 3] = st, ct * ca, -ct * sa, a * st
    out[2, 0], out[2, 1], out[2, 2], out[2, 3] = 0.0, sa, ca, d
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit(**_JIT)
def _mul_into(out: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """out = x @ y for 4 x 4 matrices (out must not alias x or y)."""
    for r in range(4):
        for c in range(4):
            out[r, c] = (
                x[r, 0] * y[0, c] + x[r, 1] * y[1, c] + x[r, 2] * y[2, c] + x[r, 3] * y[3, c]
            )


@njit(**_JIT)
def _rigid_inv_into(out: np.ndarray, t: np.ndarray) -> None:
    """out = inverse of the rigid transform t (4, 4): (R^T, -R^T p)."""
    for r in range(3):
        for c in range(3):
            out[r, c] = t[c, r]
        out[r, 3] = -(t[0, r] * t[0, 3] + t[1, r] * t[1, 3] + t[2, r] * t[2, 3])
        out[3, r] = 0.0
    out[3, 3] = 1.0


@njit(**_JIT)
def _wrap(a: float) -> float:
    """An angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


@njit(**_JIT)
def _in_family(q2: float, q3: float, q4: float, a2: float, a3: float) -> bool:
    """Elbow-up and wrist not flipped (kinematics.branch_family): with the wrist centre at
    r_w = a2 cos q2 + a3 cos(q2 + q3) in the arm plane, sin(q3) r_w < 0 and
    sin(q2 + q3 + q4) r_w > 0."""
    r_w = a2 * math.cos(q2) + a3 * math.cos(q2 + q3)
    return math.sin(q3) * r_w < 0.0 and math.sin(q2 + q3 + q4) * r_w > 0.0


@njit(**_JIT)
def ik_branches(
    T: np.ndarray,
    wanted: np.ndarray,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Analytic UR IK of flange poses T (n, 4, 4) in the base frame (Hawkins 2013):
    (q (n, 8, 6) [rad], valid (n, 8)); branch b = 4 shoulder + 2 wrist + elbow, only those
    with wanted[b] solved (the others NaN and invalid). q1, q2, q4 wrapped to [-pi, pi); q3,
    q5 come from arccos and q6 from arctan2. dh_a, dh_d, dh_alpha (6,): the DH table."""
    n = T.shape[0]
    a2, a3, d4, d6 = dh_a[1], dh_a[2], dh_d[3], dh_d[5]
    q = np.full((n, 8, 6), np.nan)
    valid = np.zeros((n, 8), dtype=np.bool_)
    t01 = np.empty((4, 4))
    t45 = np.empty((4, 4))
    t56 = np.empty((4, 4))
    t46 = np.empty((4, 4))
    inv = np.empty((4, 4))
    tmp = np.empty((4, 4))
    t14 = np.empty((4, 4))
    for p in range(n):
        Tp = T[p]
        x6, y6 = Tp[0, 3], Tp[1, 3]
        x5 = x6 - d6 * Tp[0, 2]
        y5 = y6 - d6 * Tp[1, 2]
        r05 = math.hypot(x5, y5)
        c1 = d4 / r05 if r05 > 0 else math.inf
        ok1 = abs(c1) <= 1.0
        phi = math.acos(min(max(c1, -1.0), 1.0))
        psi = math.atan2(y5, x5)
        r00, r01, r10, r11 = Tp[0, 0], Tp[0, 1], Tp[1, 0], Tp[1, 1]
        for s in range(2):
            if not (wanted[4 * s] or wanted[4 * s + 1] or wanted[4 * s + 2] or wanted[4 * s + 3]):
                continue
            q1 = psi + (1.0 if s == 0 else -1.0) * phi + math.pi / 2
            s1, cq1 = math.sin(q1), math.cos(q1)
            c5 = (x6 * s1 - y6 * cq1 - d4) / d6
            ok5 = abs(c5) <= 1.0
            _dh_into(t01, q1, dh_a[0], dh_d[0], dh_alpha[0])
            for w in range(2):
                if not (wanted[4 * s + 2 * w] or wanted[4 * s + 2 * w + 1]):
                    continue
                q5 = (1.0 if w == 0 else -1.0) * math.acos(min(max(c5, -1.0), 1.0))
                s5 = math.sin(q5)
                # Wrist singularity (s5 = 0): q6 is free; pick 0 rather than dividing by zero.
                if abs(s5) > 1e-12:
                    q6 = math.atan2((-r01 * s1 + r11 * cq1) / s5, (r00 * s1 - r10 * cq1) / s5)
                else:
                    q6 = 0.0
                # T14 = inv(T01) T06 inv(T45 T56): reduce the problem to the planar 3R chain.
                _dh_into(t45, q5, dh_a[4], dh_d[4], dh_alpha[4])
                _dh_into(t56, q6, dh_a[5], dh_d[5], dh_alpha[5])
                _mul_into(t46, t45, t56)
                _rigid_inv_into(inv, t01)
                _mul_into(tmp, inv, Tp)
                _rigid_inv_into(inv, t46)
                _mul_into(t14, tmp, inv)
                px = t14[0, 3] - d4 * t14[0, 1]
                py = t14[1, 3] - d4 * t14[1, 1]
                r13 = math.hypot(px, py)
                c3 = (r13**2 - a2**2 - a3**2) / (2.0 * a2 * a3)
                ok3 = abs(c3) <= 1.0
                for e in range(2):
                    b = 4 * s + 2 * w + e
                    if not wanted[b]:
                        continue
                    q3 = (1.0 if e == 0 else -1.0) * math.acos(min(max(c3, -1.0), 1.0))
                    r13s = r13 if r13 > 1e-12 else 1.0
                    q2 = -math.atan2(py, -px) + math.asin(
                        min(max(a3 * math.sin(q3) / r13s, -1.0), 1.0)
                    )
                    # T34 = inv(T12 T23) T14: q4 is the remaining planar rotation.
                    q4 = math.atan2(t14[1, 0], t14[0, 0]) - q2 - q3
                    q[p, b, 0] = _wrap(q1)
                    q[p, b, 1] = _wrap(q2)
                    q[p, b, 2] = q3
                    q[p, b, 3] = _wrap(q4)
                    q[p, b, 4] = q5
                    q[p, b, 5] = q6
                    valid[p, b] = ok1 and ok5 and ok3
    return q, valid


@njit(**_JIT)
def wrists_near_mount(
    q: np.ndarray,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
    pedestal_radius: float,
    base_radius: float,
    shoulder_height: float,
    link_radius: float,
) -> np.ndarray:
    """(n,) True where a wrist joint origin (frames 3, 4, 5 of the DH chain) of q (n, 6) lies
    below the shoulder and closer to the base axis than the base link (above z = 0) or the
    pedestal (below) allows, plus the wrist's own link radius [m]."""
    n = q.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    t = np.empty((4, 4))
    m = np.empty((4, 4))
    nxt = np.empty((4, 4))
    for p in range(n):
        _dh_into(t, q[p, 0], dh_a[0], dh_d[0], dh_alpha[0])
        for i in range(1, 5):
            _dh_into(m, q[p, i], dh_a[i], dh_d[i], dh_alpha[i])
            _mul_into(nxt, t, m)
            t[:, :] = nxt
            if i >= 2:
                z = t[2, 3]
                need = (pedestal_radius if z < 0.0 else base_radius) + link_radius
                if z < shoulder_height and math.hypot(t[0, 3], t[1, 3]) < need:
                    out[p] = True
    return out


@njit(**_JIT)
def arm_box_hits(
    q: np.ndarray,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
    T_base_world: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    margin: float,
) -> np.ndarray:
    """(n,) index of the first box (lo, hi: (m, 3) world AABB corners [m]) that the forearm or
    a wrist link of q (n, 6) comes within `margin` [m] of; -1 where none does. The links are
    the capsules of the robot self-filter (heightmap_fusion.RobotBody.shapes, Menagerie's
    UR10e): forearm 0.058 m radius, 0.039 m out from the DH line; wrist 1 0.05 m; wrists 2
    and 3 0.046 m; each sampled along its axis every 4 cm at most."""
    n = q.shape[0]
    m = lo.shape[0]
    out = np.full(n, -1, dtype=np.int64)
    t = np.empty((4, 4))
    a = np.empty((4, 4))
    nxt = np.empty((4, 4))
    org = np.empty((7, 3))  # DH frame origins 0..6, world
    zax = np.empty((7, 3))  # their z axes, world
    seg = np.empty((4, 2, 3))
    rad = np.array((0.058, 0.05, 0.046, 0.046))
    for p in range(n):
        t[:, :] = T_base_world
        for c in range(3):
            org[0, c] = t[c, 3]
            zax[0, c] = t[c, 2]
        for i in range(6):
            _dh_into(a, q[p, i], dh_a[i], dh_d[i], dh_alpha[i])
            _mul_into(nxt, t, a)
            t[:, :] = nxt
            for c in range(3):
                org[i + 1, c] = t[c, 3]
                zax[i + 1, c] = t[c, 2]
        for c in range(3):
            ax = zax[1, c]  # joints 2-4 are parallel
            seg[0, 0, c] = org[2, c] + 0.039 * ax
            seg[0, 1, c] = org[3, c] + 0.039 * ax
            seg[1, 0, c] = org[3, c] + 0.039 * ax
            seg[1, 1, c] = org[4, c] + 0.03 * zax[3, c]
            seg[2, 0, c] = org[4, c] - 0.03 * zax[4, c]
            seg[2, 1, c] = org[5, c]
            seg[3, 0, c] = org[5, c] - 0.03 * zax[5, c]
            seg[3, 1, c] = org[6, c]
        for s_ in range(4):
            length = 0.0
            for c in range(3):
                length += (seg[s_, 1, c] - seg[s_, 0, c]) ** 2
            k = max(2, int(math.ceil(math.sqrt(length) / 0.04)) + 1)
            r = rad[s_] + margin
            for j in range(k):
                f = j / (k - 1)
                for b in range(m):
                    d2 = 0.0
                    for c in range(3):
                        v = seg[s_, 0, c] + f * (seg[s_, 1, c] - seg[s_, 0, c])
                        if v < lo[b, c]:
                            d2 += (lo[b, c] - v) ** 2
                        elif v > hi[b, c]:
                            d2 += (v - hi[b, c]) ** 2
                    if d2 < r * r:
                        out[p] = b
                        break
                if out[p] >= 0:
                    break
            if out[p] >= 0:
                break
    return out


# Collision ------------------------------------------------------------------------------------
@njit(**_JIT)
def max_under(
    heights: np.ndarray,
    ox: float,
    oy: float,
    cs: float,
    cx: float,
    cy: float,
    hx: float,
    hy: float,
    yaw: float,
) -> float:
    """Highest height (above the deck) of the grid cells (ny, nx; origin ox, oy; cell cs)
    touching a rectangle (centre, half-sizes, yaw): a cell counts when its centre lies within
    the rectangle grown by half a cell diagonal. -inf when none does."""
    ny, nx = heights.shape
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    ex, ey = c * hx + s * hy, s * hx + c * hy  # AABB half-sizes of the rotated rectangle
    grow = cs * math.sqrt(0.5)
    i0 = max(0, math.floor((cx - ex - grow - ox) / cs))
    i1 = min(nx, math.ceil((cx + ex + grow - ox) / cs))
    j0 = max(0, math.floor((cy - ey - grow - oy) / cs))
    j1 = min(ny, math.ceil((cy + ey + grow - oy) / cs))
    best = -math.inf
    cyaw, syaw = math.cos(yaw), math.sin(yaw)
    for j in range(j0, j1):
        y = oy + (j + 0.5) * cs - cy
        for i in range(i0, i1):
            x = ox + (i + 0.5) * cs - cx
            if heights[j, i] > best:
                u = x * cyaw + y * syaw
                v = -x * syaw + y * cyaw
                if abs(u) <= hx + grow and abs(v) <= hy + grow:
                    best = heights[j, i]
    return best


@njit(**_JIT)
def first_hit(
    poses: np.ndarray,
    parts: np.ndarray,
    box_lo: np.ndarray,
    box_hi: np.ndarray,
    heights: np.ndarray,
    hf_geom: np.ndarray,
    tolerance: float,
) -> tuple[int, int]:
    """The first tool-down pose (n, 4: x, y, z, yaw) whose swept parts hit an obstacle:
    (pose index, what) with what the box index, or -1 for the height field; (-1, -1) when
    none is hit. Contacts shallower than `tolerance` [m] are ignored.

    parts (P, 6): per rigid part under the tool (tool body, carried carton), its centre offset
    in the tool frame (x, y), half-sizes (x, y) and z range relative to the TCP (lo, hi).
    box_lo, box_hi (B, 3): axis-aligned obstacles. heights (ny, nx) above the deck with
    hf_geom = (origin x, origin y, cell size, deck z, use it: 1 or 0). Per pose the parts are
    tested in order, each against the boxes in order then the height field (a separating-axis
    test in the plane where their z ranges overlap).
    """
    n = poses.shape[0]
    ox, oy, cs, deck_z = hf_geom[0], hf_geom[1], hf_geom[2], hf_geom[3]
    use_hf = hf_geom[4] > 0.0
    top_z = deck_z + heights.max() if use_hf else -math.inf
    # A vertical stretch repeats one footprint: keep the last height-field answer per part.
    last_key = np.full((parts.shape[0], 3), np.nan)
    last_top = np.zeros(parts.shape[0])
    for p in range(n):
        x, y, z, yaw = poses[p, 0], poses[p, 1], poses[p, 2], poses[p, 3]
        cyaw, syaw = math.cos(yaw), math.sin(yaw)
        c, s = abs(cyaw), abs(syaw)
        for k in range(parts.shape[0]):
            pox, poy, hx, hy = parts[k, 0], parts[k, 1], parts[k, 2], parts[k, 3]
            # Tool y runs against world y: world offset = rot_z(yaw) @ (ox, -oy).
            cx = x + cyaw * pox + syaw * poy
            cy = y + syaw * pox - cyaw * poy
            z_lo, z_hi = z + parts[k, 4], z + parts[k, 5]
            ex = c * hx + s * hy
            ey = s * hx + c * hy
            for b in range(box_lo.shape[0]):
                if min(z_hi, box_hi[b, 2]) - max(z_lo, box_lo[b, 2]) <= tolerance:
                    continue
                bhx = (box_hi[b, 0] - box_lo[b, 0]) / 2
                bhy = (box_hi[b, 1] - box_lo[b, 1]) / 2
                dx = cx - (box_lo[b, 0] + box_hi[b, 0]) / 2
                dy = cy - (box_lo[b, 1] + box_hi[b, 1]) / 2
                if abs(dx) > ex + bhx or abs(dy) > ey + bhy:
                    continue
                if abs(dx * cyaw + dy * syaw) > hx + (c * bhx + s * bhy):
                    continue
                if abs(-dx * syaw + dy * cyaw) > hy + (s * bhx + c * bhy):
                    continue
                return p, b
            if use_hf and z_lo + tolerance < top_z:
                if cx == last_key[k, 0] and cy == last_key[k, 1] and yaw == last_key[k, 2]:
                    top = last_top[k]
                else:
                    top = deck_z + max_under(heights, ox, oy, cs, cx, cy, hx, hy, yaw)
                    last_key[k, 0], last_key[k, 1], last_key[k, 2] = cx, cy, yaw
                    last_top[k] = top
                if top > z_lo + tolerance:
                    return p, -1
    return -1, -1


# Paths ----------------------------------------------------------------------------------------
@njit(**_JIT)
def _interp_sorted(x: np.ndarray, xp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """np.interp for ascending x and xp (one merge walk)."""
    out = np.empty(x.shape[0])
    j = 0
    last = xp.shape[0] - 1
    for r in range(x.shape[0]):
        xr = x[r]
        if xr <= xp[0]:
            out[r] = fp[0]
            continue
        if xr >= xp[last]:
            out[r] = fp[last]
            continue
        while xp[j + 1] <= xr:
            j += 1
        out[r] = fp[j] + (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]) * (xr - xp[j])
    return out


@njit(**_JIT)
def blend_path(
    P: np.ndarray,
    d: np.ndarray,
    cap_leg: np.ndarray,
    blend_radius: float,
    path_step: float,
    path_step_yaw: float,
    angular_speed: float,
    accel: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A polyline of legs with its corners rounded (see MotionPlanner._blended_path):
    (poses (n+1, 4), arc length s (n+1,), leg index (n+1,), speed cap (n+1,)) on a uniform
    arc-length grid of at most path_step [m] and path_step_yaw [rad].

    P (m+1, 4): the corners with yaw; d (m,): each leg's length (> 0); cap_leg (m,): each leg's
    speed [m/s]. Corners between non-collinear legs become quartic Beziers from the corner
    radius before to after it (blend_radius, at most 40 % of either leg), their first and last
    three control points on the legs. The cap is also held to the yaw rate limit and to
    sqrt(accel / curvature).
    """
    m = d.shape[0]
    u = np.empty((m, 3))
    for i in range(m):
        for c in range(3):
            u[i, c] = (P[i + 1, c] - P[i, c]) / d[i]
    r = np.zeros(m + 1)
    for i in range(1, m):
        if u[i - 1, 0] * u[i, 0] + u[i - 1, 1] * u[i, 1] + u[i - 1, 2] * u[i, 2] < 1 - 1e-9:
            r[i] = min(blend_radius, 0.4 * d[i - 1], 0.4 * d[i])
    D = np.zeros(m + 1)
    for i in range(m):
        D[i + 1] = D[i] + d[i]
    fine = path_step / 4
    # Fine points along the legs and corners, then resampled uniformly in arc length.
    total = 1
    for i in range(m):
        total += max(1, math.ceil((D[i + 1] - r[i + 1] - (D[i] + r[i])) / fine))
        if i + 1 < m and r[i + 1] > 0:
            total += max(2, math.ceil(2 * r[i + 1] / fine))
    xyz = np.empty((total, 3))
    along = np.empty(total)
    w = 0
    for i in range(m):
        a, b = D[i] + r[i], D[i + 1] - r[i + 1]
        k = max(1, math.ceil((b - a) / fine))
        step = 1.0 / k
        for j in range(k):
            t = j * step
            for c in range(3):
                xyz[w, c] = P[i, c] + (a - D[i] + t * (b - a)) * u[i, c]
            along[w] = a + t * (b - a)
            w += 1
        if i + 1 < m and r[i + 1] > 0:
            ri = r[i + 1]
            k = max(2, math.ceil(2 * ri / fine))
            step = 1.0 / k
            for j in range(k):
                t = j * step
                w0 = (1 - t) ** 4
                w1 = 4 * (1 - t) ** 3 * t
                w2 = 6 * (1 - t) ** 2 * t**2
                w3 = 4 * (1 - t) * t**3
                w4 = t**4
                for c in range(3):
                    cc = P[i + 1, c]
                    xyz[w, c] = (
                        w0 * (cc - ri * u[i, c])
                        + w1 * (cc - ri / 2 * u[i, c])
                        + w2 * cc
                        + w3 * (cc + ri / 2 * u[i + 1, c])
                        + w4 * (cc + ri * u[i + 1, c])
                    )
                along[w] = D[i + 1] - ri + 2 * ri * t
                w += 1
    for c in range(3):
        xyz[w, c] = P[m, c]
    along[w] = D[m]
    arc = np.zeros(total)
    for j in range(1, total):
        dx = xyz[j, 0] - xyz[j - 1, 0]
        dy = xyz[j, 1] - xyz[j - 1, 1]
        dz = xyz[j, 2] - xyz[j - 1, 2]
        arc[j] = arc[j - 1] + math.sqrt(dx * dx + dy * dy + dz * dz)
    yaw_total = 0.0
    first_turn, last_turn = -1, -1
    for i in range(m):
        dyaw = abs(P[i + 1, 3] - P[i, 3])
        yaw_total += dyaw
        if dyaw > 1e-12:
            if first_turn < 0:
                first_turn = i
            last_turn = i
    n = max(math.ceil(arc[total - 1] / path_step), math.ceil(yaw_total / path_step_yaw), 2)
    s = np.empty(n + 1)
    h = arc[total - 1] / n
    for j in range(n):
        s[j] = j * h
    s[n] = arc[total - 1]
    out = np.empty((n + 1, 4))
    for c in range(3):
        out[:, c] = _interp_sorted(s, arc, xyz[:, c])
    along_s = _interp_sorted(s, arc, along)
    # The yaw turns along the legs that turn it, on a smoothstep in the distance along them:
    # its rate is continuous (zero at both ends), as a moving wrist needs.
    for j in range(n + 1):
        out[j, 3] = P[0, 3]
    if first_turn >= 0:
        a, b = D[first_turn], D[last_turn + 1]
        y0, y1 = P[first_turn, 3], P[last_turn + 1, 3]
        for j in range(n + 1):
            tau = min(max((along_s[j] - a) / (b - a), 0.0), 1.0)
            out[j, 3] = y0 + (y1 - y0) * (tau * tau * (3.0 - 2.0 * tau))
    leg = np.empty(n + 1, dtype=np.int64)
    cap = np.empty(n + 1)
    li = 0
    for j in range(n + 1):
        # The first leg whose end lies at or beyond the point.
        while li < m - 1 and D[li + 1] < along_s[j] - 1e-12:
            li += 1
        leg[j] = li
        cap[j] = cap_leg[li]
    for j in range(n + 1):
        if j == 0:
            rate = (out[1, 3] - out[0, 3]) / (s[1] - s[0])
        elif j == n:
            rate = (out[n, 3] - out[n - 1, 3]) / (s[n] - s[n - 1])
        else:
            rate = (out[j + 1, 3] - out[j - 1, 3]) / (s[j + 1] - s[j - 1])
        cap[j] = min(cap[j], angular_speed / max(abs(rate), 1e-12))
    for j in range(1, n):
        kx = out[j + 1, 0] - 2 * out[j, 0] + out[j - 1, 0]
        ky = out[j + 1, 1] - 2 * out[j, 1] + out[j - 1, 1]
        kz = out[j + 1, 2] - 2 * out[j, 2] + out[j - 1, 2]
        kappa = math.sqrt(kx * kx + ky * ky + kz * kz) / h**2
        if kappa > 1e-3:
            cap[j] = min(cap[j], math.sqrt(accel / kappa))
    return out, s, leg, cap


@njit(**_JIT)
def fk_flange(
    q: np.ndarray, dh_a: np.ndarray, dh_d: np.ndarray, dh_alpha: np.ndarray
) -> np.ndarray:
    """T_base_flange (n, 4, 4) of joint angles q (n, 6) from the DH table."""
    n = q.shape[0]
    out = np.empty((n, 4, 4))
    m = np.empty((4, 4))
    t = np.empty((4, 4))
    for p in range(n):
        _dh_into(out[p], q[p, 0], dh_a[0], dh_d[0], dh_alpha[0])
        for i in range(1, 6):
            _dh_into(m, q[p, i], dh_a[i], dh_d[i], dh_alpha[i])
            _mul_into(t, out[p], m)
            out[p, :, :] = t
    return out


@njit(**_JIT)
def follow_branch(
    poses: np.ndarray,
    T_base_world: np.ndarray,
    T_tcp_flange: np.ndarray,
    branch: int,
    q0: np.ndarray,
    n_fade: int,
    lower: np.ndarray,
    upper: np.ndarray,
    max_step: float,
    dh_a: np.ndarray,
    dh_d: np.ndarray,
    dh_alpha: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Joint path (n, 6) of tool-down TCP poses (n, 4: x, y, z, yaw in the world) along one
    analytic IK branch, starting at q0: (q, bad (n,), start error [rad]).

    The branch's solutions are unwrapped sample to sample and shifted by whole turns to start
    next to q0; the start's residual (q0 off exact tool-down) fades out over the first n_fade
    samples so the path starts exactly at q0. bad marks samples without a solution, outside
    the elbow-up wrist-not-flipped family or the joint limits, or more than max_step [rad] from
    the previous sample on some joint. The start error is max |q[0] - q0| before the fade
    (inf when the first sample has no solution).
    """
    n = poses.shape[0]
    T = np.empty((n, 4, 4))
    tw = np.zeros((4, 4))
    tmp = np.empty((4, 4))
    tw[2, 2] = -1.0
    tw[3, 3] = 1.0
    for p in range(n):
        c, s = math.cos(poses[p, 3]), math.sin(poses[p, 3])
        # rot_z(yaw) @ diag(1, -1, -1): the tool pointing straight down.
        tw[0, 0], tw[0, 1], tw[0, 3] = c, s, poses[p, 0]
        tw[1, 0], tw[1, 1], tw[1, 3] = s, -c, poses[p, 1]
        tw[2, 3] = poses[p, 2]
        _mul_into(tmp, T_base_world, tw)
        _mul_into(T[p], tmp, T_tcp_flange)
    wanted = np.zeros(8, dtype=np.bool_)
    wanted[branch] = True
    q_all, ok_all = ik_branches(T, wanted, dh_a, dh_d, dh_alpha)
    two_pi = 2.0 * math.pi
    bad = np.empty(n, dtype=np.bool_)
    raw = np.empty((n, 6))
    for p in range(n):
        bad[p] = not ok_all[p, branch]
        for j in range(6):
            raw[p, j] = 0.0 if bad[p] else q_all[p, branch, j]
    q = np.empty((n, 6))
    for j in range(6):
        acc = 0.0
        q[0, j] = raw[0, j]
        for p in range(1, n):
            dj = raw[p, j] - raw[p - 1, j]
            dj -= two_pi * np.round(dj / two_pi)
            acc += dj
            q[p, j] = acc + raw[0, j]
        shift = np.round((q0[j] - q[0, j]) / two_pi) * two_pi
        for p in range(n):
            q[p, j] += shift
    start_err = math.inf
    if not bad[0]:
        start_err = 0.0
        for j in range(6):
            start_err = max(start_err, abs(q[0, j] - q0[j]))
    res = np.empty(6)
    for j in range(6):
        res[j] = q0[j] - q[0, j]
    for p in range(min(n_fade, n)):
        w = 1.0 if n_fade == 1 else (0.0 if p == n_fade - 1 else p * (-1.0 / (n_fade - 1)) + 1.0)
        for j in range(6):
            q[p, j] += res[j] * w
    a2, a3 = dh_a[1], dh_a[2]
    for p in range(n):
        if not _in_family(q[p, 1], q[p, 2], q[p, 3], a2, a3):
            bad[p] = True
        for j in range(6):
            if not (lower[j] - 1e-9 <= q[p, j] <= upper[j] + 1e-9):
                bad[p] = True
            if p > 0 and abs(q[p, j] - q[p - 1, j]) > max_step:
                bad[p] = True
    return q, bad, start_err


@njit(**_JIT)
def nearest_in_family(
    sols: np.ndarray,
    q_ref: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    weights: np.ndarray,
    a2: float,
    a3: float,
) -> tuple[np.ndarray, bool]:
    """Of IK solutions sols (k, 6) [rad] (wrapped to [-pi, pi) here), the one nearest q_ref in
    the elbow-up, wrist-not-flipped family (_in_family): (q (6,), found).

    A solution counts when finite and within [lower, upper]; each joint then takes the 2 pi
    equivalent nearest q_ref that stays within the limits (the solution is dropped where none
    does); distance is the weighted Euclidean sqrt(sum((w (q - q_ref))^2)), the first of equals
    wins.
    """
    two_pi = 2.0 * math.pi
    best = np.zeros(6)
    best_d = math.inf
    found = False
    cand = np.empty(6)
    for r in range(sols.shape[0]):
        ok = True
        for j in range(6):
            v = (sols[r, j] + math.pi) % two_pi - math.pi
            if not (math.isfinite(v) and lower[j] - 1e-9 <= v <= upper[j] + 1e-9):
                ok = False
                break
            k = np.round((q_ref[j] - v) / two_pi)
            pick = math.nan
            pick_d = math.inf
            for dk in (-1.0, 0.0, 1.0):
                c = v + (k + dk) * two_pi
                if lower[j] - 1e-9 <= c <= upper[j] + 1e-9:
                    dist = abs(c - q_ref[j])
                    if dist < pick_d:
                        pick, pick_d = c, dist
            if not math.isfinite(pick):
                ok = False
                break
            cand[j] = pick
        if not ok:
            continue
        if not _in_family(cand[1], cand[2], cand[3], a2, a3):
            continue
        d = 0.0
        for j in range(6):
            d += ((cand[j] - q_ref[j]) * weights[j]) ** 2
        d = math.sqrt(d)
        if d < best_d:
            best_d = d
            best[:] = cand
            found = True
    return best, found
