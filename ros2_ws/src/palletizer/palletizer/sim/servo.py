"""Joint servo of the simulated UR10e: computed-torque PD with the payload in the feed-forward."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco
import numpy as np

from palletizer.core.errors import PalletizerError
from palletizer.sim.gripper import GripperParams
from palletizer.sim.robot import ARM_JOINTS, ArmParams, robot_model

__all__ = ['Servo', 'ServoError', 'ServoGains', 'TrackResult', 'Trajectory']


class ServoError(PalletizerError):
    """A trajectory is malformed (shapes, time not increasing) or exceeds the joint speed limits."""


# Sampled velocities may exceed the UR limits by this fraction (sampling and interpolation).
_SPEED_TOLERANCE = 0.01


@dataclass(frozen=True)
class ServoGains:
    """Closed-loop natural frequency [rad/s] and damping ratio per joint.

    The PD acts on acceleration inside the computed-torque law, so one bandwidth fits every
    joint. 40 rad/s at a 500 Hz servo rate (wn dt = 0.08) tracked a full-speed move to < 1 mm
    empty and with 8.5 kg (tests/sim/test_servo.py).
    """

    wn: tuple[float, ...] = (40.0, 40.0, 40.0, 40.0, 40.0, 40.0)
    zeta: float = 1.0

    @property
    def kp(self) -> np.ndarray:
        """Position gain (6,) [1/s^2]."""
        return np.square(np.asarray(self.wn))

    @property
    def kd(self) -> np.ndarray:
        """Velocity gain (6,) [1/s]."""
        return 2.0 * self.zeta * np.asarray(self.wn)


@dataclass(frozen=True)
class Trajectory:
    """A joint trajectory sampled at the controller rate.

    t: (N,) [s] from 0, strictly increasing; q, qd, qdd: (N, 6) [rad], [rad/s], [rad/s^2].
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray

    def __post_init__(self) -> None:
        t = np.asarray(self.t, dtype=float)
        if t.ndim != 1 or t.size < 1:
            raise ServoError(f'trajectory t must be a non-empty 1-D array, got shape {t.shape}')
        for name in ('q', 'qd', 'qdd'):
            a = np.asarray(getattr(self, name), dtype=float)
            if a.shape != (t.size, 6):
                raise ServoError(f'trajectory {name} has shape {a.shape}; expected ({t.size}, 6)')
        if t.size > 1 and np.any(np.diff(t) <= 0):
            raise ServoError('trajectory t must be strictly increasing')

    @property
    def duration(self) -> float:
        """Last sample time [s]."""
        return float(self.t[-1])

    def sample(self, time: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(q, qd, qdd) at `time` [s]: cubic Hermite on (q, qd), linear on qdd; held at the ends."""
        t = self.t
        if time <= t[0]:
            return self.q[0], self.qd[0], self.qdd[0]
        if time >= t[-1]:
            return self.q[-1], np.zeros(6), np.zeros(6)
        k = int(np.searchsorted(t, time, side='right')) - 1
        h = t[k + 1] - t[k]
        s = (time - t[k]) / h
        q0, q1, v0, v1 = self.q[k], self.q[k + 1], self.qd[k], self.qd[k + 1]
        s2, s3 = s * s, s * s * s
        q = (
            (2 * s3 - 3 * s2 + 1) * q0
            + (s3 - 2 * s2 + s) * h * v0
            + (-2 * s3 + 3 * s2) * q1
            + (s3 - s2) * h * v1
        )
        qd = ((6 * s2 - 6 * s) * q0 + (-6 * s2 + 6 * s) * q1) / h + (
            (3 * s2 - 4 * s + 1) * v0 + (3 * s2 - 2 * s) * v1
        )
        qdd = (1 - s) * self.qdd[k] + s * self.qdd[k + 1]
        return q, qd, qdd


@dataclass(frozen=True)
class TrackResult:
    """What one tracked trajectory cost and how well it followed.

    max_joint_error [rad] (per joint), max_tcp_error [m], max_abs_torque (6,) [N m],
    saturated_steps: physics steps where any joint hit its torque limit.
    """

    duration: float
    steps: int
    max_joint_error: np.ndarray
    max_tcp_error: float
    final_tcp_error: float
    max_abs_torque: np.ndarray
    saturated_steps: int
    max_abs_velocity: np.ndarray = field(default_factory=lambda: np.zeros(6))


@dataclass
class _Stats:
    joint_err: np.ndarray = field(default_factory=lambda: np.zeros(6))
    tcp_err: float = 0.0
    torque: np.ndarray = field(default_factory=lambda: np.zeros(6))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(6))
    saturated: int = 0
    steps: int = 0


class Servo:
    """Torque servo for the arm of a compiled cell model.

    tau = ID(q, qd, qdd_ref + Kp (q_ref - q) + Kd (qd_ref - qd)), clipped to the UR10e limits.
    ID is mj_inverse on a private arm-and-tool model whose tool body carries the held payload,
    so the feed-forward holds gravity, Coriolis and inertia of arm, gripper and carton.
    `apply()` must run before every physics step (the Cell does it).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        data: mujoco.MjData,
        *,
        gains: ServoGains = ServoGains(),
        arm: ArmParams | None = None,
        gripper: GripperParams | None = None,
    ) -> None:
        arm = arm or ArmParams()
        gripper = gripper or GripperParams()
        self.model, self.data = model, data
        self.gains = gains
        self._kp, self._kd = gains.kp, gains.kd
        self._limits = np.asarray(arm.torque_limits, dtype=float)
        self._speed = np.asarray(arm.speed_limits, dtype=float)
        self._qadr = np.array([model.joint(j).qposadr[0] for j in ARM_JOINTS])
        self._dadr = np.array([model.joint(j).dofadr[0] for j in ARM_JOINTS])
        self._act = np.array(
            [model.actuator(j.removesuffix('_joint') + '_motor').id for j in ARM_JOINTS]
        )
        self._id_model = robot_model(arm, gripper)
        self._id_model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
        self._id_data = mujoco.MjData(self._id_model)
        self._ref_data = mujoco.MjData(self._id_model)
        self._tool = self._id_model.body('gripper').id
        self._tool_mass = float(self._id_model.body_mass[self._tool])
        self._tool_com = self._id_model.body_ipos[self._tool].copy()
        self._tool_inertia = np.diag(self._id_model.body_inertia[self._tool])
        self._tcp_id = self._id_model.site('tcp').id
        self._ref_q = self.q.copy()
        self._ref_qd = np.zeros(6)
        self._ref_qdd = np.zeros(6)
        self._stats: _Stats | None = None

    # State -----------------------------------------------------------------------------------
    @property
    def q(self) -> np.ndarray:
        """Measured joint positions (6,) [rad]."""
        return self.data.qpos[self._qadr].copy()

    @property
    def qd(self) -> np.ndarray:
        """Measured joint velocities (6,) [rad/s]."""
        return self.data.qvel[self._dadr].copy()

    @property
    def reference(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Current reference (q, qd, qdd)."""
        return self._ref_q.copy(), self._ref_qd.copy(), self._ref_qdd.copy()

    # Payload ---------------------------------------------------------------------------------
    def set_payload(self, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
        """Add a rigid payload to the feed-forward model.

        mass [kg]; com (3,) [m] and inertia (3, 3) [kg m^2] about the com, both in the gripper
        (flange) frame.
        """
        m1, c1, I1 = self._tool_mass, self._tool_com, self._tool_inertia
        m2, c2, I2 = float(mass), np.asarray(com, float), np.asarray(inertia, float)
        M = m1 + m2
        c = (m1 * c1 + m2 * c2) / M
        Icom = np.zeros((3, 3))
        for m, ci, Ii in ((m1, c1, I1), (m2, c2, I2)):
            d = ci - c
            Icom += Ii + m * (d @ d * np.eye(3) - np.outer(d, d))
        self._set_tool_inertial(M, c, Icom)

    def clear_payload(self) -> None:
        """Remove the payload from the feed-forward model."""
        self._set_tool_inertial(self._tool_mass, self._tool_com, self._tool_inertia)

    def _set_tool_inertial(self, mass: float, com: np.ndarray, inertia: np.ndarray) -> None:
        evals, evecs = np.linalg.eigh(inertia)
        if np.linalg.det(evecs) < 0:
            evecs[:, 0] *= -1
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, evecs.ravel())
        m, b = self._id_model, self._tool
        m.body_mass[b] = mass
        m.body_ipos[b] = com
        m.body_inertia[b] = evals
        m.body_iquat[b] = quat

    # Reference -------------------------------------------------------------------------------
    def hold(self, q: np.ndarray | None = None) -> None:
        """Hold `q` (default: the measured position) at rest."""
        self.set_reference(self.q if q is None else np.asarray(q, float), np.zeros(6), np.zeros(6))

    def set_reference(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray) -> None:
        """Reference for the next physics steps [rad], [rad/s], [rad/s^2]."""
        self._ref_q = np.asarray(q, float).copy()
        self._ref_qd = np.asarray(qd, float).copy()
        self._ref_qdd = np.asarray(qdd, float).copy()

    def apply(self) -> np.ndarray:
        """Compute the servo torque from the current state and write it to data.ctrl."""
        q, qd = self.data.qpos[self._qadr], self.data.qvel[self._dadr]
        e = self._ref_q - q
        acc = self._ref_qdd + self._kp * e + self._kd * (self._ref_qd - qd)
        idd = self._id_data
        idd.qpos[:] = q
        idd.qvel[:] = qd
        idd.qacc[:] = acc
        mujoco.mj_inverse(self._id_model, idd)
        tau = np.clip(idd.qfrc_inverse, -self._limits, self._limits)
        self.data.ctrl[self._act] = tau
        st = self._stats
        if st is not None:
            np.maximum(st.joint_err, np.abs(e), out=st.joint_err)
            np.maximum(st.torque, np.abs(tau), out=st.torque)
            np.maximum(st.velocity, np.abs(qd), out=st.velocity)
            if np.any(np.abs(idd.qfrc_inverse) >= self._limits):
                st.saturated += 1
            rd = self._ref_data
            rd.qpos[:] = self._ref_q
            mujoco.mj_kinematics(self._id_model, rd)
            err = float(np.linalg.norm(rd.site_xpos[self._tcp_id] - idd.site_xpos[self._tcp_id]))
            st.tcp_err = max(st.tcp_err, err)
            st.steps += 1
        return tau

    def track(self, traj: Trajectory, step: Callable[[int], None]) -> TrackResult:
        """Follow `traj` from the current time, advancing physics through `step(1)`.

        `step` must call apply() before each physics step (Cell.step does). The reference is
        refreshed every physics step by interpolating the samples; afterwards the last sample
        is held.
        """
        peak = np.abs(np.asarray(traj.qd)).max(axis=0)
        over = peak > self._speed * (1.0 + _SPEED_TOLERANCE)
        if np.any(over):
            j = int(np.argmax(over))
            raise ServoError(
                f'trajectory {ARM_JOINTS[j]} speed {np.degrees(peak[j]):.1f} deg/s exceeds the '
                f'UR10e limit {np.degrees(self._speed[j]):.0f} deg/s'
            )
        dt = float(self.model.opt.timestep)
        n = int(np.ceil(traj.duration / dt - 1e-9))
        self._stats = _Stats()
        try:
            for k in range(n + 1):
                self.set_reference(*traj.sample(k * dt))
                step(1)
            st = self._stats
            final = st.tcp_err
            self._stats = _Stats()
            self.hold(traj.q[-1])
            step(1)
            final = self._stats.tcp_err
        finally:
            self._stats = None
        return TrackResult(
            duration=n * dt,
            steps=st.steps,
            max_joint_error=st.joint_err.copy(),
            max_tcp_error=st.tcp_err,
            final_tcp_error=final,
            max_abs_torque=st.torque.copy(),
            saturated_steps=st.saturated,
            max_abs_velocity=st.velocity.copy(),
        )
