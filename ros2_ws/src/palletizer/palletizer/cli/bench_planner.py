"""Planner benchmarks: decision time on a half-built pallet, and quasi-static stacking quality."""

from __future__ import annotations

import json
import math
import resource
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from palletizer.core.contracts import HeightMap, PackageSpec, PalletGeometry, PlacementPlan
from palletizer.core.errors import InvalidValue
from palletizer.core.measure import measure_placement, pallet_state, world_to_pallet
from palletizer.core.planning import BeamPlanner, GridPlanner, Planner, ScorePlanner
from palletizer.core.planning.buffer import Buffer
from palletizer.core.planning.stack import stack_from_placements
from palletizer.core.stability import validate_stack

__all__ = ['PLANNERS', 'bench_planner', 'bench_planner_quality', 'stamp']


def _heuristic_with_reach() -> Planner:
    from palletizer.core.motion.reach import AnalyticReach

    return ScorePlanner(reach=AnalyticReach())


PLANNERS: dict[str, Callable[[], Planner]] = {
    'heuristic': ScorePlanner,
    'heuristic_reach': _heuristic_with_reach,
    'beam': BeamPlanner,
    'grid': GridPlanner,
}


def stamp(cells: np.ndarray, plan: PlacementPlan, spec: PackageSpec, cell: float = 0.010) -> None:
    """Raise the cells under a placed box to its top (in place); origin = pallet (-x, -y) corner.

    A cell belongs to the box when its centre lies inside the box's axis-aligned envelope.
    """
    pallet = PalletGeometry()
    L, W, H = spec.dims_m
    c, s = abs(math.cos(plan.yaw)), abs(math.sin(plan.yaw))
    ex, ey = L * c + W * s, L * s + W * c
    ox, oy = pallet.origin_xy
    x0, x1 = plan.position[0] - ex / 2 - ox, plan.position[0] + ex / 2 - ox
    y0, y1 = plan.position[1] - ey / 2 - oy, plan.position[1] + ey / 2 - oy
    ny, nx = cells.shape
    i0, i1 = (
        max(0, math.ceil(x0 / cell - 0.5 - 1e-9)),
        min(nx, math.floor(x1 / cell - 0.5 + 1e-9) + 1),
    )
    j0, j1 = (
        max(0, math.ceil(y0 / cell - 0.5 - 1e-9)),
        min(ny, math.floor(y1 / cell - 0.5 + 1e-9) + 1),
    )
    top = plan.position[2] - pallet.deck_z + H / 2
    cells[j0:j1, i0:i1] = np.maximum(cells[j0:j1, i0:i1], top)


