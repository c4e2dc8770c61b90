"""UR10e kinematics: DH forward kinematics, analytic IK (all 8 branches) and branch selection."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import cast

import numpy as np
import ur_analytic_ik

from palletizer.core.motion import _kernels as kern
from palletizer.core.motion.errors import MotionError

__all__ = [
    'DH',
    'DH_ARRAYS',
    'Frame',
    'HOME_Q',
    'JointLimits',
    'UR10eKinematics',
    'branch_family',
    'branch_index',
    'fk_dh',
    'ik_batch',
    'wrist_near_mount',
    'arm_box_hits',
    'tool_down',
    'tool_down_batch',
    'yaw_of',
]

TWO_PI = 2.0 * math.pi

# Official UR10e DH (mujoco-notes.md "UR10e"); d6 ends at the flange.
DH = {
    'd1': 0.1807,
    'a2': -0.6127,
    'a3': -0.57155,
    'd4': 0.17415,
    'd5': 0.11985,
    'd6': 0.11655,
}
_D = np.array([DH['d1'], 0.0, 0.0, DH['d4'], DH['d5'], DH['d6']])
_A = np.array([0.0, DH['a2'], DH['a3'], 0.0, 0.0, 0.0])
_ALPHA = np.array([math.pi / 2, 0.0, 0.0, math.pi / 2, -math.pi / 2, 0.0])
# The DH table as the compiled kernels take it: a (6,), d (6,), alpha (6,).
DH_ARRAYS = (_A, _D, _ALPHA)

# IK seed / home, tool vertical (docs/cell.md §3.1).
HOME_Q = (-1.5708, -1.5708, 1.5708, -1.5708, -1.5708, 0.0)

# Tool pointing straight down with yaw 0: tool x = world x, tool y = -world y (docs/cell.md §3.1).
_R_TOOL_DOWN = np.diag([1.0, -1.0, -1.0])


class Frame(Enum):
    """Frame a Cartesian pose is expressed in."""

    WORLD = 'world'
    BASE = 'base'


@dataclass(frozen=True)
class JointLimits:
    """Joint position [rad], speed [rad/s], acceleration [rad/s^2] and jerk [rad/s^3] limits.

    Position and speed: UR10e datasheet (docs/cell.md §3.1, mujoco-notes "Limits"): +-2 pi, elbow
    +-pi; 120/120/180/180/180/180 deg/s. UR publishes no acceleration limit: 5 rad/s^2 is the ROS
    description's placeholder (mujoco-notes), kept as the default. UR publishes no jerk limit
    either: 500 rad/s^3 is chosen (full acceleration in 10 ms, five 500 Hz control periods),
    not measured; both match configs/cell.yaml `motion`, which says what it costs.
    """

    lower: tuple[float, ...] = (-TWO_PI, -TWO_PI, -math.pi, -TWO_PI, -TWO_PI, -TWO_PI)
    upper: tuple[float, ...] = (TWO_PI, TWO_PI, math.pi, TWO_PI, TWO_PI, TWO_PI)
    velocity: tuple[float, ...] = tuple(math.radians(v) for v in (120, 120, 180, 180, 180, 180))
    acceleration: tuple[float, ...] = (5.0,) * 6
    jerk: tuple[float, ...] = (500.0,) * 6

    def __post_init__(self) -> None:
        for name in ('lower', 'upper', 'velocity', 'acceleration', 'jerk'):
            value = getattr(self, name)
            if len(value) != 6 or not all(math.isfinite(v) for v in value):
                raise MotionError(f'JointLimits.{name} = {value!r}; expected 6 finite numbers')
        for name in ('velocity', 'acceleration', 'jerk'):
            if min(getattr(self, name)) <= 0:
                raise MotionError(
                    f'JointLimits.{name} = {getattr(self, name)!r}; expected all > 0'
                )
        if any(lo >= hi for lo, hi in zip(self.lower, self.upper, strict=True)):
            raise MotionError(
                f'JointLimits.lower {self.lower!r} must be below upper {self.upper!r}'
            )

    def within(self, q: np.ndarray, tol: float = 1e-9) -> np.ndarray:
        """True where every joint of q (..., 6) lies inside [lower, upper]."""
        q = np.asarray(q, dtype=float)
        lo = np.asarray(self.lower) - tol
        hi = np.asarray(self.upper) + tol
        return cast(np.ndarray, np.all((q >= lo) & (q <= hi), axis=-1))


def fk_dh(q: np.ndarray) -> np.ndarray:
    """T_base_flange from the DH table: q (..., 6) [rad] -> (..., 4, 4) [m] (kern.fk_flange)."""
    q = np.asarray(q, dtype=float)
    flat = np.ascontiguousarray(q.reshape(-1, 6))
    return kern.fk_flange(flat, _A, _D, _ALPHA).reshape(q.shape[:-1] + (4, 4))


def wrist_near_mount(
    q: np.ndarray,
    pedestal_radius: float,
    base_radius: float,
    shoulder_height: float,
    link_radius: float,
) -> np.ndarray:
    """(n,) True where a wrist joint (wrist 1, 2, 3 origins) of q (n, 6) comes closer to the
    base axis than the mount allows: below the shoulder, the base link (base_radius) and under
    it the pedestal (pedestal_radius), each plus the wrist's own link_radius [m]."""
    return kern.wrists_near_mount(
        np.ascontiguousarray(q, dtype=float).reshape(-1, 6),
        _A,
        _D,
        _ALPHA,
        float(pedestal_radius),
        float(base_radius),
        float(shoulder_height),
        float(link_radius),
    )


