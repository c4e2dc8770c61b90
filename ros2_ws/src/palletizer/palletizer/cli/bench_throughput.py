"""`scripts/bench throughput`: seconds per carton, where they go, and the arm's physical limit.

Each (level, planner, seed) runs one in-process episode with interpolated motion (speed 1),
camera perception and the wrist gauge, as the reference protocol's interpolated runs do. Every
settle event carries its carton's cycle as phases of simulated time (core/cycle.py,
docs/telemetry.md §8.4); the figures are taken from those, so each second is attributed.

Per level (both planners together, and per planner): `cycle_s_per_carton_median` (over the
cartons' cycles), `cartons_per_hour` (3600 over that median), `phases_s_median` (per phase, the
median over cartons of its seconds; medians do not add up to the cycle) and `phases_s_mean`
(they do: the mean cycle), `success_pct` (episodes that placed their whole load), `failures`
(the failed episodes by their result's failure cause), `placement`
(the referee's placement error p95 and max over the cartons, and the smallest stability margin
of the stack after any place), and `gauge`:
every weighing of a carton of 2 kg and above scored against the catalogue as
`scripts/bench perception` scores it, `mass_err_pct_p95` and `com_err_mm_p95` (planar), and the
same over the cartons weighed on the lift (`on_lift_*`). `overall`, per way of weighing: the
median of the levels' median cycles (`cycle_s_per_carton_median_of_levels`, the figure the
throughput goal for the reference levels is set in), the median over every carton, and
`success_pct`.

The physical limit: every pick, place and ready move the episodes execute is planned a second
time with the Cartesian speed and acceleration caps lifted, time-optimal under the joint speed
and acceleration limits only (no jerk bound), along the same waypoints: a carton's
pick -> place -> return with zero dwell on the path the palletizer takes
(`limit.path_s_per_carton_median`; a move whose uncapped twin came out slower than ours counts at
ours, `limit.uncapped_slower` says how many). `limit.joint_s_per_carton_median` drops the path: each
joint's rest-to-rest bang-bang time from the seal to the release configuration and back to the
next seal, the slowest joint setting it; no path to those configurations can be faster.
`ratio_path` and `ratio_joint` are the median cycle over each.

`--weigh still lift track` runs every episode once per way of weighing (configs/perception.yaml
gauge): still (stop to weigh, stop to zero after each place); lift (weigh on the lift where that
fit converges, core/gauge_lift.py: gauge.weigh_on_lift); track (that, and zero on the move back
where that is certain enough: gauge.zero_on_move as well). `levels` holds the first one's
figures, `by_weigh` each one's, with `cartons_on_lift` (cartons weighed without stopping),
`cartons_on_lift_after_a_hold` (the lift's fit converged after a short hold,
core/gauge_lift.py weigh_topped_up) and
`cartons_zeroed_on_move` (places followed by no zero hold) per level, and `lift_vs_still` and
`track_vs_still` the ratios of their median cycles.

A way may add levers to its weighing with `+` (cli/weighing.py): `track+joint` crosses in joint
space (motion.transit), `track+joint+early` also looks for the next carton as soon as a place
is done (episode.detect_early); each way's `by_weigh` figures and `<way>_vs_still` ratio are
named after it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from palletizer.cli.bench_graph import PROTOCOL_LEVELS, SEED_LIMIT
from palletizer.cli.seeds import check_levels_and_first_seeds
from palletizer.cli.weighing import check_way, config_way, with_way
from palletizer.core.config import load_config
from palletizer.core.cycle import PhaseSpan, phase_totals, spans_from_payload
from palletizer.core.errors import ConfigError, InvalidValue
from palletizer.core.motion import JointLimits, MotionParams, MotionPlanner, MotionResult
from palletizer.core.vocab import CyclePhase

__all__ = [
    'LimitRecorder',
    'bench_throughput',
    'joint_move_s',
    'parse_options',
    'summarise',
]

PLANNERS = ('heuristic', 'beam')
SEEDS = tuple(range(1, 21))
# Cartesian caps high enough that no joint-limited move reaches them: the arm's 2 m/s-class
# TCP speed and a few g are far below. [m/s], [m/s^2], [rad/s]
_UNCAPPED = {
    'cartesian_speed': 100.0,
    'approach_speed': 100.0,
    'angular_speed': 100.0,
    'cartesian_accel': 1000.0,
    'empty_accel': 1000.0,
    'timing': 'time_optimal',
}


def joint_move_s(q0: np.ndarray, q1: np.ndarray, limits: JointLimits) -> float:
    """Shortest rest-to-rest time [s] from q0 to q1 (6,) [rad]: each joint on its own
    bang-bang (or trapezoid) profile within its speed and acceleration limit; the slowest sets
    it. A lower bound on any path between the two configurations."""
    d = np.abs(np.asarray(q1, dtype=float) - np.asarray(q0, dtype=float))
    v = np.asarray(limits.velocity, dtype=float)
    a = np.asarray(limits.acceleration, dtype=float)
    cruise = d >= v * v / a
    t = np.where(cruise, d / v + v / a, 2.0 * np.sqrt(d / a))
    return float(t.max()) if len(t) else 0.0


@dataclass
class _Move:
    kind: str  # pick | place | hover
    path_s: float  # time-optimal duration under the joint limits only [s]
    ours_s: float  # the palletizer's own planned duration [s]
    q_start: np.ndarray
    q_act: np.ndarray  # where the gripper acts (seal, release) or the hover's end


@dataclass
class LimitRecorder:
    """A MotionPlanner stand-in for the sequencer: plans as `inner` does and, for each pick,
    place and hover it plans ok, plans the same with the Cartesian caps lifted (`uncapped`)
    and records both durations. Everything else is the inner planner's."""

    inner: MotionPlanner
    uncapped: MotionPlanner
    moves: list[_Move] = field(default_factory=list)
    failed: int = 0  # ok plans whose uncapped twin was refused
    # Uncapped twins that came out slower than our own plan (level 11 seed 1: 2 of 12 moves;
    # why is not yet known); such a move counts at our time, since our plan keeps the joint
    # limits too.
    slower: int = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _twin(
        self, kind: str, plan: Callable[..., MotionResult], ours: MotionResult, *a: Any, **k: Any
    ) -> MotionResult:
        if not ours.ok or ours.trajectory is None:
            return ours
        fast = plan(*a, **k)
        if not fast.ok or fast.trajectory is None:
            self.failed += 1
            return ours
        self.slower += _duration(fast) > _duration(ours)
        self.moves.append(
            _Move(
                kind,
                min(_duration(fast), _duration(ours)),
                _duration(ours),
                np.asarray(a[0], dtype=float),
                np.asarray(ours.trajectory.q[-1], dtype=float),
            )
        )
        return ours

    def plan_pick(self, *a: Any, **k: Any) -> MotionResult:
        ours = self.inner.plan_pick(*a, **k)
        return self._twin('pick', self.uncapped.plan_pick, ours, *a, **k)

    def plan_place(self, *a: Any, **k: Any) -> MotionResult:
        ours = self.inner.plan_place(*a, **k)
        return self._twin('place', self.uncapped.plan_place, ours, *a, **k)

    def plan_hover(self, *a: Any, **k: Any) -> MotionResult:
        ours = self.inner.plan_hover(*a, **k)
        return self._twin('hover', self.uncapped.plan_hover, ours, *a, **k)

    def per_carton(self, limits: JointLimits) -> list[dict[str, float]]:
        """Per carton (a pick, its place, the ready move after): path-limit, joint-limit and
        our planned motion seconds. The joint bound returns to the next carton's seal (the
        carton's own for the last)."""
        groups: list[list[_Move]] = []
        for m in self.moves:
            if m.kind == 'pick' or not groups:
                groups.append([])
            groups[-1].append(m)
        seals = [g[0].q_act for g in groups if g[0].kind == 'pick']
        out = []
        for i, g in enumerate(groups):
            pick = next((m for m in g if m.kind == 'pick'), None)
            place = next((m for m in g if m.kind == 'place'), None)
            if pick is None or place is None:
                continue  # a pick that was never placed: not a carton's cycle
            back = seals[i + 1] if i + 1 < len(seals) else pick.q_act
            out.append(
                {
                    'path_s': sum(m.path_s for m in g),
                    'motion_s': sum(m.ours_s for m in g),
                    'joint_s': joint_move_s(pick.q_act, place.q_act, limits)
                    + joint_move_s(place.q_act, back, limits),
                }
            )
        return out


