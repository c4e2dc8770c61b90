"""In-motion weighing: mass and centre of mass from wrist wrench samples taken while the tool moves.

The held carton is a rigid body. The sensor reads, in its own (flange) frame, the wrench it
exerts on everything below it (the sign of core.gauge: a still payload reads F = -m g_s):

    F   = m f + (alpha x) (m c) + (omega x)(omega x) (m c)
    tau = (m c) x f + I_o alpha + omega x I_o omega

with f = a_o - g the sensor origin's acceleration less gravity, omega and alpha the tool's
angular velocity and acceleration, c the CoM and I_o the inertia about the sensor origin, all
in the sensor frame. Both rows are linear in the ten inertial parameters (m, m c, I_o): the
standard payload regressor of robot identification (Atkeson, An and Hollerbach, 1986). A lift
and a cross excite m and m c well but I_o hardly, so I_o is not fitted: it is the carton's box
of the observed dims at the carton's mass, moved to the current CoM estimate (parallel axis),
m K(c), taken as known at the last pass's m and c (a fixed point, `passes` of it).

Neglected: the carton's flex on the cups and its contents' slosh (it is one rigid body); the
error of the box inertia (it enters the torque rows only through the tool's rotation, which a
tool-down move keeps about the vertical, where a box's off-diagonal terms vanish); a lag
between the wrench and the motion samples (it shifts a by the jerk times the lag: 2 ms at
motion.cartesian_jerk's 20 m/s^3 is 0.04 m/s^2, 0.4 % of g, of either sign as the
acceleration rises and falls; the synthetic tests share their instants); the gripper model's error (its 2.55 kg at 3 m/s^2 is 7.7 N, so a 1 % error of
it is 0.08 N, 0.4 % of a 2 kg carton's weight, at the peak only).

The empty tool was zeroed at rest (the sensor read zero there), so a sample is the carton's
wrench plus the gripper's inertial wrench less the one it had when zeroed, plus the drift since
the zero and noise. The gripper is known (`RigidLoad`, sim/models/vgp20.xml), so its part is
subtracted. With `fit_bias` six bias terms are fitted beside the load instead of trusting the
zero; the motion must then excite enough for the fit's covariance to say so.

When to hand the estimate on: the fit's covariance, the information matrix inverted and scaled
by the residual variance (never below the datasheet's), gives sigma(m) and the planar sigma(c);
the estimate converges once both are below `share` of their bounds (1 % of the mass, 3 mm) and
at least `min_samples` samples are in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from palletizer.core.contracts import Observation, PackageSpec, floats3
from palletizer.core.errors import PalletizerError
from palletizer.core.gauge import (
    GaugeReading,
    R_sensor_package,
    WeighError,
    carton_centre_in_sensor,
    lid_in_tool,
)
from palletizer.core.motion.kinematics import UR10eKinematics, yaw_of

__all__ = [
    'VGP20',
    'InMotionWeigher',
    'MotionEstimate',
    'MotionGaugeParams',
    'RigidLoad',
    'SensorMotion',
    'box_inertia',
    'empty_tool_bias',
    'regressor',
    'rigid_wrench',
    'sensor_motion',
    'still_motion',
    'weigher_for_grasp',
]


def _skew(v: np.ndarray) -> np.ndarray:
    """[v]x (..., 3, 3) of vectors v (..., 3): [v]x w = v x w."""
    z = np.zeros(v.shape[:-1])
    x, y, w = v[..., 0], v[..., 1], v[..., 2]
    return np.stack(
        [np.stack([z, -w, y], -1), np.stack([w, z, -x], -1), np.stack([-y, x, z], -1)], -2
    )


def _vee(S: np.ndarray) -> np.ndarray:
    """The vector (..., 3) of the skew part of S (..., 3, 3)."""
    return 0.5 * np.stack(
        [S[..., 2, 1] - S[..., 1, 2], S[..., 0, 2] - S[..., 2, 0], S[..., 1, 0] - S[..., 0, 1]], -1
    )


def box_inertia(mass: float, dims: Sequence[float]) -> np.ndarray:
    """Inertia (3, 3) [kg m^2] of a uniform box of full sizes dims (L, W, H) [m] about its
    centre, in its own axes."""
    L, W, H = (float(d) for d in dims)
    return np.diag([W * W + H * H, L * L + H * H, L * L + W * W]) * (mass / 12.0)


@dataclass(frozen=True)
class RigidLoad:
    """A rigid body in the sensor frame: mass [kg], CoM (3,) [m], inertia (3, 3) [kg m^2]
    about the CoM."""

    mass: float
    com: tuple[float, float, float]
    inertia: tuple[tuple[float, float, float], ...]

    def params(self) -> np.ndarray:
        """The ten inertial parameters (m, m c, I_o) of `regressor`, I_o about the sensor
        origin (parallel axis) as (xx, xy, xz, yy, yz, zz)."""
        c = np.asarray(self.com, dtype=float)
        I_o = np.asarray(self.inertia, dtype=float) + self.mass * (
            c @ c * np.eye(3) - np.outer(c, c)
        )
        return np.concatenate([[self.mass], self.mass * c, I_o[np.triu_indices(3)]])


# The OnRobot VGP20 below the sensor, as the simulated cell models it (sim/models/vgp20.xml
# `inertial`: 2.55 kg, CoM 38 mm below the flange, diagonal inertia); the sim tests keep the two
# equal.
VGP20 = RigidLoad(2.55, (0.0, 0.0, 0.038), ((0.0081, 0, 0), (0, 0.0158, 0), (0, 0, 0.0221)))


@dataclass(frozen=True, eq=False)
class SensorMotion:
    """The sensor frame's motion per sample, expressed in that frame.

    t (n,) [s]; f (n, 3) [m/s^2]: the origin's acceleration less gravity, a - g (at rest,
    plumb, flange z down: (0, 0, -g)); omega (n, 3) [rad/s]; alpha (n, 3) [rad/s^2];
    gravity (n, 3) [m/s^2]: gravity in the sensor frame (plumb: (0, 0, g)).
    """

    t: np.ndarray
    f: np.ndarray
    omega: np.ndarray
    alpha: np.ndarray
    gravity: np.ndarray

    def __len__(self) -> int:
        return len(self.t)

    def __getitem__(self, s: slice) -> SensorMotion:
        return SensorMotion(self.t[s], self.f[s], self.omega[s], self.alpha[s], self.gravity[s])


def sensor_motion(
    kin: UR10eKinematics,
    t: ArrayLike,
    q: ArrayLike,
    qd: ArrayLike,
    qdd: ArrayLike,
    g: float = 9.81,
    h: float = 1e-3,
) -> SensorMotion:
    """The flange's motion from joint angles, rates and accelerations (n, 6) at times t (n,).

    The flange pose is the project's forward kinematics (kin.fk less the TCP offset) at
    q +- h qd + h^2/2 qdd, the joint path's second-order expansion, so central differences give
    the Cartesian velocity and acceleration (J qdd + Jdot qd) to O(h^2): with h = 1 ms and
    the UR10e's rates the truncation is ~1e-5 m/s^2 and the rounding ~1e-10. omega = vee(Rdot
    R^T) and alpha = vee(Rddot R^T) (the omega^2 part of Rddot R^T is symmetric).
    The rates are the controller's commanded ones (a UR streams no joint accelerations).
    """
    qa = np.atleast_2d(np.asarray(q, dtype=float))
    step = h * np.atleast_2d(np.asarray(qd, dtype=float))
    curve = 0.5 * h * h * np.atleast_2d(np.asarray(qdd, dtype=float))
    T_tcp_flange = np.linalg.inv(kin.T_flange_tcp)
    T0 = kin.fk(qa) @ T_tcp_flange
    Tm = kin.fk(qa - step + curve) @ T_tcp_flange
    Tp = kin.fk(qa + step + curve) @ T_tcp_flange
    R, Rm, Rp = T0[:, :3, :3], Tm[:, :3, :3], Tp[:, :3, :3]
    acc = (Tp[:, :3, 3] - 2 * T0[:, :3, 3] + Tm[:, :3, 3]) / (h * h)
    Rt = np.transpose(R, (0, 2, 1))
    omega_w = _vee((Rp - Rm) / (2 * h) @ Rt)
    alpha_w = _vee((Rp - 2 * R + Rm) / (h * h) @ Rt)
    g_w = np.array([0.0, 0.0, -g])  # world z up
    return SensorMotion(
        np.asarray(t, dtype=float).reshape(-1),
        np.einsum('nji,nj->ni', R, acc - g_w),
        np.einsum('nji,nj->ni', R, omega_w),
        np.einsum('nji,nj->ni', R, alpha_w),
        np.einsum('nji,j->ni', R, g_w),
    )


def still_motion(motion: SensorMotion) -> SensorMotion:
    """The same poses as if the tool stood still in each: gravity only, no rotation. What a
    weigher that ignores the motion assumes (the static gauge's model)."""
    z = np.zeros_like(motion.f)
    return SensorMotion(motion.t, -motion.gravity, z, z, motion.gravity)


def regressor(motion: SensorMotion) -> np.ndarray:
    """The payload regressor (n, 6, 10): wrench [F, tau] = Y @ (m, m c, I_o), I_o about the
    sensor origin as (xx, xy, xz, yy, yz, zz)."""
    f, w, a = motion.f, motion.omega, motion.alpha
    n = len(f)
    Y = np.zeros((n, 6, 10))
    Wx = _skew(w)
    Y[:, :3, 0] = f
    Y[:, :3, 1:4] = _skew(a) + Wx @ Wx
    Y[:, 3:, 1:4] = -_skew(f)

    def L(v: np.ndarray) -> np.ndarray:  # I v = L(v) @ (xx, xy, xz, yy, yz, zz)
        x, y, z = v[:, 0], v[:, 1], v[:, 2]
        o = np.zeros(n)
        return np.stack(
            [
                np.stack([x, y, z, o, o, o], -1),
                np.stack([o, x, o, y, z, o], -1),
                np.stack([o, o, x, o, y, z], -1),
            ],
            -2,
        )

    Y[:, 3:, 4:] = L(a) + Wx @ L(w)
    return Y


def rigid_wrench(load: RigidLoad, motion: SensorMotion) -> np.ndarray:
    """The wrench (n, 6) [N, N m] a rigid load puts on the sensor, by Newton-Euler about its
    CoM (independent of `regressor`, which the tests check it against)."""
    c = np.asarray(load.com, dtype=float)
    I_c = np.asarray(load.inertia, dtype=float)
    w, a = motion.omega, motion.alpha
    a_c = motion.f + np.cross(a, c) + np.cross(w, np.cross(w, c))
    F = load.mass * a_c
    tau = np.cross(c, F) + a @ I_c.T + np.cross(w, w @ I_c.T)
    return np.concatenate([F, tau], axis=1)


@dataclass(frozen=True)
class MotionGaugeParams:
    """The in-motion weigher's noise model and convergence rule.

    force_sigma_n, torque_sigma_nm: the sensor's noise per axis and sample (configs/cell.yaml
      wrench.noise_force_n and noise_torque_nm: the UR10e datasheet's precision as 3 sigma);
    mass_bound: the mass error bound, a fraction of the mass (1 %, docs/perception.md);
    com_bound_m: the planar CoM error bound (3 mm, the same table);
    share: the estimate converges once sigma(m) <= share x the mass bound and the planar
      sigma(c) <= share x the CoM bound. 0.4 puts the p95 of a Gaussian error at 0.78 of the
      mass bound (1.96 sigma) and of the planar one at 0.69 (2.45 sigma per axis, the planar
      sigma being sqrt 2 sigma per axis), leaving the rest for what the noise model does not
      hold (the drift since the zero, the tool's model);
    min_samples: never before this many (0.2 s at 500 Hz): the residual variance of fewer
      is itself too noisy to scale the covariance by;
    com_prior_share: the CoM prior, per axis, is the carton's geometric centre with sigma =
      this x the half size (a CoM uniform in the box has sigma = half / sqrt 3 = 0.58 half);
      it decides only the axis the motion does not excite (the vertical, on a plumb lift);
    fit_bias: fit six sensor bias terms beside the load instead of trusting the zero;
    passes: fixed-point passes of the inertia term I_o = m K(c).
    """

    force_sigma_n: float = 1.667
    torque_sigma_nm: float = 0.0667
    mass_bound: float = 0.01
    com_bound_m: float = 0.003
    share: float = 0.4
    min_samples: int = 100
    com_prior_share: float = 1.0 / math.sqrt(3.0)
    fit_bias: bool = False
    passes: int = 5
    g: float = 9.81

    def __post_init__(self) -> None:
        for name in ('force_sigma_n', 'torque_sigma_nm', 'mass_bound', 'com_bound_m', 'share'):
            v = getattr(self, name)
            if not math.isfinite(v) or v <= 0:
                raise PalletizerError(f'MotionGaugeParams.{name} = {v!r}; expected > 0')
        if self.min_samples < 1 or self.passes < 1:
            raise PalletizerError(
                f'MotionGaugeParams: min_samples = {self.min_samples}, passes = {self.passes}; '
                'expected both >= 1'
            )


def empty_tool_bias(
    wrench: ArrayLike,
    motion: SensorMotion,
    *,
    tool: RigidLoad = VGP20,
    zero_motion: SensorMotion | None = None,
    params: MotionGaugeParams | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The sensor's bias since its zero (6,) [N, N m] and its sigma (6,), from samples (n, 6) of
    the empty tool moving (the approach to a pick, the retract from a place).

    A reading less the tool's known wrench change since the zero is the bias plus noise, so
    the bias is the mean and its sigma the noise over sqrt(n): the datasheet's, or the spread
    of the samples where that is larger (a tool model that does not hold, or a bump). Over a
    whole rest-to-rest move the mean acceleration is zero, so an error of the tool's mass
    averages out of the force's mean. The drift moves the bias by at most 0.021 N/s
    (configs/cell.yaml wrench), little over the seconds between this and the weighing.
    """
    p = params or MotionGaugeParams()
    w = np.asarray(wrench, dtype=float).reshape(-1, 6)
    if len(w) != len(motion) or len(w) < 2:
        raise PalletizerError(
            f'empty_tool_bias: {len(w)} wrench samples for {len(motion)} motion samples; '
            'expected the same number, at least 2'
        )
    zero = zero_motion
    if zero is None:
        z, down = np.zeros((1, 3)), np.array([[0.0, 0.0, p.g]])
        zero = SensorMotion(np.zeros(1), -down, z, z, down)
    theta = tool.params()
    resid = w - (regressor(motion) @ theta - regressor(zero[:1])[0] @ theta)
    datasheet = np.array([p.force_sigma_n] * 3 + [p.torque_sigma_nm] * 3)
    sigma = np.maximum(resid.std(axis=0, ddof=1), datasheet) / math.sqrt(len(w))
    return resid.mean(axis=0), sigma


@dataclass(frozen=True)
class MotionEstimate:
    """One solution of the fit.

    mass [kg], sigma_mass [kg]; com_sensor (3,) [m] and sigma_com (3,) [m] per sensor axis;
    sigma_com_xy [m]: the planar (package x-y) RMS error; samples and duration [s] used;
    residual_scale: the residual's RMS in datasheet sigmas (about 1 when the model holds);
    converged: the rule of MotionGaugeParams; why: what it still waits for.
    """

    mass: float
    sigma_mass: float
    com_sensor: tuple[float, float, float]
    sigma_com: tuple[float, float, float]
    sigma_com_xy: float
    samples: int
    duration: float
    residual_scale: float
    converged: bool
    why: str
    bias: tuple[float, ...] = ()


@dataclass
class InMotionWeigher:
    """Accumulates wrench samples and the tool's motion; `estimate` solves the fit.

    prior_com: the carton's geometric centre in the sensor frame [m] (core.gauge
      carton_centre_in_sensor, from the grasp); dims: its observed full sizes [m];
    R_sensor_package: the package axes in the sensor frame (3, 3) (core.gauge.R_sensor_package);
    tool: the gripper below the sensor; zero_motion: the tool's motion when the sensor was
      zeroed with the cups empty (None: at rest, plumb);
    bias: the sensor's bias since that zero (6,) [N, N m], tracked on the empty tool's moves
      (empty_tool_bias), subtracted from every sample; None: the zero is trusted;
    bias_sigma: that bias's sigma (6,): its uncertainty adds to the fit's (below), so a bias
      tracked over too short a move delays the hand-over rather than passing a wrong mass.
    The samples are the zeroed sensor's readings, each at its motion sample. The normal
    equations are accumulated, so memory does not grow with the samples.
    """

    prior_com: tuple[float, float, float]
    dims: tuple[float, float, float]
    R_sensor_package: np.ndarray
    params: MotionGaugeParams = field(default_factory=MotionGaugeParams)
    tool: RigidLoad | None = VGP20
    zero_motion: SensorMotion | None = None
    compensate: bool = True
    bias: tuple[float, ...] | None = None
    bias_sigma: tuple[float, ...] | None = None
    _N: np.ndarray = field(init=False, repr=False)
    _b: np.ndarray = field(init=False, repr=False)
    _yy: float = field(init=False, repr=False, default=0.0)
    _n: int = field(init=False, repr=False, default=0)
    _t: list[float] = field(init=False, repr=False, default_factory=list)
    _tool_zero: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        k = 16 if self.params.fit_bias else 10
        self._N = np.zeros((k, k))
        self._b = np.zeros(k)
        self._t = []
        zero = self.zero_motion
        if zero is None:
            g = self.params.g
            z, down = np.zeros((1, 3)), np.array([[0.0, 0.0, g]])
            zero = SensorMotion(np.zeros(1), -down, z, z, down)
        self._tool_zero = (
            regressor(zero[:1])[0] @ self.tool.params() if self.tool is not None else np.zeros(6)
        )

    @property
    def samples(self) -> int:
        return self._n

    def add(self, wrench: ArrayLike, motion: SensorMotion) -> None:
        """Add samples: wrench (n, 6) [N, N m] read at the n samples of `motion`.

        Without `compensate` the motion is taken as still (gravity only), the tool's inertial
        wrench is not subtracted: the static gauge's model on moving samples."""
        w = np.asarray(wrench, dtype=float).reshape(-1, 6)
        if len(w) != len(motion):
            raise PalletizerError(
                f'InMotionWeigher.add: {len(w)} wrench samples for {len(motion)} motion samples'
            )
        if len(w) == 0:
            return
        if self.bias is not None:
            w = w - np.asarray(self.bias, dtype=float)
        m = motion if self.compensate else still_motion(motion)
        Y = regressor(m)
        if self.tool is not None and self.compensate:
            w = w - (Y @ self.tool.params() - self._tool_zero)
        p = self.params
        scale = np.array([p.force_sigma_n] * 3 + [p.torque_sigma_nm] * 3)
        Y = Y / scale[:, None]
        y = (w / scale).reshape(-1)
        if p.fit_bias:
            eye = np.broadcast_to(np.diag(1.0 / scale), (len(w), 6, 6))
            Y = np.concatenate([Y, eye], axis=2)
        A = Y.reshape(-1, Y.shape[2])
        self._N += A.T @ A
        self._b += A.T @ y
        self._yy += float(y @ y)
        self._n += len(w)
        self._t.extend((float(motion.t[0]), float(motion.t[-1])))

    def _inertia(self, m: float, c: np.ndarray) -> np.ndarray:
        """I_o (xx, xy, xz, yy, yz, zz) [kg m^2] about the sensor origin: the box of the
        observed dims at mass m about its CoM c (parallel axis)."""
        R = np.asarray(self.R_sensor_package, dtype=float)
        K = R @ box_inertia(1.0, self.dims) @ R.T + (c @ c * np.eye(3) - np.outer(c, c))
        return np.asarray(m * K[np.triu_indices(3)])

    def estimate(self) -> MotionEstimate:
        """The fit over every sample so far, its covariance and the convergence verdict.
        Raises WeighError('no_payload') when the fitted mass is below GaugeParams' 50 g."""
        p = self.params
        if self._n == 0:
            raise PalletizerError('InMotionWeigher.estimate: no samples')
        prior = np.asarray(self.prior_com, dtype=float)
        R = np.asarray(self.R_sensor_package, dtype=float)
        half = np.abs(R) @ (np.asarray(self.dims, dtype=float) / 2)  # package box in sensor axes
        sig_c = np.maximum(p.com_prior_share * half, 1e-3)
        # The fitted unknowns: m, m c (and the bias); the inertia columns are not fitted but
        # moved to the known side at the last pass's m and c. A box's inertia is a guess
        # (+-30 % is plausible for real contents): as a column of m it would let the
        # low-noise torque rows pull the mass (0.2 % on a noise-free level-13 carton).
        free = np.r_[0:4, 10 : len(self._b)]
        H0 = self._N[np.ix_(free, free)]
        N_fi = self._N[np.ix_(free, np.arange(4, 10))]
        c, m = prior.copy(), 0.0
        for _ in range(p.passes):
            iota = self._inertia(m, c)
            H = H0.copy()
            r = self._b[free] - N_fi @ iota
            # The CoM prior on m c, in the fit's whitened units: (m c_i - m p_i) / (m sigma_i).
            ms = max(m, 0.05)
            w = 1.0 / (ms * sig_c) ** 2
            H[1:4, 1:4] += np.diag(w)
            r[1:4] += w * ms * prior
            theta = np.linalg.solve(H, r)
            m = float(theta[0])
            if m > 1e-3:
                c = theta[1:4] / m
        full = np.zeros(len(self._b))
        full[free] = theta
        full[4:10] = self._inertia(m, c)
        if m < 0.05:
            raise WeighError(
                'no_payload', f'payload {m * 1000:.0f} g is below 50 g: the cups hold nothing'
            )
        rss = max(self._yy - 2 * float(full @ self._b) + float(full @ self._N @ full), 0.0)
        dof = max(6 * self._n - len(theta), 1)
        s2 = max(rss / dof, 1.0)  # never more certain than the datasheet's noise
        cov = s2 * np.linalg.inv(H)
        J = np.zeros((3, len(theta)))  # c = (m c) / m
        J[:, 0] = -c / m
        J[:, 1:4] = np.eye(3) / m
        cov_c = J @ cov @ J.T
        cov_pkg = R.T @ cov_c @ R
        var_m = float(cov[0, 0])
        var_xy = float(cov_pkg[0, 0] + cov_pkg[1, 1])
        if self.bias_sigma is not None:
            # A force bias b reads as a mass b / g, a torque bias as a CoM shift tau / (m g);
            # all three force axes' sigmas are counted (conservative: only the one along
            # gravity weighs).
            sb = np.asarray(self.bias_sigma, dtype=float)
            var_m += float(sb[:3] @ sb[:3]) / p.g**2
            var_xy += float(sb[3:5] @ sb[3:5]) / (m * p.g) ** 2
        sig_m, sig_xy = math.sqrt(var_m), math.sqrt(var_xy)
        why = []
        if self._n < p.min_samples:
            why.append(f'{self._n} of {p.min_samples} samples')
        if sig_m > p.share * p.mass_bound * m:
            why.append(f'sigma(m) {100 * sig_m / m:.2f} %')
        if sig_xy > p.share * p.com_bound_m:
            why.append(f'sigma(c) {1000 * sig_xy:.2f} mm')
        return MotionEstimate(
            mass=m,
            sigma_mass=sig_m,
            com_sensor=floats3(c),
            sigma_com=floats3(np.sqrt(np.diag(cov_c))),
            sigma_com_xy=sig_xy,
            samples=self._n,
            duration=(max(self._t) - min(self._t)) if self._t else 0.0,
            residual_scale=math.sqrt(rss / dof),
            converged=not why,
            why='; '.join(why),
            bias=tuple(float(v) for v in theta[4:]),
        )

    def reading(self, package_id: str, type_name: str) -> GaugeReading:
        """The estimate as core.gauge.weigh reports one: the PackageSpec (CoG offset in the
        package frame, from the geometric centre) and the CoM in the sensor frame.

        The offset's vertical is the geometric centre's, as a still weigh reports it: a
        tool-down lift hardly excites it, so the fit's vertical rests on the prior and on
        whatever the model leaves out, and nothing scores it (gauge_errors is planar). Level
        23 seed 9 (beam, weighing on the lift) read a 248 mm carton's CoG 187 mm above its
        centre, outside the box, and the planners and the stability model stacked on that.
        com_sensor keeps the fit's full estimate."""
        e = self.estimate()
        R = np.asarray(self.R_sensor_package, dtype=float)
        offset = R.T @ (np.asarray(e.com_sensor) - np.asarray(self.prior_com, dtype=float))
        offset[2] = 0.0
        spec = PackageSpec(package_id, type_name, floats3(self.dims), e.mass, floats3(offset))
        return GaugeReading(spec, e.com_sensor, 'ok' if e.converged else 'unconverged')


def weigher_for_grasp(
    observation: Observation,
    q_seal: ArrayLike,
    *,
    kin: UR10eKinematics,
    tcp_offset: float,
    cup_gap: float,
    params: MotionGaugeParams | None = None,
    tool: RigidLoad | None = VGP20,
    bias: Sequence[float] | None = None,
    bias_sigma: Sequence[float] | None = None,
) -> InMotionWeigher:
    """A weigher for the carton just sealed on, as core.gauge.weigh_held sets up the still
    one: the tool's pose at the seal from the joint angles q_seal (6,) [rad] (forward
    kinematics), where the observed lid stands in the tool, the carton's centre in the sensor
    frame from the grasp (the CoM prior) and the package axes from the observed yaw."""
    T_tool = kin.fk(np.asarray(q_seal, dtype=float))
    tool_yaw = float(yaw_of(T_tool))
    lid = lid_in_tool(observation.position[:2], T_tool)
    centre = carton_centre_in_sensor(observation.dims_guess, tcp_offset, cup_gap, lid)
    return InMotionWeigher(
        prior_com=floats3(centre),
        dims=floats3(observation.dims_guess),
        R_sensor_package=R_sensor_package(observation.yaw, tool_yaw),
        params=params or MotionGaugeParams(),
        tool=tool,
        bias=None if bias is None else tuple(float(v) for v in bias),
        bias_sigma=None if bias_sigma is None else tuple(float(v) for v in bias_sigma),
    )