def arm_box_hits(
    q: np.ndarray,
    T_base_world: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    margin: float,
) -> np.ndarray:
    """(n,) index of the first box (lo, hi: (m, 3) world AABB corners [m]) that the forearm
    or a wrist link of q (n, 6) comes within `margin` [m] of; -1 where none does
    (kern.arm_box_hits: the links as the capsules of the robot self-filter)."""
    return kern.arm_box_hits(
        np.ascontiguousarray(q, dtype=float).reshape(-1, 6),
        _A,
        _D,
        _ALPHA,
        np.ascontiguousarray(T_base_world, dtype=float),
        np.ascontiguousarray(lo, dtype=float).reshape(-1, 3),
        np.ascontiguousarray(hi, dtype=float).reshape(-1, 3),
        float(margin),
    )


def unwrap_rows(q: np.ndarray) -> np.ndarray:
    """np.unwrap along axis 0 (successive samples), without its generality overhead."""
    d = np.diff(q, axis=0)
    d -= TWO_PI * np.round(d / TWO_PI)
    out = np.empty_like(q)
    out[0] = q[0]
    np.cumsum(d, axis=0, out=out[1:])
    out[1:] += q[0]
    return out


def _wrap(a: np.ndarray) -> np.ndarray:
    """Angles wrapped to [-pi, pi)."""
    return (a + math.pi) % TWO_PI - math.pi


def ik_batch(
    T_base_flange: np.ndarray, branches: tuple[int, ...] = tuple(range(8))
) -> tuple[np.ndarray, np.ndarray]:
    """Analytic IK branches for many flange poses at once (compiled: kern.ik_branches).

    T_base_flange: (n, 4, 4). Returns (q (n, 8, 6) [rad] wrapped to [-pi, pi), valid (n, 8));
    branches not listed in `branches` come back NaN and invalid (solving one branch is 8x
    cheaper when a path follows a known branch).
    Branch index b = 4 * shoulder + 2 * wrist + elbow; the same index is the same analytic
    branch for every pose, so following one index along a smooth path stays continuous away from
    singularities. Closed form after Hawkins, "Analytic inverse kinematics for the Universal
    Robots UR-5/UR-10 arms" (2013); cross-checked against ur_analytic_ik in the tests.
    """
    T = np.ascontiguousarray(T_base_flange, dtype=float).reshape(-1, 4, 4)
    wanted = np.zeros(8, dtype=bool)
    wanted[list(branches)] = True
    return kern.ik_branches(T, wanted, _A, _D, _ALPHA)


