"""Kinematics kernels: the DH transforms, the UR10e's analytic IK branches, forward
kinematics to the flange, and following or choosing an IK branch along a path."""

from __future__ import annotations

import math

import numpy as np

from palletizer.core.motion._kernels._jit import njit

__all__ = ['fk_flange', 'follow_branch', 'ik_branches', 'nearest_in_family']


@njit
def _dh_into(out: np.ndarray, theta: float, a: float, d: float, alpha: float) -> None:
    """The DH transform of one joint at angle theta, written into out (4, 4)."""
    ct, st = math.cos(theta), math.sin(theta)
    ca, sa = math.cos(alpha), math.sin(alpha)
    out[0, 0], out[0, 1], out[0, 2], out[0, 3] = ct, -st * ca, st * sa, a * ct
    out[1, 0], out[1, 1], out[1, 2], out[1, 3] = st, ct * ca, -ct * sa, a * st
    out[2, 0], out[2, 1], out[2, 2], out[2, 3] = 0.0, sa, ca, d
    out[3, 0], out[3, 1], out[3, 2], out[3, 3] = 0.0, 0.0, 0.0, 1.0


@njit
def _mul_into(out: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """out = x @ y for 4 x 4 matrices (out must not alias x or y)."""
    for r in range(4):
        for c in range(4):
            out[r, c] = (
                x[r, 0] * y[0, c] + x[r, 1] * y[1, c] + x[r, 2] * y[2, c] + x[r, 3] * y[3, c]
            )


@njit
def _rigid_inv_into(out: np.ndarray, t: np.ndarray) -> None:
    """out = inverse of the rigid transform t (4, 4): (R^T, -R^T p)."""
    for r in range(3):
        for c in range(3):
            out[r, c] = t[c, r]
        out[r, 3] = -(t[0, r] * t[0, 3] + t[1, r] * t[1, 3] + t[2, r] * t[2, 3])
        out[3, r] = 0.0
    out[3, 3] = 1.0


@njit
def _wrap(a: float) -> float:
    """An angle wrapped to [-pi, pi)."""
    return (a + math.pi) % (2.0 * math.pi) - math.pi


@njit
def _in_family(q2: float, q3: float, q4: float, a2: float, a3: float) -> bool:
    """Elbow-up and wrist not flipped (kinematics.branch_family): with the wrist centre at
    r_w = a2 cos q2 + a3 cos(q2 + q3) in the arm plane, sin(q3) r_w < 0 and
    sin(q2 + q3 + q4) r_w > 0."""
    r_w = a2 * math.cos(q2) + a3 * math.cos(q2 + q3)
    return math.sin(q3) * r_w < 0.0 and math.sin(q2 + q3 + q4) * r_w > 0.0


@njit
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


@njit
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


@njit
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


@njit
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
