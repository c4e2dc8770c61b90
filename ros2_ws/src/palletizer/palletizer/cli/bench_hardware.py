"""`scripts/bench hardware`: the reference levels through the node graph in the hardware profile.

One `palletize --cell hardware --level L --seed S0 -n N --speed 1 --planner P` per level, each
in its own temporary folder, network namespace and ROS domain (cli/bench_graph.py run_graph).
The palletizer sees only a real cell's interfaces, with camera perception; the cell's scenario
driver changes the pallet between episodes and writes the referee's line of each
(bridge/scenario.py), which is the only scoring: the palletizer's own episode lines say what it
believes. The same seeds run through the in-process lockstep loop at speed 1 for comparison.

The JSON: `episodes`, `episodes_ok` (the palletizer's episode succeeded and the referee found
every handed-over carton of the full load within tolerance), `cartons` (handed over),
`cartons_ok` (within tolerance by the referee), `placement_check_err_mm_p95` (the palletizer's
own placement check against the truth), `sim_only_calls` (calls a real cell would not answer,
counted by the cell), `oracle` (true if any episode was), the `lockstep` figures, per-level
figures and the targets of issue 45 with whether each holds. Seeds above 100 are refused.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palletizer.bridge.scenario import Scenario
from palletizer.cli.bench_graph import (
    PROTOCOL_LEVELS,
    SEED_LIMIT,
    GraphRun,
    can_isolate,
    run_graph,
)
from palletizer.cli.seeds import check_levels_and_first_seeds
from palletizer.core.config import load_config
from palletizer.core.errors import ConfigError, GraphError

__all__ = ['bench_hardware', 'parse_options', 'summarise_hardware']

SEEDS = tuple(range(1, 11))
SCENARIO_FILE = 'scenario.jsonl'
# [s] one run of 10 episodes: ~2 min of wall time per level-11 episode at up to 4x real time
# on two cores (tests/graph/test_real_cell.py), more for the conveyor's waits.
TIMEOUT_S = 3600.0
TARGETS = {'episodes_ok_share': 0.97, 'placement_check_err_mm_p95': 5.0, 'sim_only_calls': 0}


def _params(work: Path, rtf: float) -> list[str]:
    """The cell's parameters for one run: the world's pace and the scenario's episode file."""
    path = work / 'hardware.yaml'
    path.write_text(
        'cell_bridge:\n  ros__parameters:\n'
        f'    real_time_factor: {float(rtf)!r}\n'
        f"    scenario_file: '{work / SCENARIO_FILE}'\n"
    )
    return ['--cell', 'hardware', f'params_file:={path}']


def _episode_ok(episode: dict[str, Any] | None, line: dict[str, Any]) -> bool:
    """The palletizer's episode succeeded and the referee found the whole load placed."""
    return bool(
        episode is not None
        and episode.get('success') is True
        and line['handed_over'] == line['load']
        and line['within_tolerance'] == line['load']
    )


def summarise_hardware(
    runs: Sequence[GraphRun], lockstep: Sequence[dict[str, Any]], seeds: Sequence[int]
) -> dict[str, Any]:
    """The benchmark's JSON from the graph runs and the in-process lockstep episodes."""
    per_level = {}
    lines: list[dict[str, Any]] = []
    episodes_ok = 0
    n_episodes = 0
    oracle = False
    for run in runs:
        by_seed = {e.get('seed'): e for e in run.episodes}
        scored = {ln['seed']: ln for ln in run.extra_lines}
        ok = sum(_episode_ok(by_seed.get(s), scored[s]) for s in seeds if s in scored)
        oracle |= any(e.get('oracle') is not False for e in run.episodes)
        oracle |= any(ln.get('oracle') is not False for ln in run.extra_lines)
        lines += run.extra_lines
        episodes_ok += ok
        n_episodes += len(seeds)
        per_level[str(run.level)] = {
            'episodes': len(seeds),
            'episodes_scored': len(scored),
            'episodes_ok': ok,
            **Scenario.summary(run.extra_lines),
            'exit_code': run.exit_code,
            'wall_s': run.wall_s,
            **({} if run.exit_code == 0 else {'tail': run.tail.splitlines()[-15:]}),
        }
    totals = Scenario.summary(lines)
    lock = {
        'episodes': len(lockstep),
        'episodes_ok': sum(1 for e in lockstep if e.get('success') is True),
        'cartons': sum(int(e.get('n_objects', 0)) for e in lockstep),
        'cartons_ok': sum(int(e.get('n_placed', 0)) for e in lockstep),
    }
    p95 = totals['placement_check_err_mm_p95']
    share = episodes_ok / n_episodes if n_episodes else 0.0
    return {
        'episodes': n_episodes,
        'episodes_ok': episodes_ok,
        'cartons': totals['cartons'],
        'cartons_ok': totals['cartons_ok'],
        'placement_check_err_mm_p95': p95,
        'placement_check_err_mm_max': totals['placement_check_err_mm_max'],
        'sim_only_calls': totals['sim_only_calls'],
        'oracle': oracle,
        'scored_by': 'the scenario referee in the cell (simulator truth), outside the graph',
        'lockstep': lock,
        'levels': per_level,
        'targets': {
            'episodes_ok': {
                'want': f'>= {TARGETS["episodes_ok_share"]:.0%} and >= lockstep - 2',
                'holds': share >= TARGETS['episodes_ok_share']
                and episodes_ok >= lock['episodes_ok'] - 2,
            },
            'placement_check_err_mm_p95': {
                'want': f'<= {TARGETS["placement_check_err_mm_p95"]}',
                'holds': p95 is not None and p95 <= TARGETS['placement_check_err_mm_p95'],
            },
            'sim_only_calls': {'want': 0, 'holds': totals['sim_only_calls'] == 0},
        },
    }


