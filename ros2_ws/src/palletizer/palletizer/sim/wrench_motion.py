"""Wrist wrench readings along a tool trajectory without the physics: rigid-body loads plus the
sensor's error model (sim.wrench.WrenchNoise), for the in-motion weigher's tests and benchmark."""

from __future__ import annotations

import numpy as np

from palletizer.core.gauge_motion import VGP20, RigidLoad, SensorMotion, rigid_wrench
from palletizer.sim.wrench import WrenchNoise

__all__ = ['sensor_error', 'synthetic_readings']


def sensor_error(noise: WrenchNoise, seed: int, t: np.ndarray) -> np.ndarray:
    """The sensor's error beside the white noise (n, 6) [N, N m] at sim times t (n,) [s]:
    bias, the seed's offset and the drift, as WrenchSensor.error adds them."""
    ts = np.asarray(t, dtype=float).reshape(-1)
    e = np.tile(np.concatenate([noise.force_bias, noise.torque_bias]).astype(float), (len(ts), 1))
    if noise.offset_force > 0 or noise.offset_torque > 0:
        e = e + noise.offset(seed)
    if noise.drift_force > 0 or noise.drift_torque > 0:
        e = e + noise.drift(seed, ts).reshape(len(ts), 6)
    return e


def synthetic_readings(
    load: RigidLoad | None,
    motion: SensorMotion,
    *,
    noise: WrenchNoise,
    seed: int,
    t_start: float,
    t_zero: float,
    zero_motion: SensorMotion,
    tool: RigidLoad = VGP20,
    stream: int = 0,
) -> np.ndarray:
    """What a zeroed wrist sensor reads (n, 6) [N, N m] while the tool follows `motion`.

    The tool (and the load, when held) wrench by Newton-Euler, plus the sensor's error at sim
    time t_start + motion.t, less what the sensor read when zeroed at sim time t_zero with the
    empty tool in `zero_motion` (its first sample; the zero holds that instant's error, so
    what remains is the drift since), plus white noise of the model's sigmas. The white noise
    is drawn from one stream per (seed, stream), not per physics step as WrenchSensor does:
    the same distribution at a thousandth of the cost (a generator per sample costs ~0.1 ms).
    """
    truth = rigid_wrench(tool, motion)
    if load is not None:
        truth = truth + rigid_wrench(load, motion)
    zero = (
        rigid_wrench(tool, zero_motion[:1])[0] + sensor_error(noise, seed, np.array([t_zero]))[0]
    )
    w = truth + sensor_error(noise, seed, t_start + motion.t) - zero
    if noise.force_sigma > 0 or noise.torque_sigma > 0:
        rng = np.random.default_rng([int(seed), int(stream), 0x3E16])
        sig = np.repeat([noise.force_sigma, noise.torque_sigma], 3)
        w = w + rng.normal(0.0, 1.0, w.shape) * sig
    return w
