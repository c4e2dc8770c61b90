"""Path kernels: the Hermite joint interpolation and the blended Cartesian path with its
curvature-bounded speed cap."""

from __future__ import annotations

import math

import numpy as np

from palletizer.core.motion._kernels._jit import njit

__all__ = ['blend_path', 'hermite_joints']


@njit
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


@njit
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


@njit
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
    """A polyline of legs with its corners rounded (see core.motion.path._blended):
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