def _duration(r: MotionResult) -> float:
    return sum(t.duration for t in (r.trajectory, r.retreat) if t is not None)


@dataclass
class _Episode:
    level: int
    planner: str
    seed: int
    success: bool
    cycles: list[tuple[PhaseSpan, ...]]
    limits: list[dict[str, float]]
    failed_twins: int
    wall_s: float
    slower_twins: int = 0
    weigh: str = 'still'  # the run's way (cli/weighing.py)
    on_lift: int = 0  # cartons weighed on the lift, without stopping
    on_move: int = 0  # places followed by a zero on the move, without a hold
    # Each weighing of a carton of 2 kg and above scored against the catalogue
    # (bench_perception.score_detect_and_weigh): mass_pct, com_mm, lift (weighed on the lift).
    weighs: list[dict[str, Any]] = field(default_factory=list)
    # Cartons weighed on the lift after a short hold that the fit took to converge
    # (core.gauge_lift.weigh_topped_up).
    lift_hold: int = 0
    # The referee's placement error of each carton [mm] and the stack's stability margin after
    # each place [mm] (negative tips).
    place_err_mm: list[float] = field(default_factory=list)
    margin_mm: list[float] = field(default_factory=list)
    # Why a failed episode ended (its result's failure cause: collision, wrong_placement, ...).
    failure: str | None = None


