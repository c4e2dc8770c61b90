"""Wrist force/torque: MuJoCo force and torque sensors at the flange plus a noise and bias model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

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


@dataclass(frozen=True)
class WrenchNoise:
    """Gaussian noise (1 sigma) and constant bias of the wrist sensor.

    UR e-series flange F/T precision is about 5 N / 0.2 N m (mujoco-notes, to be checked against
    the UR10e datasheet); configs/cell.yaml `wrench` sets the cell's values. Default: ideal.
    """

    force_sigma: float = 0.0  # [N]
    torque_sigma: float = 0.0  # [N m]
    force_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)  # [N]
    torque_bias: tuple[float, float, float] = (0.0, 0.0, 0.0)  # [N m]

    @classmethod
    def from_config(cls, wrench: Mapping[str, Any]) -> WrenchNoise:
        """From configs/cell.yaml `wrench` (noise_force_n, noise_torque_nm, bias_*)."""
        return cls(
            force_sigma=float(wrench.get('noise_force_n', 0.0)),
            torque_sigma=float(wrench.get('noise_torque_nm', 0.0)),
            force_bias=tuple(float(v) for v in wrench.get('bias_force_n', (0.0, 0.0, 0.0))),
            torque_bias=tuple(float(v) for v in wrench.get('bias_torque_nm', (0.0, 0.0, 0.0))),
        )


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

    def true(self) -> Wrench:
        """The noise-free wrench of the current state (needs sensors computed, e.g. after a step).

        Sign: F = -m g_s with g_s gravity in the sensor frame, so with the tool plumb (flange z
        down) a hanging payload reads F_z = -m g (cell-facts §5).
        """
        sd = self.data.sensordata
        return Wrench(np.array(sd[self._f]), np.array(sd[self._t]))

    def read(self) -> Wrench:
        """One sample with bias and noise.

        The noise is keyed by (seed, physics step): a sample taken at a given instant is the same
        however many other samples were read before it, so runs that read the sensor at
        different rates (the bridge streams it, an in-process run only reads when weighing)
        still see identical readings at identical times.
        """
        w = self.true()
        n = self.noise
        f = w.force + np.asarray(n.force_bias)
        t = w.torque + np.asarray(n.torque_bias)
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
