"""`scripts/bench weigh-motion`: the in-motion weigher on lift-and-cross moves, noise and drift on.

Each weighing: a carton (the catalogue's types of 2 kg and above at their catalogue CoG
offsets, and random draws of levels 13/23/33 at their adversarial ones), picked from the pick
table and carried up to the transit height and across towards the pallet by the motion
planner (UR10e joint limits), its wrench synthesised from rigid-body dynamics plus the cell's
F/T error model (configs/cell.yaml wrench: noise, offset, drift), the sensor zeroed with the
empty tool ZERO_GAP_S before the lift. The weigher takes the samples in 50 ms chunks and hands
the estimate on when its rule says so; the figures score that estimate against the truth, and
the same samples without the inertial compensation at the same instant.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from palletizer.core.config import Config, load_config
from palletizer.core.contracts import PackageSpec, floats3
from palletizer.core.gauge import R_sensor_package, carton_centre_in_sensor, gauge_errors
from palletizer.core.gauge_motion import (
    InMotionWeigher,
    MotionGaugeParams,
    RigidLoad,
    SensorMotion,
    box_inertia,
    empty_tool_bias,
    sensor_motion,
    still_motion,
)
from palletizer.core.loads import draw_carton
from palletizer.core.motion import (
    CarriedLoad,
    MotionError,
    MotionParams,
    MotionPlanner,
    UR10eKinematics,
    Waypoint,
    plan_grasp,
    tool_down,
)
from palletizer.sim.wrench import WrenchNoise
from palletizer.sim.wrench_motion import synthetic_readings

__all__ = [
    'Carton',
    'WeighTrial',
    'bench_weigh_motion',
    'lift_and_cross',
    'parse_options',
    'run_trial',
    'trial_cartons',
    'trial_plan',
]

MIN_KG = 2.0  # the gauge's bounds hold for cartons of 2 kg and above (docs/perception.md)
CHUNK = 25  # samples per update: 50 ms at 500 Hz
# Sim time from the empty tool's zero (after the last place) to the lift: the retract, the move
# to the source, the descent and the seal, ~5 s on the level-11 cycle; the drift since the
# zero is what the weigher cannot tell from the load.
ZERO_GAP_S = 5.0
# Targets of the cross over the pallet (world x, y [m], EUR-1 centred at (0.60, 0.00),
# configs/cell.yaml pallet) and the pick table's lid centres (its centre (-0.20, -0.80)).
TARGETS = ((0.30, -0.20), (0.90, 0.20), (0.60, 0.00), (0.85, -0.25))
PICKS = ((-0.20, -0.80), (-0.12, -0.74), (-0.28, -0.86))
TABLE_TOP = 0.58  # configs/cell.yaml tables.pick.top [m]


@lru_cache(maxsize=1)
def _config() -> Config:
    return load_config()


@dataclass(frozen=True)
class Carton:
    """One carton to weigh: the truth and what the weigher knows (its dims)."""

    name: str
    dims: tuple[float, float, float]
    mass: float
    cog: tuple[float, float, float]


def trial_cartons(random_seeds: Sequence[int] = range(1, 21)) -> list[Carton]:
    """The catalogue's types of MIN_KG and above at their catalogue CoG, then the random draws
    of levels 13, 23 and 33 (adversarial CoG: 25 % of the half sizes, low) of those seeds."""
    return _catalogue_cartons() + _random_cartons(random_seeds)


def _catalogue_cartons() -> list[Carton]:
    return [
        Carton(name, t.dims, t.mass, t.cog_offset)
        for name, t in _config().catalogue.types.items()
        if t.mass >= MIN_KG
    ]


def _random_cartons(random_seeds: Sequence[int]) -> list[Carton]:
    cfg = _config()
    out = []
    for level in (13, 23, 33):
        for seed in random_seeds:
            for i in range(cfg.level(level).n):
                d = draw_carton(level, seed, i, 0, cfg)
                if d.mass >= MIN_KG:
                    out.append(
                        Carton(f'{d.type_name}-L{level}s{seed}i{i}', d.dims, d.mass, d.cog_offset)
                    )
    return out


def trial_plan(n: int) -> list[tuple[Carton, int, bool]]:
    """n weighings as (carton, index, fast): a catalogue type (each in turn) and a random draw
    (each in turn) alternate, and every two weighings the lift alternates between the
    configured and the fast one, so both kinds of carton meet both lifts."""
    catalogue, random = _catalogue_cartons(), _random_cartons(range(1, 21))
    plan = []
    for i in range(n):
        pool = catalogue if i % 2 == 0 else random
        plan.append((pool[(i // 2) % len(pool)], i, bool((i // 2) % 2)))
    return plan


@lru_cache(maxsize=2)
def _planner(fast: bool) -> MotionPlanner:
    cell = _config().cell
    # Fast: no Cartesian cap (the carton's 3 m/s^2, motion.cartesian_accel): only the joints'
    # acceleration and jerk limits bind, the arm's full acceleration.
    over: dict[str, Any] = {'cartesian_accel': 50.0, 'cartesian_jerk': 1000.0} if fast else {}
    p = MotionParams.from_config(cell, **over)
    kin = UR10eKinematics(
        base_xyz=floats3(cell.robot.base_pos), tcp_offset=cell.gripper.tcp_offset, limits=p.limits
    )
    return MotionPlanner(kin, p)


@lru_cache(maxsize=256)
def lift_and_cross(
    pick: tuple[float, float],
    height: float,
    dims_lw: tuple[float, float],
    target_i: int,
    fast: bool,
) -> tuple[SensorMotion, float]:
    """The carried move: from the seal on a lid `height` [m] above the pick table, straight up
    to the transit height, then across to above a pallet target; its sensor motion and when
    the lift ends [s]. A pick at yaw 0; the cross turns the tool by a quarter turn."""
    pl = _planner(fast)
    p = pl.params
    z0 = TABLE_TOP + height + p.cup_gap
    q0 = pl.kin.ik_nearest(
        tool_down(pick[0], pick[1], z0, 0.0), np.asarray(_config().cell.robot.home)
    )
    if q0 is None:
        raise MotionError(f'no IK at the pick {pick}')
    tx, ty = TARGETS[target_i]
    grasp = plan_grasp(dims_lw[0], dims_lw[1])
    res = pl.plan_cartesian(
        q0,
        [
            Waypoint(pick[0], pick[1], p.transit_height, 0.0, name='lift'),
            Waypoint(tx, ty, p.transit_height, math.pi / 2, name='cross'),
        ],
        load=CarriedLoad((dims_lw[0], dims_lw[1], height), grasp.offset),
    )
    if not res.ok or res.trajectory is None:
        raise MotionError(f'lift and cross not planned: {res.cause} {res.message}')
    j = res.trajectory
    motion = sensor_motion(pl.kin, j.t, j.q, j.qd, j.qdd)
    z = pl.kin.fk(j.q)[:, 2, 3]
    lift_end = float(j.t[int(np.argmax(z >= p.transit_height - 1e-3))])
    return motion, lift_end


@dataclass(frozen=True)
class WeighTrial:
    """One weighing's outcome: the handed-on estimate's errors (mass [%], planar CoM [mm]),
    when it was handed on [s from the lift's start] and after how many samples; the same
    instant without the compensation; whether the rule converged before the move ended."""

    name: str
    fast: bool
    converged: bool
    t_s: float
    samples: int
    mass_pct: float
    com_mm: float
    mass_pct_still: float
    com_mm_still: float
    peak_accel: float


def run_trial(
    carton: Carton,
    index: int,
    *,
    fast: bool,
    params: MotionGaugeParams | None = None,
    zero_gap_s: float = ZERO_GAP_S,
    track_bias: bool = False,
) -> WeighTrial:
    """Weighing `index` (seeds its cell seed 1-50, pick, target and truth inertia) of `carton`,
    the sensor zeroed `zero_gap_s` before the lift. With `track_bias` the bias since the zero
    is tracked on an empty-tool move (another lift-and-cross, ending 1 s before the lift)."""
    cfg = _config()
    seed = 1 + index % 50
    rng = np.random.default_rng([seed, index, 0x3E1])
    pick = PICKS[index % len(PICKS)]
    motion, _ = lift_and_cross(pick, carton.dims[2], carton.dims[:2], index % len(TARGETS), fast)
    # The carton's truth: its CoM where the catalogue puts it, the lid centre under the cup
    # block (tool yaw 0, the carton turned by 0 or a half turn), and its inertia a box's with
    # each axis scaled within +-30 % (contents are not uniform).
    turn = math.pi * (index % 2)
    R = R_sensor_package(turn, 0.0)
    g = cfg.cell.gripper
    centre = carton_centre_in_sensor(carton.dims, g.tcp_offset, g.cup_gap)
    com = centre + R @ np.asarray(carton.cog)
    I_c = R @ (box_inertia(carton.mass, carton.dims) * rng.uniform(0.7, 1.3, 3)) @ R.T
    load = RigidLoad(carton.mass, floats3(com), tuple(floats3(row) for row in I_c))
    noise = WrenchNoise.from_config(cfg.cell.wrench)
    # The empty tool at rest, plumb, where it sealed (the move's first sample is at rest but
    # may already accelerate: a time-optimal profile starts at full acceleration).
    zero_motion = still_motion(motion[:1])
    t_start = 20.0 + 7.0 * index  # sim time of the lift (drift phase varies by weighing)
    w = synthetic_readings(
        load,
        motion,
        noise=noise,
        seed=seed,
        t_start=t_start,
        t_zero=t_start - zero_gap_s,
        zero_motion=zero_motion,
        stream=index,
    )
    bias = bias_sigma = None
    if track_bias:
        empty, _ = lift_and_cross(
            PICKS[(index + 1) % len(PICKS)], 0.10, (0.30, 0.20), (index + 1) % len(TARGETS), fast
        )
        w_empty = synthetic_readings(
            None,
            empty,
            noise=noise,
            seed=seed,
            t_start=t_start - 1.0 - float(empty.t[-1]),
            t_zero=t_start - zero_gap_s,
            zero_motion=zero_motion,
            stream=index + 100_000,
        )
        b, sb = empty_tool_bias(w_empty, empty, params=params)
        bias, bias_sigma = tuple(float(v) for v in b), tuple(float(v) for v in sb)
    p = params or _params(False)
    kw: dict[str, Any] = {
        'prior_com': tuple(centre),
        'dims': carton.dims,
        'R_sensor_package': R,
        'params': p,
        'bias': bias,
        'bias_sigma': bias_sigma,
    }
    comp = InMotionWeigher(**kw)
    still = InMotionWeigher(**kw, compensate=False)
    truth = PackageSpec('c-00', carton.name, carton.dims, carton.mass, carton.cog)
    handed = None
    for i in range(0, len(motion), CHUNK):
        s = slice(i, i + CHUNK)
        comp.add(w[s], motion[s])
        still.add(w[s], motion[s])
        if comp.samples >= p.min_samples and comp.estimate().converged:
            handed = comp.samples
            break
    est = comp.reading('c-00', carton.name).spec
    mass_pct, com_mm = gauge_errors(est, truth)
    mass_still, com_still = gauge_errors(still.reading('c-00', carton.name).spec, truth)
    n = comp.samples
    return WeighTrial(
        name=carton.name,
        fast=fast,
        converged=handed is not None,
        t_s=float(motion.t[n - 1] - motion.t[0]),
        samples=n,
        mass_pct=mass_pct,
        com_mm=com_mm,
        mass_pct_still=mass_still,
        com_mm_still=com_still,
        peak_accel=float(np.abs(motion.f - motion.f[:1]).max()),
    )


def _summary(trials: Sequence[WeighTrial]) -> dict[str, Any]:
    def p95(v: Sequence[float]) -> float:
        return round(float(np.percentile(np.abs(v), 95)), 3)

    return {
        'weighings': len(trials),
        'converged': sum(t.converged for t in trials),
        'mass_err_pct_p95': p95([t.mass_pct for t in trials]),
        'com_err_mm_p95': p95([t.com_mm for t in trials]),
        'mass_err_pct_max': round(max(abs(t.mass_pct) for t in trials), 3),
        'com_err_mm_max': round(max(t.com_mm for t in trials), 3),
        'uncompensated_mass_err_pct_p95': p95([t.mass_pct_still for t in trials]),
        'uncompensated_com_err_mm_p95': p95([t.com_mm_still for t in trials]),
        'time_to_converge_s_median': round(float(np.median([t.t_s for t in trials])), 3),
        'time_to_converge_s_p95': p95([t.t_s for t in trials]),
        'samples_median': int(np.median([t.samples for t in trials])),
        'peak_accel_mps2_max': round(max(t.peak_accel for t in trials), 2),
    }


def _params(fit_bias: bool) -> MotionGaugeParams:
    w = _config().cell.wrench
    return MotionGaugeParams(
        force_sigma_n=w.noise_force_n, torque_sigma_nm=w.noise_torque_nm, fit_bias=fit_bias
    )


def bench_weigh_motion(weighings: int = 240, fit_bias: bool = False) -> dict[str, Any]:
    """`weighings` weighings of trial_plan (catalogue types and random draws, the configured
    and the fast lift); the figures of each and of both; then a level-11-like case: the
    std_m carton, CoG centred, 50 weighings on the configured lift; then 100 weighings 300 s
    after the zero, trusting it or tracking the bias on an empty-tool move."""
    cartons = trial_cartons()
    p = _params(fit_bias)
    t0 = time.perf_counter()
    trials = [
        run_trial(carton, i, fast=fast, params=p) for carton, i, fast in trial_plan(weighings)
    ]
    t = _config().catalogue.types['std_m']
    std_m = Carton('std_m', t.dims, t.mass, (0.0, 0.0, 0.0))
    level11 = [run_trial(std_m, i, fast=False, params=p) for i in range(50)]
    # No zero since the episode's tare, 300 s of drift: the zero trusted, or the bias tracked.
    old = [
        (
            run_trial(cartons[i], i, fast=False, params=p, zero_gap_s=300.0),
            run_trial(cartons[i], i, fast=False, params=p, zero_gap_s=300.0, track_bias=True),
        )
        for i in range(100)
    ]
    took = time.perf_counter() - t0
    print(f'[weigh-motion] {weighings + 250} weighings in {took:.1f} s', file=sys.stderr)
    return {
        'cartons': len(cartons),
        'fit_bias': fit_bias,
        'zero_gap_s': ZERO_GAP_S,
        'all': _summary(trials),
        'configured_lift': _summary([t for t in trials if not t.fast]),
        'fast_lift': _summary([t for t in trials if t.fast]),
        'level11_std_m': _summary(level11),
        'zero_300s_trusted': _summary([a for a, _ in old]),
        'zero_300s_tracked': _summary([b for _, b in old]),
    }


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench weigh-motion') -> dict:
    p = argparse.ArgumentParser(prog=prog, description=(__doc__ or '').splitlines()[0])
    p.add_argument('--weighings', type=int, default=240, help='number of weighings (default 240)')
    p.add_argument(
        '--fit-bias', action='store_true', help='fit the sensor bias instead of trusting the zero'
    )
    ns = p.parse_args(list(argv))
    if ns.weighings < 1:
        p.error(f'--weighings must be >= 1; got {ns.weighings}')
    return {'weighings': ns.weighings, 'fit_bias': ns.fit_bias}