def branch_index(q: np.ndarray) -> int:
    """ik_batch branch index (0..7) that reproduces the configuration q (6,) [rad]."""
    q = np.asarray(q, dtype=float)
    T = fk_dh(q)
    p05 = T[:3, 3] - DH['d6'] * T[:3, 2]
    psi = math.atan2(p05[1], p05[0])
    phi = math.acos(min(1.0, DH['d4'] / max(math.hypot(p05[0], p05[1]), 1e-12)))
    err = [abs(float(_wrap(np.array(psi + sg * phi + math.pi / 2 - q[0])))) for sg in (1.0, -1.0)]
    s = 0 if err[0] <= err[1] else 1
    w = 0 if math.sin(q[4]) >= 0 else 1
    e = 0 if math.sin(q[2]) >= 0 else 1
    return 4 * s + 2 * w + e


def branch_family(q: np.ndarray) -> np.ndarray:
    """True where q (..., 6) is elbow-up and wrist-not-flipped (the working family).

    In the arm plane the wrist centre sits at r_w = a2 cos q2 + a3 cos(q2 + q3) along frame 1's
    x axis. Elbow-up: the elbow lies above the shoulder-wrist line, which works out to
    sin(q3) * r_w < 0. Wrist not flipped: the joint-5 axis points away from the base along the
    reach direction (as at home), i.e. sin(q2 + q3 + q4) * r_w > 0. Both hold at HOME_Q.
    """
    q = np.asarray(q, dtype=float)
    q2, q3, q4 = q[..., 1], q[..., 2], q[..., 3]
    r_w = DH['a2'] * np.cos(q2) + DH['a3'] * np.cos(q2 + q3)
    elbow_up = np.sin(q3) * r_w < 0.0
    wrist_ok = np.sin(q2 + q3 + q4) * r_w > 0.0
    return cast(np.ndarray, elbow_up & wrist_ok)


def tool_down(x: float, y: float, z: float, yaw: float) -> np.ndarray:
    """T_world_tcp (4, 4) for a tool pointing straight down: rot_z(yaw) @ diag(1, -1, -1)."""
    return cast(
        np.ndarray,
        tool_down_batch(np.array([x]), np.array([y]), np.array([z]), np.array([yaw]))[0],
    )


def tool_down_batch(x: np.ndarray, y: np.ndarray, z: np.ndarray, yaw: np.ndarray) -> np.ndarray:
    """Vectorised tool_down: arrays (n,) [m], [rad] -> (n, 4, 4)."""
    x, y, z, yaw = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (x, y, z, yaw)))
    n = x.size
    c, s = np.cos(yaw.ravel()), np.sin(yaw.ravel())
    T = np.zeros((n, 4, 4))
    # rot_z(yaw) @ diag(1, -1, -1)
    T[:, 0, 0], T[:, 0, 1] = c, s
    T[:, 1, 0], T[:, 1, 1] = s, -c
    T[:, 2, 2] = -1.0
    T[:, 0, 3], T[:, 1, 3], T[:, 2, 3] = x.ravel(), y.ravel(), z.ravel()
    T[:, 3, 3] = 1.0
    return T


def yaw_of(T: np.ndarray) -> np.ndarray:
    """Yaw [rad] of tool-down pose(s) T (..., 4, 4): the heading of the tool x axis."""
    T = np.asarray(T, dtype=float)
    return cast(np.ndarray, np.arctan2(T[..., 1, 0], T[..., 0, 0]))


def _translation(x: float, y: float, z: float) -> np.ndarray:
    t = np.eye(4)
    t[:3, 3] = (x, y, z)
    return t


def _rot_z(yaw: float) -> np.ndarray:
    t = np.eye(4)
    c, s = math.cos(yaw), math.sin(yaw)
    t[:2, :2] = ((c, -s), (s, c))
    return t