def _median(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return round(statistics.median(xs), 3) if xs else None


def _p95(xs: Iterable[float]) -> float | None:
    xs = list(xs)
    return round(float(np.percentile(np.asarray(xs), 95)), 3) if xs else None


def _figures(episodes: Sequence[_Episode]) -> dict[str, Any]:
    """The figures of a set of episodes (one level; one planner or both)."""
    cycles = [c for e in episodes for c in e.cycles]
    seconds = [sum(s.duration_s for s in c) for c in cycles]
    totals = [phase_totals(c) for c in cycles]
    median = _median(seconds)
    out: dict[str, Any] = {
        'episodes': len(episodes),
        'success_pct': round(100.0 * sum(e.success for e in episodes) / len(episodes), 1)
        if episodes
        else None,
        'failures': dict(
            sorted(Counter(e.failure or 'unknown' for e in episodes if not e.success).items())
        ),
        'cartons': len(cycles),
        'cycle_s_per_carton_median': median,
        'cartons_per_hour': round(3600.0 / median, 1) if median else None,
        'phases_s_median': {p.value: _median(t[p] for t in totals) for p in CyclePhase},
        'phases_s_mean': {
            p.value: round(sum(t[p] for t in totals) / len(totals), 3) if totals else None
            for p in CyclePhase
        },
    }
    weighs = [w for e in episodes for w in e.weighs]
    lift = [w for w in weighs if w.get('lift')]
    out['gauge'] = {
        'weighings_2kg_plus': len(weighs),
        'mass_err_pct_p95': _p95(w['mass_pct'] for w in weighs),
        'com_err_mm_p95': _p95(w['com_mm'] for w in weighs),
        'on_lift': len(lift),
        'on_lift_mass_err_pct_p95': _p95(w['mass_pct'] for w in lift),
        'on_lift_com_err_mm_p95': _p95(w['com_mm'] for w in lift),
    }
    errs = [x for e in episodes for x in e.place_err_mm]
    margins = [x for e in episodes for x in e.margin_mm]
    out['placement'] = {
        'placements': len(errs),
        'error_xy_mm_p95': _p95(errs),
        'error_xy_mm_max': round(max(errs), 2) if errs else None,
        'stability_margin_mm_min': round(min(margins), 1) if margins else None,
    }
    limits = [lim for e in episodes for lim in e.limits]
    if limits and median:
        path = _median(lim['path_s'] for lim in limits)
        joint = _median(lim['joint_s'] for lim in limits)
        out['limit'] = {
            'cartons': len(limits),
            'path_s_per_carton_median': path,
            'joint_s_per_carton_median': joint,
            'motion_s_per_carton_median': _median(lim['motion_s'] for lim in limits),
            'ratio_path': round(median / path, 2) if path else None,
            'ratio_joint': round(median / joint, 2) if joint else None,
            'uncapped_refused': sum(e.failed_twins for e in episodes),
            'uncapped_slower': sum(e.slower_twins for e in episodes),
        }
    return out


def summarise(episodes: Sequence[_Episode]) -> dict[str, Any]:
    """Per level: the figures of both planners together, and of each planner."""
    levels: dict[str, Any] = {}
    for level in sorted({e.level for e in episodes}):
        mine = [e for e in episodes if e.level == level]
        levels[str(level)] = {
            **_figures(mine),
            'planners': {
                p: _figures([e for e in mine if e.planner == p])
                for p in sorted({e.planner for e in mine})
            },
        }
    return levels


def _episode(
    level: int,
    planner: str,
    seed: int,
    limit: bool,
    weigh: str = 'still',
) -> _Episode:
    from palletizer.cli.bench_perception import score_detect_and_weigh
    from palletizer.core.loads import draw_load
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    cfg = with_way(load_config(), weigh)
    recorders: list[LimitRecorder] = []
    truth = {d.package_id: d.spec for d in draw_load(level, seed, cfg)}
    rows: dict[str, list[Any]] = {'detects': [], 'weighs': []}

    def probe(kind: str, pid: str, comp: Any) -> None:
        score_detect_and_weigh(kind, pid, comp, truth, rows)

    def record(sequencer: Any) -> None:
        rec = LimitRecorder(
            sequencer.motion,
            MotionPlanner(params=MotionParams.from_config(cfg.cell, **_UNCAPPED)),
        )
        sequencer.motion = rec
        recorders.append(rec)

    t0 = time.perf_counter()
    result, sink = run_inprocess(
        level,
        seed,
        build_planner(planner),
        speed=1.0,
        config=cfg,
        sink=MemorySink(),
        perception='cameras',
        gauge='wrench',
        on_sequencer=record if limit else None,
        probe=probe,
    )
    cycles = [spans_from_payload(p) for _, _, kind, _, p in sink.events if kind == 'settle']
    on_lift = sum(
        1 for _, _, kind, _, p in sink.events if kind == 'pick' and p.get('weighed') == 'lift'
    )
    lift_hold = sum(
        1 for _, _, kind, _, p in sink.events if kind == 'pick' and p.get('weighed') == 'lift_hold'
    )
    on_move = sum(
        1 for _, _, kind, _, p in sink.events if kind == 'settle' and p.get('zeroed') == 'move'
    )
    lifted = {
        pid for _, _, kind, pid, p in sink.events if kind == 'pick' and p.get('weighed') == 'lift'
    }
    for w in rows['weighs']:
        w['lift'] = w['package_id'] in lifted
    rec = recorders[0] if recorders else None
    joint_limits = MotionParams.from_config(cfg.cell).limits
    return _Episode(
        level,
        planner,
        seed,
        bool(result.success),
        [c for c in cycles if c],
        rec.per_carton(joint_limits) if rec is not None else [],
        rec.failed if rec is not None else 0,
        time.perf_counter() - t0,
        rec.slower if rec is not None else 0,
        weigh,
        on_lift,
        on_move,
        rows['weighs'],
        lift_hold,
        [1000.0 * p.error_xy_m for p in sink.placements],
        [1000.0 * st.stability_margin_m for st in sink.states],
        None if result.success else str(result.failure),
    )


def bench_throughput(
    levels: Sequence[int] = PROTOCOL_LEVELS,
    seeds: Sequence[int] = SEEDS,
    planners: Sequence[str] = PLANNERS,
    limit_levels: Sequence[int] = (11,),
    weighs: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Run every (level, planner, seed), once per way (cli/weighing.py; default: the
    config's), and return the benchmark's JSON."""
    cfg = load_config()
    weighs = tuple(dict.fromkeys(check_way(w) for w in weighs or (config_way(cfg),)))
    episodes: list[_Episode] = []
    runs = [(lv, p, s, w) for w in weighs for lv in levels for p in planners for s in seeds]
    for i, (level, planner, seed, weigh) in enumerate(runs, 1):
        e = _episode(level, planner, seed, level in limit_levels, weigh)
        episodes.append(e)
        cyc = _median(sum(s.duration_s for s in c) for c in e.cycles)
        print(
            f'[throughput] {i}/{len(runs)} L{level} {planner} seed {seed} '
            f'{e.weigh}: '
            f'{"ok" if e.success else "failed"}, {len(e.cycles)} cartons '
            f'({e.on_lift} weighed on the lift, {e.on_move} zeroed on the move), '
            f'{cyc} s/carton (median), '
            f'{e.wall_s:.0f} s wall',
            file=sys.stderr,
            flush=True,
        )
    lim = MotionParams.from_config(cfg.cell).limits
    by_weigh: dict[str, dict[str, Any]] = {}
    for w in weighs:
        mine = [e for e in episodes if e.weigh == w]
        figures = summarise(mine)
        for key, f in figures.items():
            f['cartons_on_lift'] = sum(e.on_lift for e in mine if str(e.level) == key)
            f['cartons_zeroed_on_move'] = sum(e.on_move for e in mine if str(e.level) == key)
            f['cartons_on_lift_after_a_hold'] = sum(
                e.lift_hold for e in mine if str(e.level) == key
            )
        by_weigh[w] = figures
    out: dict[str, Any] = {
        'levels': by_weigh[weighs[0]],
        'weigh': list(weighs),
        'seeds': list(seeds),
        'planners': list(planners),
        'motion': 'interpolated',
        'perception': 'cameras',
        'gauge': 'wrench',
        'limit_levels': list(limit_levels),
        'joint_limits': {
            'velocity_deg_s': [round(math.degrees(v), 1) for v in lim.velocity],
            'acceleration_rad_s2': list(lim.acceleration),
        },
        'phases': list(CyclePhase.names()),
    }
    out['overall'] = {w: _overall([e for e in episodes if e.weigh == w]) for w in weighs}
    if len(weighs) > 1:
        out['by_weigh'] = by_weigh
        for w in weighs:
            if w != 'still' and 'still' in weighs:
                out[f'{w}_vs_still'] = {
                    key: _ratio(
                        by_weigh[w][key]['cycle_s_per_carton_median'],
                        f['cycle_s_per_carton_median'],
                    )
                    for key, f in by_weigh['still'].items()
                }
    return out


def _overall(episodes: Sequence[_Episode]) -> dict[str, Any]:
    """Over every level run: the median of the levels' median cycles, the median over every
    carton, and the share of episodes that placed their whole load."""
    per_level = [
        _median(sum(s.duration_s for s in c) for e in episodes if e.level == lv for c in e.cycles)
        for lv in sorted({e.level for e in episodes})
    ]
    every = _median(sum(s.duration_s for s in c) for e in episodes for c in e.cycles)
    return {
        'levels': len(per_level),
        'cycle_s_per_carton_median_of_levels': _median(m for m in per_level if m is not None),
        'cycle_s_per_carton_median': every,
        'cartons_per_hour': round(3600.0 / every, 1) if every else None,
        'success_pct': round(100.0 * sum(e.success for e in episodes) / len(episodes), 1)
        if episodes
        else None,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def _way(text: str) -> str:
    """argparse type of --weigh: a way (cli/weighing.check_way), or the error it names."""
    try:
        return check_way(text)
    except InvalidValue as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_options(
    argv: Sequence[str] | None = None, prog: str = 'scripts/bench throughput'
) -> dict[str, Any]:
    """Checked command-line options as bench_throughput() keyword arguments; exits 2 on bad."""
    p = argparse.ArgumentParser(
        prog=prog,
        description='Seconds per carton by phase, cartons per hour and the physical limit, '
        'interpolated motion, cameras, both planners.',
    )
    p.add_argument('--levels', type=int, nargs='+', default=list(PROTOCOL_LEVELS))
    p.add_argument(
        '--seeds', type=int, default=len(SEEDS), help='seeds 1..N (default 20; at most 100)'
    )
    p.add_argument('--planners', nargs='+', default=list(PLANNERS), help='default: heuristic beam')
    p.add_argument(
        '--limit-levels',
        type=int,
        nargs='*',
        default=[11],
        help='levels whose moves are also timed at the physical limit (default 11)',
    )
    p.add_argument(
        '--weigh',
        nargs='+',
        type=_way,
        default=None,
        metavar='WAY',
        help='one run of every episode per way: still | lift | track (stop to weigh and zero; '
        'weigh on the lift; that and zero on the move), each optionally with +joint (cross in '
        'joint space) and +early (look for the next carton as soon as a place is done), e.g. '
        "track+joint+early (default: the configs' gauge.weigh_on_lift, gauge.zero_on_move, "
        'motion.transit and episode.detect_early)',
    )
    ns = p.parse_args(argv)
    cfg = load_config()
    check_levels_and_first_seeds(p, ns.levels, ns.seeds, cfg.levels, SEED_LIMIT)
    try:
        from palletizer.core.planning import PlannerKind

        for name in ns.planners:
            PlannerKind.parse(name, '--planners')
    except ConfigError as exc:
        p.error(str(exc))
    return {
        'levels': tuple(ns.levels),
        'seeds': tuple(range(1, ns.seeds + 1)),
        'planners': tuple(ns.planners),
        'limit_levels': tuple(ns.limit_levels),
        'weighs': None if ns.weigh is None else tuple(dict.fromkeys(ns.weigh)),
    }
