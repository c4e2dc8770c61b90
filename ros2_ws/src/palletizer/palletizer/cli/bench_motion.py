"""Motion benchmark: IK and checked planning time, peak memory, level-11 cycle time (JSON)."""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import sys
import time
from typing import Any

import numpy as np

from palletizer.core.config import load_config
from palletizer.core.contracts import EUR_DECK_Z
from palletizer.core.motion import (
    AABB,
    HOME_Q,
    AnalyticReach,
    CartonPose,
    CollisionWorld,
    HeightField,
    MotionParams,
    MotionPlanner,
    tool_down,
)
from palletizer.core.motion.params import TIMINGS

__all__ = ['bench_motion', 'bench_motion_all', 'cycle_level11', 'main']

DECK = EUR_DECK_Z
# Pick table top 0.58 around the station (-0.20, -0.80), half-sizes 0.36 x 0.34
# (docs/cell.md §3.3).
_PICK_TABLE = AABB((-0.56, -1.14, 0.0), (0.16, -0.46, 0.58), 'pick_table')
_PEDESTAL = AABB((0.36, -0.96, 0.0), (0.84, -0.48, 0.48), 'pedestal')


def _scenarios(seed: int, n: int) -> list[tuple[CartonPose, CartonPose, HeightField]]:
    """Seeded cartons at the table station, each placed somewhere on a half-built pallet."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        L, W = sorted(rng.uniform([0.24, 0.18], [0.55, 0.40]), reverse=True)
        H = rng.uniform(0.10, 0.40)
        heights = np.zeros((80, 120))
        # A built-up strip on the pallet's -x end; targets land on the free deck beyond it.
        heights[:, : rng.integers(10, 35)] = rng.uniform(0.0, 0.5)
        pick = CartonPose(
            -0.20 + rng.uniform(-0.02, 0.02),
            -0.80 + rng.uniform(-0.02, 0.02),
            0.58 + H / 2,
            rng.uniform(-0.2, 0.2),
            (L, W, H),
        )
        x = rng.uniform(0.75, 0.92)
        place = CartonPose(
            x, rng.uniform(-0.2, 0.2), DECK + H / 2, rng.choice([0.0, math.pi / 2]), (L, W, H)
        )
        out.append((pick, place, HeightField(heights)))
    return out


def _plan_all(planner: MotionPlanner, seed: int, repeats: int) -> dict[str, Any]:
    """Checked pick + place plans of the bench scenarios: plan time (wall and CPU) [ms],
    motion time [s] and the largest joint jerk [rad/s^3] between successive samples."""
    q0 = np.array(HOME_Q)
    plan_times, plan_cpu, durations, jerks, failures = [], [], [], [], 0
    for pick, place, hf in _scenarios(seed, repeats):
        world = CollisionWorld(hf, (_PICK_TABLE, _PEDESTAL))
        t0, c0 = time.perf_counter(), time.process_time()
        a = planner.plan_pick(q0, pick, world, mass=5.0)
        b = None
        if a.ok and a.q_end is not None and a.grasp is not None:
            b = planner.plan_place(a.q_end, place, a.grasp, world)
        plan_times.append(time.perf_counter() - t0)
        plan_cpu.append(time.process_time() - c0)
        if b is None or not b.ok:
            failures += 1
            continue
        parts = [tr for tr in (a.trajectory, a.retreat, b.trajectory, b.retreat) if tr is not None]
        durations.append(sum(tr.duration for tr in parts))
        rate = planner.params.rate_hz
        jerks += [float(np.abs(np.diff(tr.qdd, axis=0)).max()) * rate for tr in parts]
    return {
        'plan_ms': round(statistics.median(plan_times) * 1e3, 3),
        'plan_ms_p90': round(float(np.percentile(plan_times, 90)) * 1e3, 3),
        'plan_cpu_ms': round(statistics.median(plan_cpu) * 1e3, 3),
        'failures': failures,
        'motion_s': round(statistics.median(durations), 3) if durations else None,
        'max_jerk': round(max(jerks), 1) if jerks else None,
    }


def bench_motion(repeats: int = 50, seed: int = 0, rate_hz: float = 500.0) -> dict[str, Any]:
    """Median IK call [ms], median checked pick + place plan [ms] (both phases each, with
    collision checks and time-optimal timing), the same plans' median motion time with the
    time-optimal and with the jerk-limited (ruckig) timing [s], and peak RSS [MB].

    cycle_s_level11 needs the simulator: see cycle_level11 (main adds it).
    """
    cell = load_config().cell
    planner = MotionPlanner(params=MotionParams.from_config(cell, rate_hz=rate_hz))
    kin = planner.kin
    q0 = np.array(HOME_Q)
    rng = np.random.default_rng(seed)
    poses = [
        tool_down(
            rng.uniform(0.1, 1.1),
            rng.uniform(-0.35, 0.35),
            rng.uniform(0.3, 1.0),
            rng.uniform(-3, 3),
        )
        for _ in range(max(repeats, 10) * 10)
    ]
    ik_times = []
    for T in poses:
        t0 = time.perf_counter()
        kin.ik_nearest(T, q0)
        ik_times.append(time.perf_counter() - t0)
    plans = {
        timing: _plan_all(
            MotionPlanner(params=MotionParams.from_config(cell, rate_hz=rate_hz, timing=timing)),
            seed,
            repeats,
        )
        for timing in TIMINGS
    }
    default = plans[planner.params.timing]
    reach = AnalyticReach()
    xs = rng.uniform(0.0, 1.2, 1000)
    t0 = time.perf_counter()
    reach.reachable(xs, rng.uniform(-0.4, 0.4, 1000), rng.uniform(0.25, 1.2, 1000), np.zeros(1000))
    reach_ms = (time.perf_counter() - t0) * 1e3
    return {
        'ik_ms': round(statistics.median(ik_times) * 1e3, 4),
        'plan_ms': default['plan_ms'],
        'plan_ms_p90': default['plan_ms_p90'],
        # CPU time of this process: steadier than wall time on a shared machine.
        'plan_cpu_ms': default['plan_cpu_ms'],
        'plan_failures': default['failures'],
        'timing': planner.params.timing,
        'motion_s_median': default['motion_s'],
        # The same plans under every timing: the jerk-limited default against the unsmoothed
        # time-optimal profile (jerk not bounded) and ruckig per segment.
        **{f'motion_s_median_{t}': plans[t]['motion_s'] for t in TIMINGS},
        **{f'plan_ms_{t}': plans[t]['plan_ms'] for t in TIMINGS},
        'max_joint_jerk': default['max_jerk'],
        'reach_oracle_ms_per_1000': round(reach_ms, 2),
        'rate_hz': rate_hz,
        'repeats': repeats,
        'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    }


def cycle_level11(seed: int = 1) -> dict[str, Any]:
    """Simulated seconds per carton of the in-process level-11 episode at speed 1 (servo-tracked).

    cycle_s_level11: the whole episode (first delivery wait, every motion, weighing, settle,
    the closing park) divided by the carton count, excluding nothing.
    cycle_s_level11_after_first: the same from the first carton's `perceive` event on, i.e.
    without the source's first delivery wait.
    """
    # Imported here: the simulator is heavy and the planning figures do not need it. The
    # planner as the graph and the reference protocol build it (configs, reach table).
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    result, sink = run_inprocess(
        11, seed, build_planner('heuristic'), speed=1.0, sink=MemorySink()
    )
    n = max(result.n_objects, 1)
    first = next((e[1] for e in sink.events if e[2] == 'perceive'), 0.0)
    return {
        'cycle_s_level11': round(result.duration_s / n, 3),
        'cycle_s_level11_after_first': round((result.duration_s - first) / n, 3),
        'cycle_level11_placed': f'{result.n_placed}/{result.n_objects}',
        'cycle_level11_first_delivery_s': round(first, 2),
    }


def bench_motion_all() -> dict[str, Any]:
    """bench_motion() plus the simulated level-11 cycle (what `scripts/bench motion` prints)."""
    return {**bench_motion(), **cycle_level11()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='bench_motion', description=__doc__)
    ap.add_argument('--repeats', type=int, default=50)
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--rate-hz', type=float, default=500.0)
    ap.add_argument(
        '--no-cycle', action='store_true', help='skip the simulated level-11 cycle (~5 s wall)'
    )
    args = ap.parse_args(argv)
    out = bench_motion(args.repeats, args.seed, args.rate_hz)
    if not args.no_cycle:
        out.update(cycle_level11())
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    raise SystemExit(main())
