"""Test kit for cell tests: tool-down IK, joint and Cartesian trajectories, carton records."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import ur_analytic_ik
from palletizer.sim.robot import ArmParams, T_world_dhbase
from palletizer.sim.servo import Trajectory
from ruckig import InputParameter, Ruckig, Synchronization
from ruckig import Trajectory as RuckigTrajectory

TOOL_DOWN = np.diag([1.0, -1.0, -1.0])  # working orientation (docs/cell.md §3.1)
TCP_OFFSET = 0.092
RATE = 50.0  # controller rate [Hz] (docs/cell.md §3.9)
SPEED = np.asarray(ArmParams().speed_limits)


@dataclass(frozen=True)
class Draw:
    """A CartonDraw-like record for scenes built without the level loads."""

    index: int
    package_id: str
    dims: tuple[float, float, float]
    mass: float
    cog_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rgba: tuple[float, float, float, float] = (0.7, 0.5, 0.3, 1.0)
    friction: tuple[float, float, float] = (0.95, 0.01, 0.001)
    type_name: str = 'test'


def ik_tool_down(p_tcp: np.ndarray, q_seed: np.ndarray, yaw: float = 0.0) -> np.ndarray:
    """Joint solution closest to `q_seed` putting the TCP at `p_tcp` [m], tool down, `yaw`."""
    c, s = np.cos(yaw), np.sin(yaw)
    R = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]) @ TOOL_DOWN
    T = np.eye(4)
    T[:3, :3] = R
    T[:3, 3] = np.asarray(p_tcp, float) - R[:, 2] * TCP_OFFSET
    T_dh = np.linalg.inv(T_world_dhbase()) @ T
    sols = ur_analytic_ik.ur10e.inverse_kinematics_closest(np.ascontiguousarray(T_dh), *q_seed)
    if not sols:
        raise AssertionError(f'no IK solution for {p_tcp}')
    q = np.asarray(sols[0])
    return q_seed + (q - q_seed + np.pi) % (2 * np.pi) - np.pi


def joint_move(
    q0, q1, accel: float = 8.0, jerk: float = 80.0, speed=None, sync: bool = True
) -> Trajectory:
    """Jerk-limited rest-to-rest joint move sampled at the controller rate.

    sync=False lets every joint run time-optimally, so each long stroke reaches its speed limit.
    """
    inp = InputParameter(6)
    if not sync:
        inp.synchronization = Synchronization.No
    inp.current_position = list(q0)
    inp.target_position = list(q1)
    inp.current_velocity = inp.current_acceleration = [0.0] * 6
    inp.target_velocity = inp.target_acceleration = [0.0] * 6
    inp.max_velocity = list(SPEED if speed is None else speed)
    inp.max_acceleration = [accel] * 6
    inp.max_jerk = [jerk] * 6
    tr = RuckigTrajectory(6)
    Ruckig(6).calculate(inp, tr)
    ts = np.linspace(0.0, tr.duration, int(np.ceil(tr.duration * RATE)) + 1)
    samples = [tr.at_time(t) for t in ts]
    return Trajectory(
        ts,
        np.array([s[0] for s in samples]),
        np.array([s[1] for s in samples]),
        np.array([s[2] for s in samples]),
    )


def cartesian_move(q0, p0, p1, accel: float, speed: float, yaw: float = 0.0) -> Trajectory:
    """Straight TCP line p0 -> p1 with a trapezoidal speed profile (accel [m/s^2], speed [m/s])."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    dist = float(np.linalg.norm(p1 - p0))
    v = min(speed, np.sqrt(accel * dist))
    ta = v / accel
    T = 2 * ta + (dist - accel * ta * ta) / v
    ts = np.linspace(0.0, T, int(np.ceil(T * RATE * 2)) + 1)

    def s_of(t):
        if t < ta:
            return 0.5 * accel * t * t
        if t > T - ta:
            return dist - 0.5 * accel * (T - t) ** 2
        return 0.5 * accel * ta * ta + v * (t - ta)

    q = []
    seed = np.asarray(q0, float)
    for t in ts:
        seed = ik_tool_down(p0 + (p1 - p0) * s_of(t) / dist, seed, yaw)
        q.append(seed)
    q = np.array(q)
    qd = np.gradient(q, ts, axis=0)
    # Slow the whole move down where the line would need more than the UR joint speeds.
    stretch = max(1.0, float((np.abs(qd) / SPEED).max()) * 1.005)
    ts = ts * stretch
    qd = np.gradient(q, ts, axis=0)
    qdd = np.gradient(qd, ts, axis=0)
    qd[0] = qd[-1] = 0.0
    qdd[0] = qdd[-1] = 0.0
    return Trajectory(ts, q, qd, qdd)