@dataclass(frozen=True)
class UR10eKinematics:
    """The UR10e on its pedestal with the VGP20 tool: frames, FK, IK and branch choice.

    base_xyz: world position of the DH base frame [m] (docs/cell.md §3.1).
    base_yaw: rotation of the DH base frame about world Z [rad]. The MuJoCo base body carries
      quat (0, 0, 0, -1), and the Menagerie/ROS base body is itself rotated 180 deg from the DH
      base frame (mujoco-notes "Kinematic chain"); the two cancel, so the DH base is
      axis-aligned with the world. Check: the reference sweep puts pan -90 / lift -120 at
      x = 0.426 m over the pallet (docs/cell.md §3.1), which this frame reproduces.
    tcp_offset: flange to cup faces along the tool axis [m] (VGP20 body height,
      docs/cell.md §3.10).
    weights: per-joint weights of the branch-selection distance; the inverse joint speed limits,
      so the nearest branch is the one the arm reaches soonest.
    """

    base_xyz: tuple[float, float, float] = (0.60, -0.72, 0.48)
    base_yaw: float = 0.0
    tcp_offset: float = 0.092
    limits: JointLimits = field(default_factory=JointLimits)
    weights: tuple[float, ...] | None = None
    # Derived in __post_init__ (not arguments): the cached frame inverses and the arrays the
    # compiled branch selection takes.
    _T_base_world: np.ndarray = field(init=False, repr=False, compare=False)
    _T_tcp_flange: np.ndarray = field(init=False, repr=False, compare=False)
    _lower: np.ndarray = field(init=False, repr=False, compare=False)
    _upper: np.ndarray = field(init=False, repr=False, compare=False)
    _weights: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Cached frame inverses: IK is called per sample, and inverting per call showed up.
        T_base_world = np.linalg.inv(_translation(*self.base_xyz) @ _rot_z(self.base_yaw))
        object.__setattr__(self, '_T_base_world', T_base_world)
        object.__setattr__(self, '_T_tcp_flange', _translation(0.0, 0.0, -self.tcp_offset))
        if not (0.0 <= self.tcp_offset < 1.0):
            raise MotionError(f'tcp_offset = {self.tcp_offset!r}; expected 0 <= value < 1 m')
        if self.weights is not None and (len(self.weights) != 6 or min(self.weights) <= 0):
            raise MotionError(f'weights = {self.weights!r}; expected 6 positive numbers')
        # What the compiled branch selection takes, as contiguous float arrays.
        object.__setattr__(self, '_lower', np.asarray(self.limits.lower, dtype=float))
        object.__setattr__(self, '_upper', np.asarray(self.limits.upper, dtype=float))
        object.__setattr__(self, '_weights', self.joint_weights)

    # Frames -----------------------------------------------------------------------------------
    @property
    def T_world_base(self) -> np.ndarray:
        """World <- DH base (4, 4)."""
        return cast(np.ndarray, _translation(*self.base_xyz) @ _rot_z(self.base_yaw))

    @property
    def T_flange_tcp(self) -> np.ndarray:
        """Flange <- TCP (4, 4): a pure offset along the tool axis (tool x = flange x)."""
        return _translation(0.0, 0.0, self.tcp_offset)

    @property
    def joint_weights(self) -> np.ndarray:
        w = self.weights if self.weights is not None else 1.0 / np.asarray(self.limits.velocity)
        return np.asarray(w, dtype=float)

    # FK ---------------------------------------------------------------------------------------
    def fk(self, q: np.ndarray, frame: Frame = Frame.WORLD) -> np.ndarray:
        """TCP pose for joints q (..., 6) [rad]: T_world_tcp or T_base_tcp (..., 4, 4) [m]."""
        T = fk_dh(q) @ self.T_flange_tcp
        return cast(np.ndarray, self.T_world_base @ T if frame is Frame.WORLD else T)

    def to_base_flange(self, T_tcp: np.ndarray, frame: Frame = Frame.WORLD) -> np.ndarray:
        """T_base_flange (..., 4, 4) for TCP pose(s) given in `frame`."""
        T = np.asarray(T_tcp, dtype=float)
        if frame is Frame.WORLD:
            T = self._T_base_world @ T
        return cast(np.ndarray, T @ self._T_tcp_flange)

    # IK ---------------------------------------------------------------------------------------
    def ik_all(self, T_tcp: np.ndarray, frame: Frame = Frame.WORLD) -> np.ndarray:
        """Every IK solution (k, 6) [rad] in [-pi, pi) that lies within the joint limits.

        Uses ur_analytic_ik (up to 8 branches); k = 0 when the pose is out of reach.
        """
        T_bf = np.ascontiguousarray(self.to_base_flange(T_tcp, frame))
        sols = ur_analytic_ik.ur10e.inverse_kinematics(T_bf)
        if not sols:
            return np.zeros((0, 6))
        q = _wrap(np.array(sols))
        q = q[np.all(np.isfinite(q), axis=1)]
        return cast(np.ndarray, q[self.limits.within(q)])

    def resolve_turns(self, q: np.ndarray, q_ref: np.ndarray) -> np.ndarray:
        """Per joint, the 2 pi equivalent of q (..., 6) nearest q_ref that stays within limits.

        Where no equivalent is within limits the joint is returned as NaN.
        """
        q = np.asarray(q, dtype=float)
        q_ref = np.asarray(q_ref, dtype=float)
        k = np.round((q_ref - q) / TWO_PI)
        best = np.full(np.broadcast_shapes(q.shape, q_ref.shape), np.nan)
        best_d = np.full(best.shape, np.inf)
        lo, hi = np.asarray(self.limits.lower), np.asarray(self.limits.upper)
        for dk in (-1.0, 0.0, 1.0):
            cand = q + (k + dk) * TWO_PI
            ok = (cand >= lo - 1e-9) & (cand <= hi + 1e-9)
            d = np.where(ok, np.abs(cand - q_ref), np.inf)
            better = d < best_d
            best = np.where(better, cand, best)
            best_d = np.where(better, d, best_d)
        return best

    def select_nearest(self, candidates: np.ndarray, q_ref: np.ndarray) -> np.ndarray | None:
        """From IK candidates (k, 6), the in-family one nearest q_ref, or None.

        Distance: weighted Euclidean (joint_weights) after resolving 2 pi equivalents.
        """
        return self._nearest(np.asarray(candidates, dtype=float).reshape(-1, 6), q_ref)

    def _nearest(self, sols: np.ndarray, q_ref: np.ndarray) -> np.ndarray | None:
        if len(sols) == 0:
            return None
        q, found = kern.nearest_in_family(
            np.ascontiguousarray(sols, dtype=float),
            np.ascontiguousarray(q_ref, dtype=float).reshape(6),
            self._lower,
            self._upper,
            self._weights,
            DH['a2'],
            DH['a3'],
        )
        return q if found else None

    def ik_nearest(
        self, T_tcp: np.ndarray, q_ref: np.ndarray, frame: Frame = Frame.WORLD
    ) -> np.ndarray | None:
        """The in-family IK solution (6,) nearest q_ref (weighted), or None when unreachable."""
        # ur_analytic_ik's solutions straight to the compiled selection (kern.nearest_in_family
        # wraps, filters and resolves turns): the numpy version of the same spent ~80 % of the
        # call in per-operation overhead.
        T_bf = np.ascontiguousarray(self.to_base_flange(T_tcp, frame))
        return self._nearest(np.array(ur_analytic_ik.ur10e.inverse_kinematics(T_bf)), q_ref)

    def ik_batch_world(self, T_world_tcp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """ik_batch for TCP poses in the world frame: (n, 4, 4) -> (q (n, 8, 6), valid (n, 8))."""
        return ik_batch(self.to_base_flange(T_world_tcp, Frame.WORLD))