def _lockstep(level: int, seed: int, planner: str) -> dict[str, Any]:
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import run_inprocess

    result, _ = run_inprocess(level, seed, build_planner(planner), speed=1.0)
    return result.to_dict()


def bench_hardware(
    levels: Sequence[int] = PROTOCOL_LEVELS,
    seeds: Sequence[int] = SEEDS,
    planner: str = 'heuristic',
    real_time_factor: float = 4.0,
    keep: bool = False,
) -> dict[str, Any]:
    """Run the levels' seeds in the hardware profile and in-process lockstep; the JSON."""
    why = can_isolate()
    if why:
        raise GraphError(f'bench hardware: cannot isolate the graph runs: {why}')
    base = os.getpid() % 50
    runs: list[GraphRun] = []
    lockstep: list[dict[str, Any]] = []
    for i, level in enumerate(levels):
        tag = f'L{level} seeds {seeds[0]}-{seeds[-1]}'
        print(f'[hardware] {i + 1}/{len(levels)} {tag}: graph ...', file=sys.stderr, flush=True)
        run = run_graph(
            level,
            'interpolated',
            seeds,
            planner,
            1 + (base + i) % 101,
            TIMEOUT_S,
            keep,
            extra=lambda work: _params(work, real_time_factor),
            collect=SCENARIO_FILE,
        )
        runs.append(run)
        t0 = time.perf_counter()
        lockstep += [_lockstep(level, s, planner) for s in seeds]
        ok = sum(ln['within_tolerance'] for ln in run.extra_lines)
        print(
            f'[hardware] {i + 1}/{len(levels)} {tag}: graph {run.wall_s:.0f} s (exit '
            f'{run.exit_code}, {len(run.extra_lines)} pallets scored, {ok} cartons within '
            f'tolerance), lockstep {time.perf_counter() - t0:.0f} s',
            file=sys.stderr,
            flush=True,
        )
    out = summarise_hardware(runs, lockstep, seeds)
    out.update(planner=planner, seeds=list(seeds), real_time_factor=real_time_factor)
    return out


def parse_options(argv: Sequence[str] | None = None, prog: str = 'scripts/bench hardware') -> dict:
    """Checked command-line options as bench_hardware() keyword arguments; exits 2 on bad ones."""
    p = argparse.ArgumentParser(
        prog=prog,
        description='The reference levels through the node graph in the hardware profile.',
    )
    p.add_argument('--levels', type=int, nargs='+', default=list(PROTOCOL_LEVELS))
    p.add_argument(
        '--seeds', type=int, default=len(SEEDS), help='seeds 1..N (default 10; at most 100)'
    )
    p.add_argument('--planner', default='heuristic', help='heuristic | beam | grid')
    p.add_argument(
        '--real-time-factor',
        type=float,
        default=4.0,
        help='the world runs at up to this many times real time (default 4)',
    )
    p.add_argument('--keep', action='store_true', help='keep each run folder and its log')
    ns = p.parse_args(argv)
    cfg = load_config()
    check_levels_and_first_seeds(p, ns.levels, ns.seeds, cfg.levels, SEED_LIMIT)
    if not ns.real_time_factor > 0:
        p.error(f'--real-time-factor {ns.real_time_factor}; expected a number > 0')
    try:
        from palletizer.core.planning import PlannerKind

        PlannerKind.parse(ns.planner)
    except ConfigError as exc:
        p.error(str(exc))
    return {
        'levels': tuple(ns.levels),
        'seeds': tuple(range(1, ns.seeds + 1)),
        'planner': ns.planner,
        'real_time_factor': ns.real_time_factor,
        'keep': ns.keep,
    }
