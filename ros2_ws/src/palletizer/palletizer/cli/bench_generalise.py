"""`scripts/bench generalise`: the planners on fresh loads, the reference levels and 14-17 over a
seed range (default 1-50), for the figures of planning that generalises.

Each (planner, motion mode, level, seed) is one episode, a Ray task (palletizer/cli/pool.py:
local cores, or the cluster at RAY_ADDRESS), through the
in-process wiring (the loop the node graph runs) with the default run's perception (cameras),
or, in mode `quasi_static`, without physics: every carton goes exactly where planned and the
stack is checked quasi-statically (bench_planner's episode; for fast iteration only). Each
finished episode is appended to benchmarks/results/generalise.episodes.jsonl at once, so a long
run loses nothing when stopped; `--resume` skips the episodes already there for this commit.
Writes benchmarks/results/generalise.json: per planner, level group (main: 11-13, 21-23, 31-33;
hard: 14-17) and motion mode, the episodes, cartons and failure counts, and per level. Its last
line is JSON with main_episodes_ok_pct and hard_episodes_ok_pct per planner.

`--way` runs every physics episode the way a throughput run names it (cli/weighing.py: the
gauge's weighing, then any throughput levers, e.g. track+joint+early) instead of the configs'
way; every row and the summary say which way ran.

Seeds above 100 are reserved for independent checks and refused unless --reserved is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from palletizer.cli import pool
from palletizer.cli.bench_reference import HARD_LEVELS, MAIN_LEVELS, _summarise, run_one
from palletizer.cli.loads import DEFAULT_TABLE, GENERATOR, check_loads, use_loads
from palletizer.cli.seeds import dev_seeds
from palletizer.cli.weighing import check_way, config_way
from palletizer.core.errors import InvalidValue
from palletizer.core.vocab import MotionMode, PerceptionMode
from palletizer.version import git_sha

__all__ = ['bench_generalise', 'parse_options']

PLANNERS = ('heuristic', 'beam')
MODES = {m.value: m.speed for m in MotionMode}


def quasi_static_one(job: tuple) -> dict:
    """One quasi-static episode (no physics, true specs, exact map) as a summary row."""
    from palletizer.cli.bench_planner import _episode
    from palletizer.core.loads import draw_load
    from palletizer.core.planning import build_planner

    planner, _, level, seed, perception, slots = job[:6]
    t0 = time.perf_counter()
    specs = [d.spec for d in draw_load(level, seed)]
    e = _episode(build_planner(planner), specs, buffer=_buffer(slots))
    failure = {'complete': None, 'collapse': 'stack_collapse'}.get(e['outcome'], 'wrong_placement')
    margin = e.get('min_margin_m')
    return {
        'perception': 'exact',
        'planner': planner,
        'speed': None,
        'level': level,
        'seed': seed,
        'success': e['outcome'] == 'complete',
        'n_placed': e['placed'],
        'n_objects': e['n'],
        'failure': failure,
        'outcome': e['outcome'],
        'min_margin_mm': round(margin * 1000, 1) if margin is not None else None,
        'wall_s': round(time.perf_counter() - t0, 2),
        'oracle': True,
        'buffer_slots': slots,
        'buffer_moves': e['buffer_moves'],
    }


def _buffer(slots: int):
    """The auxiliary-table buffer with `slots` places (configs/planner.yaml's other settings,
    the analytic reach), or None for 0."""
    if slots <= 0:
        return None
    import dataclasses

    from palletizer.core.config import load_config
    from palletizer.core.motion.reach import AnalyticReach
    from palletizer.core.planning.buffer import Buffer, BufferTable

    cfg = load_config()
    table = BufferTable.from_config(cfg.cell, cfg.planner.buffer, AnalyticReach())
    return Buffer(
        dataclasses.replace(table, settings=dataclasses.replace(table.settings, slots=slots))
    )


def _run(job: tuple) -> dict:
    return quasi_static_one(job) if job[1] is None else run_one(job)


def _mode(speed: float | None) -> str:
    return MotionMode.of_speed(speed).value


def bench_generalise(
    seeds: Sequence[int] = tuple(range(1, 51)),
    planners: Sequence[str] = PLANNERS,
    modes: Sequence[str] = ('interpolated',),
    levels: Sequence[int] = MAIN_LEVELS + HARD_LEVELS,
    perception: str = 'cameras',
    workers: int | None = None,
    out_dir: str | os.PathLike[str] = 'benchmarks/results',
    resume: bool = False,
    buffer_slots: int | None = None,
    loads: str = str(DEFAULT_TABLE),
    way: str | None = None,
) -> dict:
    from palletizer.core.config import load_config

    sha = git_sha()
    loads_used = check_loads(loads, levels, seeds)
    cfg = load_config()
    if buffer_slots is None:
        buffer_slots = cfg.planner.buffer.slots
    way = check_way(way) if way is not None else config_way(cfg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / 'generalise.episodes.jsonl'

    def same(r: dict) -> bool:
        run = r.get('commit') == sha and r.get('buffer_slots') == buffer_slots
        return run and r.get('way', way) == way and r.get('loads', str(DEFAULT_TABLE)) == loads

    done = {
        (r['planner'], r['speed'], r['level'], r['seed']): r
        for r in pool.earlier_rows(log, resume, same)
    }
    jobs = [
        (p, MODES[m], lv, s, perception, buffer_slots, way)
        for p in planners
        for m in modes
        for lv in levels
        for s in seeds
        if (p, MODES[m], lv, s) not in done
    ]
    rows = [r for r in done.values() if r['planner'] in planners]
    print(
        f'[generalise] {len(jobs)} episodes to run ({len(rows)} already done at {sha}), '
        f'{workers or os.cpu_count()} workers, way {way}',
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    table = loads if loads == GENERATOR else pool.absolute(loads)
    with pool.ray_session(workers), log.open('a') as f:
        finished = pool.as_completed(
            _run, jobs, workers=workers, init=use_loads, init_args=(table,)
        )
        ok = 0
        for i, (_, result) in enumerate(finished, 1):
            r = {'buffer_slots': buffer_slots, **result, 'commit': sha, 'loads': loads, 'way': way}
            f.write(json.dumps(r, sort_keys=True) + '\n')
            f.flush()
            rows.append(r)
            ok += bool(r['success'])
            rate = (time.perf_counter() - t0) / i
            print(
                f'[generalise] {i}/{len(jobs)} {r["planner"]} {_mode(r["speed"])} L{r["level"]} '
                f's{r["seed"]}: {"ok" if r["success"] else r["failure"]} '
                f'({r["n_placed"]}/{r["n_objects"]}); {ok}/{i} ok, '
                f'~{rate * (len(jobs) - i) / 60:.0f} min left',
                file=sys.stderr,
                flush=True,
            )
    results: dict = {}
    last: dict = {}
    for p in planners:
        results[p] = {}
        for m in modes:
            sel = [r for r in rows if r['planner'] == p and _mode(r['speed']) == m]
            main = _summarise([r for r in sel if r['level'] in MAIN_LEVELS])
            hard = _summarise([r for r in sel if r['level'] in HARD_LEVELS])
            per_level = {
                str(lv): _summarise([r for r in sel if r['level'] == lv]) for lv in levels
            }
            results[p][m] = {'main': main, 'hard': hard, 'levels': per_level}
        m = modes[-1]
        main, hard = results[p][m]['main'], results[p][m]['hard']
        last[p] = {
            'mode': m,
            'main_episodes_ok_pct': (
                round(100.0 * main['episodes_ok'] / main['episodes'], 1)
                if main['episodes']
                else None
            ),
            'hard_episodes_ok_pct': (
                round(100.0 * hard['episodes_ok'] / hard['episodes'], 1)
                if hard['episodes']
                else None
            ),
        }
    doc = {
        'commit': sha,
        'seeds': [min(seeds), max(seeds)] if seeds else [],
        'n_seeds': len(seeds),
        'levels': {'main': list(MAIN_LEVELS), 'hard': list(HARD_LEVELS), 'run': list(levels)},
        'perception': perception if any(MODES[m] is not None for m in modes) else 'exact',
        'buffer_slots': buffer_slots,
        'way': way,
        'loads': loads_used,
        'results': results,
        'episodes': sorted(
            rows, key=lambda r: (r['planner'], str(r['speed']), r['level'], r['seed'])
        ),
    }
    (out / 'generalise.json').write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')
    return {
        'output': str(out / 'generalise.json'),
        'episodes_run': len(jobs),
        'wall_s_total': round(time.perf_counter() - t0, 1),
        **last,
    }


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench generalise') -> dict:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split('\n\n')[0].replace('\n', ' '))
    p.add_argument('--seeds', default='1-50', help='seed range, e.g. 1-50 or 1-3,7 (default 1-50)')
    p.add_argument('--planners', nargs='+', choices=PLANNERS, default=list(PLANNERS))
    p.add_argument(
        '--modes',
        nargs='+',
        choices=tuple(MODES),
        default=['interpolated'],
        help='motion modes; quasi_static is planning only, no physics (default interpolated)',
    )
    p.add_argument('--levels', type=int, nargs='+', default=list(MAIN_LEVELS + HARD_LEVELS))
    p.add_argument('--perception', choices=PerceptionMode.names(), default='cameras')
    p.add_argument(
        '--workers', type=int, default=None, help='Ray tasks at once (default: the CPUs Ray has)'
    )
    p.add_argument('--out-dir', default='benchmarks/results')
    p.add_argument(
        '--buffer',
        type=int,
        default=None,
        metavar='K',
        help='set-aside places on the auxiliary table (default: configs/planner.yaml buffer.slots)',
    )
    p.add_argument(
        '--resume', action='store_true', help='skip episodes already run at this commit'
    )
    p.add_argument(
        '--way',
        default=None,
        help='the way every physics episode runs (scripts/bench throughput --weigh), e.g. '
        "track+joint+early (default: the configs' way)",
    )
    p.add_argument(
        '--reserved', action='store_true', help='allow seeds above 100 (independent checks only)'
    )
    p.add_argument(
        '--loads',
        default=str(DEFAULT_TABLE),
        help=f'frozen load table (default {DEFAULT_TABLE}), or {GENERATOR} to draw them now',
    )
    ns = p.parse_args(list(argv))
    seeds = dev_seeds(p, ns.seeds, ns.reserved)
    from palletizer.core.config import load_config

    known = sorted(load_config().levels)
    bad = [lv for lv in ns.levels if lv not in known]
    if bad:
        p.error(f'--levels {bad[0]}; expected some of {", ".join(map(str, known))}')
    if ns.buffer is not None and not 0 <= ns.buffer <= 8:
        p.error(f'--buffer {ns.buffer}; expected 0 to 8 places')
    if ns.workers is not None and ns.workers < 1:
        p.error(f'--workers {ns.workers}; expected >= 1')
    if ns.way is not None:
        try:
            check_way(ns.way)
        except InvalidValue as exc:
            p.error(f'--way: {exc}')
    return {
        'seeds': seeds,
        'planners': ns.planners,
        'modes': ns.modes,
        'levels': ns.levels,
        'perception': ns.perception,
        'workers': ns.workers,
        'out_dir': ns.out_dir,
        'resume': ns.resume,
        'loads': ns.loads,
        'buffer_slots': ns.buffer,
        'way': ns.way,
    }
