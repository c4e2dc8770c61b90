"""Wrist force/torque: MuJoCo force and torque sensors at the flange plus a noise and bias model."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import mujoco
import numpy as np

from palletizer.core.config.cell import WrenchConfig
from palletizer.core.errors import InvalidValue

__all__ = ['Wrench', 'WrenchNoise', 'WrenchSensor', 'ft_sensors_xml', 'plumb_weigh']


def ft_sensors_xml() -> str:
    """Force and torque sensors on the `flange` site (between the wrist and the gripper)."""
    return """
    <force name="ft_force" site="flange"/>
    <torque name="ft_torque" site="flange"/>"""


@dataclass(frozen=True)
class Wrench:
    """A wrench in the sensor (flange) frame: force (3,) [N] and torque (3,) [N m]."""

    force: np.ndarray
    torque: np.ndarray

    def __sub__(self, other: Wrench) -> Wrench:
        return Wrench(self.force - other.force, self.torque - other.torque)


# Keys of the seeded streams beside the per-step noise, which is keyed by (seed, step). A tag
# has a third word, so no (seed, step) key can equal it.
_OFFSET_KEY = (0x0FF5E7, 1)
_DRIFT_KEY = (0xD21F7, 1)


@dataclass(frozen=True)
class WrenchNoise:
    """The wrist sensor's error model: white noise, a constant offset, a slow drift, a bias.

    A reading is truth + bias + offset(seed) + drift(seed, t) + noise(seed, step), per axis:
    - noise: Gaussian, force_sigma [N] / torque_sigma [N m] (1 sigma per sample), drawn anew
      every physics step;
    - offset: constant over an episode, uniform within +-offset_force / +-offset_torque, drawn
      from the cell seed (the datasheet's accuracy; the tare removes it);
    - drift: slow thermal drift, within +-drift_force / +-drift_torque: per axis the sum of
      drift_terms sinusoids of equal amplitude, periods log-uniform in drift_period_s and
      phases uniform, all drawn from the cell seed, so it is a pure function of (seed, t);
    - bias: a fixed vector on top (tests).
    configs/cell.yaml `wrench` sets the cell's values from the UR10e datasheet. Default: ideal.
    """

    force_sigma: float = 0.0  # [N]
    torque_sigma: float = 0.0  # [N m]
    force_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)  # [N]
    torque_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)  # [N m]
    offset_force: float = 0.0  # [N] per-axis bound of the seed-drawn constant offset
    offset_torque: float = 0.0  # [N m]
    drift_force: float = 0.0  # [N] per-axis bound of the drift
    drift_torque: float = 0.0  # [N m]
    drift_period_s: tuple[float, float] = (300.0, 1800.0)  # [s] shortest and longest period
    drift_terms: int = 3

    def __post_init__(self) -> None:
        for name in (
            'force_sigma',
            'torque_sigma',
            'offset_force',
            'offset_torque',
            'drift_force',
            'drift_torque',
        ):
            v = getattr(self, name)
            if not math.isfinite(v) or v < 0:
                raise InvalidValue(f'WrenchNoise.{name} = {v!r}; expected a finite value >= 0')
        lo, hi = self.drift_period_s
        if not 0 < lo <= hi or not math.isfinite(hi):
            raise InvalidValue(
                f'WrenchNoise.drift_period_s = {self.drift_period_s!r}; expected 0 < min <= max'
            )
        if self.drift_terms < 1:
            raise InvalidValue(f'WrenchNoise.drift_terms = {self.drift_terms}; expected >= 1')

    @classmethod
    def from_config(cls, wrench: WrenchConfig) -> WrenchNoise:
        """From configs/cell.yaml `wrench` (noise_*, offset_*, drift_*, bias_*)."""
        return cls(
            force_sigma=wrench.noise_force_n,
            torque_sigma=wrench.noise_torque_nm,
            force_bias=wrench.bias_force_n,
            torque_bias=wrench.bias_torque_nm,
            offset_force=wrench.offset_force_n,
            offset_torque=wrench.offset_torque_nm,
            drift_force=wrench.drift_force_n,
            drift_torque=wrench.drift_torque_nm,
            drift_period_s=wrench.drift_period_s,
            drift_terms=wrench.drift_terms,
        )

    def offset(self, seed: int) -> np.ndarray:
        """The episode's constant offset (6,) [N, N m] of cell seed `seed`."""
        u = np.random.default_rng([int(seed), *_OFFSET_KEY]).uniform(-1.0, 1.0, 6)
        return u * np.repeat([self.offset_force, self.offset_torque], 3)

    def drift(self, seed: int, t: float | np.ndarray) -> np.ndarray:
        """The drift (6,) [N, N m] at sim time t [s], or (len(t), 6) for an array of times.

        Bounded by construction: |drift| <= drift_force per force axis and drift_torque per
        torque axis, and it changes by at most 2 pi drift / min(drift_period_s) per second.
        """
        amp, omega, phase = _drift_terms(
            int(seed), self.drift_force, self.drift_torque, self.drift_period_s, self.drift_terms
        )
        ts = np.asarray(t, dtype=float)
        return (amp * np.sin(omega * ts[..., None, None] + phase)).sum(axis=-1)


@lru_cache(maxsize=64)
def _drift_terms(
    seed: int, force: float, torque: float, period_s: tuple[float, float], terms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Amplitudes, angular rates [rad/s] and phases [rad] of the drift, each (6, terms)."""
    rng = np.random.default_rng([seed, *_DRIFT_KEY])
    lo, hi = period_s
    periods = np.exp(rng.uniform(math.log(lo), math.log(hi), (6, terms)))
    phase = rng.uniform(0.0, 2 * math.pi, (6, terms))
    amp = np.repeat([[force], [torque]], 3, axis=0) / terms * np.ones((6, terms))
    return amp, 2 * math.pi / periods, phase


@dataclass
class WrenchSensor:
    """Reads the flange wrench from a compiled model; noise drawn from its own seeded stream."""

    model: mujoco.MjModel
    data: mujoco.MjData
    noise: WrenchNoise = WrenchNoise()
    seed: int = 0

    def __post_init__(self) -> None:
        f = self.model.sensor('ft_force')
        t = self.model.sensor('ft_torque')
        self._f = slice(int(f.adr[0]), int(f.adr[0]) + 3)
        self._t = slice(int(t.adr[0]), int(t.adr[0]) + 3)
        self._offset = self.noise.offset(self.seed)
        self._zero = np.zeros(6)  # what the last zero_ftsensor removed

    def true(self) -> Wrench:
        """The noise-free wrench of the current state (needs sensors computed, e.g. after a step).

        Sign: F = -m g_s with g_s gravity in the sensor frame, so with the tool plumb (flange z
        down) a hanging payload reads F_z = -m g (docs/perception.md §5.1).
        """
        sd = self.data.sensordata
        return Wrench(np.array(sd[self._f]), np.array(sd[self._t]))

    def error(self) -> np.ndarray:
        """The sensor's error (6,) [N, N m] beside the noise at the current sim time: bias,
        the episode's offset and the drift (what a tare or a zero of the empty tool removes)."""
        n = self.noise
        e = np.concatenate([n.force_bias, n.torque_bias]).astype(float)
        if n.offset_force > 0 or n.offset_torque > 0:
            e = e + self._offset
        if n.drift_force > 0 or n.drift_torque > 0:
            e = e + n.drift(self.seed, float(self.data.time))
        return e

    def zero(self) -> None:
        """Zero the sensor, as the UR controller's zero_ftsensor does: from now on the current
        load and error read as zero (the noise of the following samples stays)."""
        w = self.true()
        self._zero = np.concatenate([w.force, w.torque]) + self.error()

    def read(self) -> Wrench:
        """One sample with bias, offset, drift and noise, less the last zero.

        The noise is keyed by (seed, physics step) and the drift is a function of (seed, sim
        time): a sample taken at a given instant is the same however many other samples were
        read before it, so runs that read the sensor at different rates (the bridge streams
        it, an in-process run only reads when weighing) still see identical readings at
        identical times.
        """
        w = self.true()
        n = self.noise
        e = self.error() - self._zero
        f = w.force + e[:3]
        t = w.torque + e[3:]
        if n.force_sigma > 0 or n.torque_sigma > 0:
            step = int(round(self.data.time / self.model.opt.timestep))
            rng = np.random.default_rng([self.seed, step])
            f = f + rng.normal(0.0, n.force_sigma, 3)
            t = t + rng.normal(0.0, n.torque_sigma, 3)
        return Wrench(f, t)


def plumb_weigh(tare: Wrench, reading: Wrench, g: float = 9.81) -> tuple[float, np.ndarray]:
    """Mass [kg] and planar CoM (2,) [m, flange frame] from one plumb reading minus the tare.

    m = |dF| / g, x = -dT_y / dF_z, y = dT_x / dF_z (mujoco-notes "Wrist force/torque"); the
    CoM component along gravity is unobservable from one plumb reading.
    """
    d = reading - tare
    mass = float(np.linalg.norm(d.force)) / g
    fz = float(d.force[2])
    if abs(fz) < 1e-9:
        return mass, np.zeros(2)
    return mass, np.array([-d.torque[1] / fz, d.torque[0] / fz])