def _random_specs(seed: int, n: int) -> list[PackageSpec]:
    """Cartons inside the catalogue envelope (docs/levels.md §1.3), seeded."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        L, W = sorted(rng.uniform([0.24, 0.18], [0.55, 0.40]), reverse=True)
        H = float(rng.uniform(0.10, 0.26))
        cog = (rng.uniform(-0.03, 0.03), rng.uniform(-0.03, 0.03), -0.01)
        out.append(PackageSpec(f'random-{i:02d}', 'random', (L, W, H), rng.uniform(1, 8), cog))
    return out


def _episode(
    planner: Planner,
    specs: Sequence[PackageSpec],
    stop_on_collapse: bool = True,
    buffer: Buffer | None = None,
) -> dict[str, Any]:
    """Place every carton exactly where planned; stop at no slot or a quasi-static collapse.

    With a buffer, a carton with no slot is set aside while the buffer has a place for it, and
    after every placement each carton set aside is offered to the planner again (oldest first);
    the episode ends when the load is done and the buffer empty, or at a carton that fits
    neither. As in the episode (core.episode), a carton that would end it is asked for once
    more as a last resort (Planner.choose): one the buffer has no place for, and those still
    set aside once the load is done.
    """
    cells = np.zeros((80, 120))
    placed: list[Any] = []
    offsets = {s.package_id: s.cog_offset_m for s in specs}
    margins: list[float] = []
    outcome = 'complete'
    state = None
    moves = 0  # buffer moves: set-asides and take-backs

    def put(spec: PackageSpec, plan: PlacementPlan) -> bool:
        nonlocal outcome, state
        k = len(placed)
        pose = world_to_pallet((*plan.position, plan.yaw))
        p = measure_placement(k, spec, plan.layer, pose, pose, placed)
        stack = stack_from_placements([*placed, p], {s.package_id: s for s in specs})
        # Quasi-static physics: every box's load resultant inside its contact hull. A plan
        # that breaks a geometric rule (off the deck, overlapping) is reported as invalid.
        check = validate_stack(stack, min_support=0.0, min_margin=0.0)
        if stop_on_collapse and not check.ok:
            outcome = 'collapse' if check.reason == 'margin' else f'invalid_{check.reason}'
            return False
        placed.append(p)
        planner.record(p)
        stamp(cells, plan, spec)
        state = pallet_state(k, placed, offsets)
        margins.append(state.stability_margin_m)
        return True

    def drain(last_resort: bool = False) -> bool:
        """Take back every buffered carton that has a slot now (as a last resort, once the load
        is done: Planner.choose); False on a collapse."""
        nonlocal moves
        again = True
        ask = {'last_resort': True} if last_resort else {}
        while again and buffer is not None and len(buffer):
            again = False
            for waiting in buffer.specs():
                res = planner.choose(waiting, HeightMap(cells), state, (), **ask)
                if res.plan is not None:
                    buffer.take(waiting.package_id)
                    moves += 1
                    if not put(waiting, res.plan):
                        return False
                    again = True
                    break
        return True

    for spec in specs:
        res = planner.choose(spec, HeightMap(cells), state)
        if res.plan is None:
            slot = buffer.slot_for(spec) if buffer is not None else None
            if slot is not None:
                buffer.put(spec, slot)  # type: ignore[union-attr]  # a slot exists only with a buffer
                moves += 1
                continue
            res = planner.choose(spec, HeightMap(cells), state, (), last_resort=True)
            if res.plan is None:
                outcome = 'no_slot'
                break
        if not put(spec, res.plan) or not drain():
            break
    else:
        if drain(last_resort=True) and buffer is not None and len(buffer):
            outcome = 'no_slot'
    return {
        'placed': len(placed),
        'n': len(specs),
        'outcome': outcome,
        'fill_ratio': state.fill_ratio if state else 0.0,
        'min_margin_m': min(margins) if margins else None,
        'cells': cells,
        'placements': placed,
        'buffer_moves': moves,
    }


def bench_planner(repeats: int = 20) -> dict[str, Any]:
    """Median decision time [ms] of the heuristic and of beam search on a half-built pallet.

    The pallet: 8 seeded random cartons placed by the heuristic on a 120 x 80 map at 1 cm. The
    carton to plan is a fresh one, so every timed call enumerates (no cache hit). Beam search is
    timed with a two-carton forecast (the full lookahead of 3, its worst case) and greedy; the
    heuristic also with the analytic UR10e reach oracle as its out_of_reach filter. Both are also
    timed as episodes build them (`build_planner`: the measured reach table, asked where the TCP
    stands, and the gripper's footprint).
    """
    specs = _random_specs(2026, 11)
    built = _episode(ScorePlanner(), specs[:8], stop_on_collapse=False)
    cells, placements = built['cells'], built['placements']
    hm = HeightMap(cells)
    nxt = specs[8]

    def timed(make: Callable[[], Planner], forecast: Sequence[PackageSpec] = ()) -> list[float]:
        out = []
        for _ in range(repeats):
            planner = make()
            for s in specs[:8]:
                planner.book.remember(s)  # type: ignore[attr-defined]  # CoG offsets for record
            for p in placements:
                planner.record(p)
            planner.set_forecast(forecast)
            t = time.perf_counter()
            res = planner.choose(nxt, hm, None)
            out.append((time.perf_counter() - t) * 1e3)
            assert res.plan is not None, res.reject_summary
        return out

    from palletizer.core.motion.reach import AnalyticReach

    reach = AnalyticReach()
    heuristic = timed(ScorePlanner)
    with_reach = timed(lambda: ScorePlanner(reach=reach))
    beam = timed(BeamPlanner, specs[9:11])
    greedy = timed(BeamPlanner)
    from palletizer.core.planning import build_planner

    heuristic_run = timed(lambda: build_planner('heuristic'))
    beam_run = timed(lambda: build_planner('beam'), specs[9:11])
    return {
        'heuristic_ms_median': round(statistics.median(heuristic), 2),
        'heuristic_analytic_reach_ms_median': round(statistics.median(with_reach), 2),
        'beam_ms_median': round(statistics.median(beam), 2),
        'beam_greedy_ms_median': round(statistics.median(greedy), 2),
        'heuristic_as_run_ms_median': round(statistics.median(heuristic_run), 2),
        'beam_as_run_ms_median': round(statistics.median(beam_run), 2),
        'heuristic_ms_max': round(max(heuristic), 2),
        'beam_ms_max': round(max(beam), 2),
        'repeats': repeats,
        'map_cells': [int(cells.shape[1]), int(cells.shape[0])],
        'placed_before': len(placements),
        'peak_rss_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
    }


def bench_planner_quality(
    levels: Iterable[int] | None = None,
    seeds: Iterable[int] = range(1, 11),
    planners: Iterable[str] = ('heuristic', 'beam', 'grid'),
    progress: Callable[[str], None] = lambda _: None,
    draw: Callable[[int, int], Sequence[Any]] | None = None,
) -> dict[str, Any]:
    """Place each level's load with each planner under quasi-static stability (no physics).

    Each carton goes exactly where planned (true specs, exact height map); an episode stops at
    the first carton without a slot or whose placement makes the stack fail the quasi-static
    check (load resultant outside a contact hull). Per level and planner: placed % over all
    cartons, mean final fill ratio, minimum published stability margin, episode outcomes.
    levels default to every configured level; draw(level, seed) returns items with `.spec`
    (palletizer.core.loads.draw_load by default).
    """
    if draw is None or levels is None:
        from palletizer.core.config import load_config
        from palletizer.core.loads import draw_load

        draw = draw or draw_load
        levels = levels if levels is not None else sorted(load_config().levels)
    levels, seeds, planners = list(levels), list(seeds), list(planners)
    unknown = [p for p in planners if p not in PLANNERS]
    if unknown:
        raise InvalidValue(f'planner {unknown[0]!r}; expected one of {", ".join(PLANNERS)}')
    per_level: dict[str, dict[str, Any]] = {}
    totals = {p: {'placed': 0, 'n': 0, 'complete': 0, 'episodes': 0} for p in planners}
    t0 = time.perf_counter()
    for level in levels:
        row: dict[str, Any] = {}
        loads = {seed: [d.spec for d in draw(level, seed)] for seed in seeds}
        for name in planners:
            eps = [_episode(PLANNERS[name](), loads[seed]) for seed in seeds]
            placed = sum(e['placed'] for e in eps)
            n = sum(e['n'] for e in eps)
            margins = [e['min_margin_m'] for e in eps if e['min_margin_m'] is not None]
            outcomes: dict[str, int] = {}
            for e in eps:
                outcomes[e['outcome']] = outcomes.get(e['outcome'], 0) + 1
            row[name] = {
                'placed_pct': round(100.0 * placed / n, 1) if n else 0.0,
                'fill_ratio': round(float(np.mean([e['fill_ratio'] for e in eps])), 3),
                'min_stability_margin_m': round(min(margins), 4) if margins else None,
                'outcomes': outcomes,
            }
            tot = totals[name]
            tot['placed'] += placed
            tot['n'] += n
            tot['complete'] += outcomes.get('complete', 0)
            tot['episodes'] += len(eps)
            progress(
                f'level {level} {name}: {placed}/{n} placed, {outcomes} '
                f'({time.perf_counter() - t0:.0f} s)'
            )
        per_level[str(level)] = row
    overall = {
        name: {
            'placed_pct': round(100.0 * t['placed'] / t['n'], 1) if t['n'] else 0.0,
            'episodes_complete': f'{t["complete"]}/{t["episodes"]}',
        }
        for name, t in totals.items()
    }
    return {
        'levels': per_level,
        'overall': overall,
        'seeds': seeds,
        'physics': 'quasi-static (no simulation)',
        'wall_s': round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    """Print progress, then one JSON object as the last line."""
    import sys

    which = sys.argv[1] if len(sys.argv) > 1 else 'speed'
    if which == 'quality':
        names = sys.argv[2].split(',') if len(sys.argv) > 2 else ('heuristic', 'beam', 'grid')
        result = bench_planner_quality(planners=names, progress=lambda m: print(m, flush=True))
    else:
        result = bench_planner()
    print(json.dumps(result))


if __name__ == '__main__':
    main()
