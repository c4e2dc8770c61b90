"""`scripts/bench reference`: the reference protocol, each planner in both motion modes and
both perception modes.

Levels 11 12 13 21 22 23 31 32 33 x seeds 1-3 (27 episodes, 165 cartons) plus levels 14-17 x
seeds 1-3, through the in-process wiring (the same episode loop the node graph runs). Perception
`cameras` fuses the height map and detects the carton from the noisy cameras (oracle false);
`oracle` reads both from simulator truth (oracle true). The gauge weighs from the simulated
wrench in both. Episodes run in parallel worker processes. Writes
benchmarks/results/reference.json and reference.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from palletizer.cli import pool
from palletizer.cli.loads import DEFAULT_TABLE, GENERATOR, check_loads, use_loads
from palletizer.core.vocab import MotionMode, PerceptionMode, PlannerKind
from palletizer.version import git_sha

__all__ = ['MAIN_LEVELS', 'HARD_LEVELS', 'bench_reference', 'run_one']

MAIN_LEVELS = (11, 12, 13, 21, 22, 23, 31, 32, 33)
HARD_LEVELS = (14, 15, 16, 17)
SEEDS = (1, 2, 3)
PLANNERS = PlannerKind.names()
MODES = MotionMode.physical()
PERCEPTION = PerceptionMode.names()
# The reference cell's published figures (interpolated motion, oracles; docs/planners.md §6.10).
REFERENCE = {
    'beam': {'episodes_ok': 22, 'cartons_placed': 140},
    'heuristic': {'episodes_ok': 12, 'cartons_placed': 92},
    'grid': {'episodes_ok': 14, 'cartons_placed': 91},
    'hard_levels_beam': {'episodes_ok': 2, 'episodes': 12},
}


def run_one(job: tuple) -> dict:
    """One episode in a worker process: returns a JSON-safe summary.

    job: (planner, speed, level, seed, perception[, buffer slots[, way]]); the slots, when
    given and not None, replace configs/planner.yaml buffer.slots for this episode, and the way
    (cli/weighing.py, e.g. track+joint+early), when given and not None, sets the gauge's
    weighing and the throughput levers (with_way).
    """
    import dataclasses

    from palletizer.core.config import load_config
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    planner, speed, level, seed, perception = job[:5]
    slots = job[5] if len(job) > 5 else None
    way = job[6] if len(job) > 6 else None
    cfg = load_config()
    if way is not None:
        from palletizer.cli.weighing import with_way

        cfg = with_way(cfg, way)
    if slots is not None:
        buffer = dataclasses.replace(cfg.planner.buffer, slots=int(slots))
        cfg = dataclasses.replace(cfg, planner=dataclasses.replace(cfg.planner, buffer=buffer))
    t0 = time.perf_counter()
    try:
        result, sink = run_inprocess(
            level,
            seed,
            build_planner(planner),
            speed=speed,
            config=cfg,
            sink=MemorySink(),
            perception=perception,
        )
    except Exception as exc:  # a crash is a result too: report it, do not hide it
        return {
            'perception': perception,
            'planner': planner,
            'speed': speed,
            'level': level,
            'seed': seed,
            'error': f'{type(exc).__name__}: {exc}',
            'success': False,
            'n_placed': 0,
            'n_objects': 0,
            'failure': 'crash',
            'wall_s': time.perf_counter() - t0,
        }
    margins = [s.stability_margin_m for s in sink.states]
    return {
        'perception': perception,
        'planner': planner,
        'speed': speed,
        'level': level,
        'seed': seed,
        'success': result.success,
        'n_placed': result.n_placed,
        'n_objects': result.n_objects,
        'failure': result.failure.value if result.failure else None,
        'min_margin_mm': round(min(margins) * 1000, 1) if margins else None,
        'sim_s': result.duration_s,
        'wall_s': round(time.perf_counter() - t0, 2),
        'oracle': result.oracle,
        'buffer_moves': int(result.metrics.get('buffer_moves', 0)),
        'buffer_motion_s': float(result.metrics.get('buffer_motion_s', 0.0)),
        'replans': replans(sink.events),
        'failure_reason': failure_reason(sink.events),
    }


def replans(events: Sequence[tuple]) -> int:
    """How many slots the executor refused before moving (each replan is a `plan` event
    with retry > 0): the planner planned a slot the arm could not take."""
    return sum(1 for e in events if e[2] == 'plan' and e[4].get('retry', 0) > 0)


def failure_reason(events: Sequence[tuple]) -> str | None:
    """'<package id>: <reason>' of the episode's last `fail` event (its cause where it gives
    no reason; the reason alone where the event names no carton, as a refused pick's), None
    when nothing failed. The closed failure cause says what failed; this says why: a
    wrong_placement may be a planner with no slot or an executor that refused every slot
    planned."""
    for _, _, kind, package_id, payload in reversed(events):
        if kind == 'fail':
            why = str(payload.get('reason') or payload.get('cause'))
            return f'{package_id}: {why}' if package_id else why
    return None


def _summarise(rows: Sequence[dict]) -> dict:
    margins = [r['min_margin_mm'] for r in rows if r.get('min_margin_mm') is not None]
    fails = Counter(r['failure'] for r in rows if r['failure'])
    return {
        'episodes_ok': sum(1 for r in rows if r['success']),
        'episodes': len(rows),
        'cartons_placed': sum(r['n_placed'] for r in rows),
        'cartons': sum(r['n_objects'] for r in rows),
        'min_margin_mm': min(margins) if margins else None,
        'failures': dict(sorted(fails.items())),
        'oracle_false': sum(1 for r in rows if r.get('oracle') is False),
        # Set-asides and take-backs, the episodes with any, and their sim seconds (physics
        # rows; quasi-static rows have moves only).
        'buffer_moves': sum(r.get('buffer_moves', 0) for r in rows),
        'episodes_with_buffer_moves': sum(1 for r in rows if r.get('buffer_moves')),
        'buffer_motion_s': round(sum(r.get('buffer_motion_s', 0.0) for r in rows), 2),
    }


def _markdown(summary: dict, sha: str, command: str) -> str:
    lines = [
        f'# Reference protocol results (commit {sha})',
        '',
        f'Command: `{command}`',
        '',
        'Levels 11-13, 21-23, 31-33 x seeds 1-3 (27 episodes); wrist-wrench gauge; perception '
        '`cameras` (noisy depth, oracle false) or `oracle` (simulator truth, oracle true).',
        '',
        '| perception | planner | motion | episodes | cartons | oracle false | min margin mm '
        '| failures |',
        '|---|---|---|---:|---:|---:|---:|---|',
    ]
    for key, s in summary['main'].items():
        perception, planner, mode = key.split('/')
        lines.append(
            f'| {perception} | {planner} | {mode} | {s["episodes_ok"]}/{s["episodes"]} | '
            f'{s["cartons_placed"]}/{s["cartons"]} | {s["oracle_false"]} | '
            f'{s["min_margin_mm"]} | '
            f'{", ".join(f"{k} x{v}" for k, v in s["failures"].items()) or "-"} |'
        )
    if summary['hard']:
        lines += [
            '',
            'Levels 14-17 x seeds 1-3:',
            '',
            '| perception | planner | motion | episodes | cartons |',
            '|---|---|---|---:|---:|',
        ]
    for key, s in summary['hard'].items():
        perception, planner, mode = key.split('/')
        lines.append(
            f'| {perception} | {planner} | {mode} | {s["episodes_ok"]}/{s["episodes"]} | '
            f'{s["cartons_placed"]}/{s["cartons"]} |'
        )
    lines += [
        '',
        'Reference cell (interpolated, oracles): beam 22/27 and 140/165, heuristic '
        '12/27 and 92/165, grid 14/27 and 91/165; levels 14-17 2/12 (beam).',
        '',
    ]
    return '\n'.join(lines)


def bench_reference(
    planners: Sequence[str] = PLANNERS,
    modes: Sequence[str] = tuple(MODES),
    workers: int | None = None,
    out_dir: str | os.PathLike[str] = 'benchmarks/results',
    hard: bool = True,
    perceptions: Sequence[str] = PERCEPTION,
    loads: str = str(DEFAULT_TABLE),
) -> dict:
    sha = git_sha()  # the code the episodes run, read before they start
    levels = MAIN_LEVELS + (HARD_LEVELS if hard else ())
    loads_used = check_loads(loads, levels, SEEDS)
    jobs = [
        (p, MODES[m], lv, s, pc)
        for pc in perceptions
        for p in planners
        for m in modes
        for lv in levels
        for s in SEEDS
    ]
    rows: list[dict] = []
    t0 = time.perf_counter()
    table = loads if loads == GENERATOR else pool.absolute(loads)
    with pool.ray_session(workers):
        finished = pool.as_completed(
            run_one, jobs, workers=workers, init=use_loads, init_args=(table,)
        )
        for i, (_, r) in enumerate(finished, 1):
            rows.append(r)
            bar = '#' * int(30 * i / len(jobs))
            print(
                f'\r[reference] [{bar:30s}] {i}/{len(jobs)} {r["perception"]} {r["planner"]} '
                f'L{r["level"]} s{r["seed"]} {"ok" if r["success"] else r["failure"]}   ',
                end='',
                file=sys.stderr,
                flush=True,
            )
    print(file=sys.stderr)
    summary: dict = {'main': {}, 'hard': {}}
    for pc in perceptions:
        for p in planners:
            for m in modes:
                sel = [
                    r
                    for r in rows
                    if r['perception'] == pc
                    and r['planner'] == p
                    and MotionMode.of_speed(r['speed']) == m
                ]
                key = f'{pc}/{p}/{m}'
                summary['main'][key] = _summarise([r for r in sel if r['level'] in MAIN_LEVELS])
                if hard:
                    summary['hard'][key] = _summarise(
                        [r for r in sel if r['level'] in HARD_LEVELS]
                    )
    parts = ['scripts/bench reference']
    for flag, got, every in (
        ('--perception', perceptions, PERCEPTION),
        ('--planners', planners, PLANNERS),
        ('--modes', modes, tuple(MODES)),
    ):
        if tuple(got) != tuple(every):
            parts.append(f'{flag} {" ".join(got)}')
    if not hard:
        parts.append('--no-hard')
    if loads != str(DEFAULT_TABLE):
        parts.append(f'--loads {loads}')
    command = ' '.join(parts)
    doc = {
        'commit': sha,
        'command': command,
        'loads': loads_used,
        'perception': {
            'cameras': 'height map fused from the noisy pallet cameras, detection from the '
            'pick cameras (oracle false)',
            'oracle': 'detector and height map from simulator truth (oracle true)',
        },
        'gauge': 'wrist wrench',
        'reference': REFERENCE,
        'results': {
            pc: {p: {m: summary['main'][f'{pc}/{p}/{m}'] for m in modes} for p in planners}
            for pc in perceptions
        },
        'hard_levels': {
            pc: {p: {m: summary['hard'].get(f'{pc}/{p}/{m}') for m in modes} for p in planners}
            for pc in perceptions
        },
        'episodes': sorted(
            rows,
            key=lambda r: (r['perception'], r['planner'], r['speed'], r['level'], r['seed']),
        ),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / 'reference.json').write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')
    (out / 'reference.md').write_text(_markdown(summary, sha, command))
    flat = {
        f'{k}:{f}': v[f]
        for k, v in summary['main'].items()
        for f in ('episodes_ok', 'cartons_placed')
    }
    return {
        'wall_s_total': round(time.perf_counter() - t0, 1),
        'episodes_run': len(rows),
        'output': str(out / 'reference.json'),
        **flat,
    }


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench reference') -> dict:
    """Options to run part of the protocol (the default runs all of it)."""
    import argparse

    p = argparse.ArgumentParser(prog=prog, description=__doc__.split('\n\n')[0].replace('\n', ' '))
    p.add_argument('--perception', nargs='+', choices=PERCEPTION, default=list(PERCEPTION))
    p.add_argument('--planners', nargs='+', choices=PLANNERS, default=list(PLANNERS))
    p.add_argument('--modes', nargs='+', choices=tuple(MODES), default=list(MODES))
    p.add_argument('--no-hard', action='store_true', help='skip levels 14-17')
    p.add_argument(
        '--workers', type=int, default=None, help='Ray tasks at once (default: the CPUs Ray has)'
    )
    p.add_argument('--out-dir', default='benchmarks/results', help='where the results go')
    p.add_argument(
        '--loads',
        default=str(DEFAULT_TABLE),
        help=f'frozen load table (default {DEFAULT_TABLE}), or {GENERATOR} to draw them now',
    )
    ns = p.parse_args(list(argv))
    if ns.workers is not None and ns.workers < 1:
        p.error(f'--workers {ns.workers}; expected >= 1')
    return {
        'perceptions': ns.perception,
        'planners': ns.planners,
        'modes': ns.modes,
        'hard': not ns.no_hard,
        'workers': ns.workers,
        'out_dir': ns.out_dir,
        'loads': ns.loads,
    }


if __name__ == '__main__':
    print(json.dumps(bench_reference()))
