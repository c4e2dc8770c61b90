"""In-hand weighing from the wrist wrench: mass and planar centre of mass (docs/perception.md §5).

A rigidly held, still payload reads F = -m g_s and tau = r x F in the sensor frame, with g_s the
gravity in that frame. With the tool plumb the planar CoM is exact and the component along
gravity is unobservable; it is taken from the prior (the carton's geometric centre), which is
what the stability math needs (everything downstream is planar).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from palletizer.core.contracts import Observation, PackageSpec, floats3
from palletizer.core.errors import PalletizerError, UnknownKey, close_match
from palletizer.core.motion.grasp import block_offsets, plan_grasp, tool_to_world_xy
from palletizer.core.motion.kinematics import UR10eKinematics, yaw_of

__all__ = [
    'GaugeParams',
    'GaugeReading',
    'OracleGauge',
    'R_sensor_package',
    'WeighError',
    'average_wrench',
    'carton_centre_in_sensor',
    'gauge_errors',
    'lid_in_tool',
    'off_plumb',
    'tool_tilt',
    'type_from_label',
    'weigh',
    'weigh_held',
]

_TOOL_FLIP = np.diag([1.0, -1.0, -1.0])  # tool-down frame: x along world x at yaw 0, z down


def type_from_label(package_id: str) -> str:
    """The carton type printed on its label (ids read '<type>-<nn>')."""
    return package_id.rsplit('-', 1)[0] if '-' in package_id else 'unknown'


def carton_centre_in_sensor(
    dims: Sequence[float],
    tcp_offset: float,
    cup_gap: float,
    lid_xy: Sequence[float] | None = None,
) -> np.ndarray:
    """Geometric centre (3,) of the held carton in the flange (sensor) frame [m].

    The cup block's centre sat over the lid centre at sealing (the executor cancels the block
    offset), so the lid centre is the block centre, cup_gap below the cup faces. The block is
    the rule's (plan_grasp), unless `lid_xy` (where the lid centre stands in the tool frame,
    lid_in_tool) lies nearer another block's centre: the executor takes another block where
    the rule's strikes something (core.motion.grasp.grasp_alternatives). Blocks stand a cup
    pitch apart (24 mm or more), the lid a few mm from where it was aimed at.
    """
    L, W, H = dims
    off = plan_grasp(L, W).offset
    if lid_xy is not None:
        lx, ly = float(lid_xy[0]), float(lid_xy[1])
        off = min(block_offsets(L, W), key=lambda o: math.hypot(o[0] - lx, o[1] - ly))
    return np.array([off[0], off[1], tcp_offset + cup_gap + H / 2])


def lid_in_tool(lid_xy: Sequence[float], T_world_tcp: np.ndarray) -> tuple[float, float]:
    """Where a lid centre at world (x, y) [m] stands in the tool frame (x, y) [m] of a
    tool-down pose T_world_tcp (4, 4)."""
    T = np.asarray(T_world_tcp, dtype=float)
    yaw = math.atan2(float(T[1, 0]), float(T[0, 0]))
    d = (float(lid_xy[0]) - float(T[0, 3]), float(lid_xy[1]) - float(T[1, 3]))
    v = tool_to_world_xy(d, yaw)  # the tool-down map is its own inverse (a reflection)
    return float(v[0]), float(v[1])


def R_sensor_package(carton_yaw: float, tool_yaw: float) -> np.ndarray:
    """Package axes in the sensor frame (3, 3), from the observed carton yaw and the tool
    yaw [rad]."""
    d = carton_yaw - tool_yaw
    c, s = math.cos(d), math.sin(d)
    return np.asarray(_TOOL_FLIP @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]))


def tool_tilt(T_base_tool: np.ndarray) -> float:
    """Angle [rad] between the tool z axis of a tool-down pose (4, 4) and straight down.

    The tare model is the empty gripper's wrench with the tool plumb: gravity is then the same
    vector in the sensor frame at every yaw, so one tare serves every plumb pose.
    """
    z = float(np.asarray(T_base_tool, dtype=float)[2, 2])
    return math.acos(max(-1.0, min(1.0, -z)))


class WeighError(PalletizerError):
    """The reading cannot give a mass: no payload, or it slipped while sampling."""

    def __init__(self, verdict: str, message: str) -> None:
        super().__init__(message)
        self.verdict = verdict


@dataclass(frozen=True)
class GaugeParams:
    """Verdict thresholds. no_payload_kg: below this the cups hold nothing [kg];
    slip_fraction: force-magnitude spread over the mean that counts as slipping (2 %,
    docs/perception.md §5.3);
    noise_sigma_n: sensor force noise per axis and sample [N] (cell.yaml wrench.noise_force_n).
    The slip test compares the force of `slip_chunks` consecutive chunks of the samples: their
    spread may exceed the fraction by range_sigmas x the noise of a chunk's mean. The range of
    10 Gaussian means averages ~3.1 sigma and exceeds 7 sigma with probability below 1e-4, so 7
    keeps false 'slipped' verdicts rare whatever the number of samples (the range of single
    samples, tested before, grows with their number: ~6 sigma for 500)."""

    no_payload_kg: float = 0.05
    slip_fraction: float = 0.02
    noise_sigma_n: float = 1.0
    range_sigmas: float = 7.0
    slip_chunks: int = 10
    # Tool tilt a tare or zero accepts (~0.3 deg, the same-pose guard of docs/perception.md §5.2).
    plumb_tol_rad: float = 0.005
    g: float = 9.81


@dataclass(frozen=True)
class GaugeReading:
    """The result: the PackageSpec plus what it was computed from."""

    spec: PackageSpec
    com_sensor: tuple[float, float, float]  # [m] payload CoM in the sensor frame
    quality: str  # ok


def average_wrench(samples: np.ndarray, params: GaugeParams | None = None) -> np.ndarray:
    """Mean of (N, 6) wrench samples [F, tau]; WeighError('slipped') when |F| moves too much.

    A slipping or swinging load shifts the force between chunks of the samples; the noise of
    a chunk's mean shrinks as the chunk grows, so the test keeps its power as N grows.
    """
    p = params or GaugeParams()
    s = np.asarray(samples, dtype=float)
    if s.ndim != 2 or s.shape[1] != 6 or len(s) == 0:
        raise PalletizerError(f'wrench samples shape {s.shape}; expected (N, 6) with N >= 1')
    chunks = np.array_split(s[:, :3], min(max(1, p.slip_chunks), len(s)))
    mags = np.array([float(np.linalg.norm(c.mean(axis=0))) for c in chunks])
    spread = float(mags.max() - mags.min())
    chunk_sigma = p.noise_sigma_n / math.sqrt(min(len(c) for c in chunks))  # [N]
    allowed = p.slip_fraction * float(mags.mean()) + p.range_sigmas * chunk_sigma
    if spread > allowed:
        raise WeighError(
            'slipped',
            f'|F| spread {spread:.2f} N between {len(chunks)} chunks of {len(s)} samples exceeds '
            f'{allowed:.2f} N: the payload moved while weighing',
        )
    return np.asarray(s.mean(axis=0))


def gauge_errors(measured: PackageSpec, truth: PackageSpec) -> tuple[float, float]:
    """How far a weighed spec is from the truth: (mass error [%], planar CoM error [mm]).

    mass error = 100 (m_measured - m_true) / m_true, signed; planar CoM error = the distance
    between the two cog_offset_m in the package's x-y plane (the vertical component is blind on
    a plumb reading, docs/perception.md §5.1).
    """
    if truth.mass_kg <= 0:
        raise PalletizerError(f'gauge_errors: truth.mass_kg = {truth.mass_kg}; expected > 0')
    mass_pct = 100.0 * (measured.mass_kg - truth.mass_kg) / truth.mass_kg
    d = np.subtract(measured.cog_offset_m[:2], truth.cog_offset_m[:2])
    return float(mass_pct), float(1000.0 * math.hypot(float(d[0]), float(d[1])))


def weigh(
    tare: ArrayLike,
    loaded: ArrayLike,
    *,
    package_id: str,
    type_name: str,
    dims: Sequence[float] | np.ndarray,
    centre_sensor: ArrayLike,
    R_sensor_package: np.ndarray,
    params: GaugeParams | None = None,
) -> GaugeReading:
    """Mass [kg] and CoG offset [m, package frame] from a tare and a loaded wrench [F, tau].

    centre_sensor: the carton's geometric centre in the sensor frame [m], known from the grasp
    (where the cups sealed on the observed lid), not from simulator truth.
    R_sensor_package: the package frame's axes in the sensor frame (3, 3).
    """
    p = params or GaugeParams()
    d = np.asarray(loaded, dtype=float) - np.asarray(tare, dtype=float)
    force, torque = d[:3], d[3:]
    mass = float(np.linalg.norm(force)) / p.g
    if mass < p.no_payload_kg:
        raise WeighError(
            'no_payload',
            f'payload {mass * 1000:.0f} g is below '
            f'{p.no_payload_kg * 1000:.0f} g: the cups hold nothing',
        )
    # tau = r x F is linear in r: tau = -[F]x r. Solve the observable plane exactly by a
    # truncated SVD anchored at the prior (the geometric centre): the blind axis, along F,
    # keeps the prior's value.
    Fx = np.array([[0, -force[2], force[1]], [force[2], 0, -force[0]], [-force[1], force[0], 0]])
    A = -Fx
    prior = np.asarray(centre_sensor, dtype=float)
    u, s, vt = np.linalg.svd(A)
    keep = s > 1e-3 * s[0]
    resid = torque - A @ prior
    delta = vt[keep].T @ ((u[:, keep].T @ resid) / s[keep])
    com = prior + delta
    R = np.asarray(R_sensor_package, dtype=float)
    offset = R.T @ (com - prior)
    spec = PackageSpec(package_id, type_name, floats3(dims), mass, floats3(offset))
    return GaugeReading(spec, floats3(com), 'ok')


def off_plumb(kin: UR10eKinematics, q: ArrayLike | None, params: GaugeParams) -> str | None:
    """Why a reading at joint angles `q` cannot serve as a tare (the tare model holds at plumb
    poses only), or None; None too when the angles are unknown."""
    if q is None:
        return None
    tilt = tool_tilt(kin.fk(np.asarray(q, dtype=float)))
    if tilt > params.plumb_tol_rad:
        return f'the tool is {math.degrees(tilt):.2f} deg off plumb'
    return None


def weigh_held(
    tare: ArrayLike,
    loaded: ArrayLike,
    observation: Observation,
    q: ArrayLike | None,
    *,
    kin: UR10eKinematics,
    tcp_offset: float,
    cup_gap: float,
    params: GaugeParams,
) -> GaugeReading:
    """The weighing chain, the one both wirings run: the tool's pose from the joint angles
    (forward kinematics), where the observed lid stands in the tool, the carton's centre in the
    sensor frame from the grasp, then `weigh`. Without joint angles the tool is taken at yaw 0
    and the grasp rule's block. Raises WeighError as `weigh` does.
    """
    T_tool = kin.fk(np.asarray(q, dtype=float)) if q is not None else None
    tool_yaw = float(yaw_of(T_tool)) if T_tool is not None else 0.0
    lid = lid_in_tool(observation.position[:2], T_tool) if T_tool is not None else None
    return weigh(
        tare,
        loaded,
        package_id=observation.package_id,
        type_name=type_from_label(observation.package_id),
        dims=observation.dims_guess,
        centre_sensor=carton_centre_in_sensor(observation.dims_guess, tcp_offset, cup_gap, lid),
        R_sensor_package=R_sensor_package(observation.yaw, tool_yaw),
        params=params,
    )


class OracleGauge:
    """Weighs by looking the carton up in the truth it is handed (the load's draws in-process,
    the cell's ground truth in the graph): stands in for in-hand weighing, and flags the run."""

    oracle = True

    def __init__(self, specs: Iterable[PackageSpec]) -> None:
        self.specs = {s.package_id: s for s in specs}

    def weigh(self, observation: Observation) -> PackageSpec:
        spec = self.specs.get(observation.package_id)
        if spec is None:
            ids = sorted(self.specs)
            raise UnknownKey(
                f'OracleGauge.weigh: package_id {observation.package_id!r} is not in the load; '
                f'expected one of {", ".join(ids) or "(none)"}'
                f'{close_match(observation.package_id, ids)}'
            )
        return spec

    def forecast(self, package_ids: Sequence[str]) -> list[PackageSpec]:
        return [self.specs[p] for p in package_ids if p in self.specs]
