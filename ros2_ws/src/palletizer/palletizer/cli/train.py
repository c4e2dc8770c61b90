"""`scripts/train`: train the score heuristic's 14 weights by the cross-entropy method, each
candidate evaluated on (level, seed) pairs as Ray tasks (palletizer/cli/pool.py).

    scripts/train --levels 16 --seeds 1-10 --iterations 3 --population 4

The evaluator is quasi-static (docs/training.md): each carton of the level's load goes exactly
where the candidate's planner puts it (true specs, exact height map, the configured buffer), the
episode stops at a carton with no slot or one whose placement fails the quasi-static stack check;
then the jolt trials (5 levels x 2 lateral axes, each from the same final stack) count the boxes
that tip. Loss = missing x (10 + 1) + fallen; candidates rank by (loss, missing, fallen).

Writes runs/<UTC stamp>-weight-training/: manifest.json, config_snapshot.json,
source_snapshot/, evaluations/<id>.json, progress.jsonl, best_weights.json (loadable with
planner_weights:=), summary.json. The last line printed is the summary as JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from palletizer.cli import pool
from palletizer.cli.loads import DEFAULT_TABLE, GENERATOR, check_loads, use_loads
from palletizer.core.errors import PalletizerError
from palletizer.core.params.planning import read_weights
from palletizer.core.training import (
    JOLT_AXES,
    JOLT_LEVELS_G,
    CemState,
    Score,
    jolt_falls,
    loss,
    n_trials,
    weight_id,
)
from palletizer.version import git_dirty, git_sha

__all__ = ['compare', 'evaluate', 'evaluator', 'main', 'parse_options', 'train']

OBJECTIVE = (
    'minimise the sum over (level, seed) of n_missing x (n_trials + 1) + fallen boxes; '
    'n_trials = 5 jolt levels x 2 lateral axes = 10, so a missing box costs 11; rank by '
    '(loss, missing, fallen)'
)
# Copied into source_snapshot/: what decides an evaluation's numbers.
SOURCES = (
    'cli/train.py',
    'cli/pool.py',
    'cli/bench_planner.py',
    'core/training.py',
    'core/stability.py',
    'core/planning/heuristic.py',
    'core/planning/heuristic_candidates.py',
    'core/planning/heuristic_windows.py',
    'core/planning/heuristic_rejects.py',
    'core/planning/stack.py',
    'core/params/planning.py',
)


# ---------------------------------------------------------------- the evaluator (a Ray task)


@cache
def _config() -> Any:
    from palletizer.core.config import load_config

    return load_config()


@cache
def _reach() -> Any:
    from palletizer.core.motion.reach import ReachTable

    return ReachTable.load(_config().reach_table)


@cache
def _buffer_table() -> Any:
    """The auxiliary-table buffer as configured (generalise's quasi-static episodes use the
    same), or None without slots; built once per worker from the configuration read once."""
    from palletizer.core.motion.reach import AnalyticReach
    from palletizer.core.planning.buffer import BufferTable

    cfg = _config()
    if cfg.planner.buffer.slots <= 0:
        return None
    return BufferTable.from_config(cfg.cell, cfg.planner.buffer, AnalyticReach())


def evaluate(job: Mapping[str, Any]) -> dict[str, Any]:
    """One candidate on one (level, seed): the quasi-static episode, then the jolt trials.

    job: id, iteration, candidate, level, seed, weights. Deterministic in the job; wall_s,
    node and pid say where and how fast it ran.
    """
    from palletizer.cli.bench_planner import _episode
    from palletizer.core.loads import draw_load
    from palletizer.core.planning import build_planner
    from palletizer.core.planning.buffer import Buffer
    from palletizer.core.planning.stack import stack_from_placements

    t0 = time.perf_counter()
    cfg = _config()
    params = dataclasses.replace(cfg.planner.heuristic, weights=dict(job['weights']))
    planner = build_planner('heuristic', cfg, heuristic=params, reach=_reach())
    specs = [d.spec for d in draw_load(job['level'], job['seed'])]
    table = _buffer_table()
    e = _episode(planner, specs, buffer=Buffer(table) if table is not None else None)
    boxes = stack_from_placements(e['placements'], {s.package_id: s for s in specs})
    trials = jolt_falls(boxes)
    missing = e['n'] - e['placed']
    fallen = sum(int(t['fallen']) for t in trials)
    node = ''
    try:
        import ray

        if ray.is_initialized():
            node = ray.get_runtime_context().get_node_id()
    except ImportError:  # evaluated outside Ray
        pass
    return {
        'id': job['id'],
        'iteration': job['iteration'],
        'candidate': job['candidate'],
        'level': job['level'],
        'seed': job['seed'],
        'weight_id': weight_id(job['weights']),
        'weights': dict(job['weights']),
        'n_objects': e['n'],
        'n_placed': e['placed'],
        'missing': missing,
        'outcome': e['outcome'],
        'min_margin_m': e['min_margin_m'],
        'fill_ratio': round(float(e['fill_ratio']), 6),
        'buffer_moves': e['buffer_moves'],
        'placements': [
            {'package_id': p.package_id, 'pose': [round(float(v), 6) for v in p.actual_pose]}
            for p in e['placements']
        ],
        'trials': trials,
        'n_trials': len(trials),
        'fallen': fallen,
        'loss': loss(missing, fallen, len(trials)),
        'wall_s': round(time.perf_counter() - t0, 3),
        'node': node,
        'pid': os.getpid(),
    }


# ---------------------------------------------------------------- the run's files


class _Progress:
    """progress.jsonl: one event a line, flushed and fsync'd, so a stopped run keeps its trace."""

    def __init__(self, path: Path) -> None:
        self.f = path.open('a')
        self.t0 = time.perf_counter()

    def __call__(self, event: str, **fields: Any) -> None:
        row = {'event': event, 't_s': round(time.perf_counter() - self.t0, 3), **fields}
        self.f.write(json.dumps(row, sort_keys=True) + '\n')
        self.f.flush()
        os.fsync(self.f.fileno())

    def close(self) -> None:
        self.f.close()


def _bar(done: int, total: int, t0: float, text: str) -> None:
    """A progress bar on stderr: share done, count, rate and time left."""
    width = 30
    fill = int(width * done / total) if total else width
    rate = done / max(time.perf_counter() - t0, 1e-9)
    left = (total - done) / rate if rate > 0 else 0.0
    print(
        f'\r[train] [{"#" * fill}{"." * (width - fill)}] {done}/{total} '
        f'{rate:.2f} eval/s ~{left / 60:.1f} min left {text}   ',
        end='',
        file=sys.stderr,
        flush=True,
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _versions() -> dict[str, str]:
    import ray

    return {
        'python': platform.python_version(),
        'numpy': np.__version__,
        'ray': ray.__version__,
        'platform': platform.platform(),
    }


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')


def _snapshot(run: Path, config_dir: Path) -> dict[str, str]:
    """Copy the evaluator's sources and the planner config; their sha256 by name."""
    pkg = Path(__file__).resolve().parent.parent
    dest = run / 'source_snapshot'
    shas: dict[str, str] = {}
    for rel in SOURCES:
        src = pkg / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
            shas[rel] = _sha256(src)
    for name in ('planner.yaml', 'stability.yaml'):
        src = config_dir / name
        if src.is_file():
            (dest / 'configs').mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / 'configs' / name)
            shas[f'configs/{name}'] = _sha256(src)
    return shas


# ---------------------------------------------------------------- training


def train(
    levels: Sequence[int] = (16,),
    seeds: Sequence[int] = (1,),
    iterations: int = 3,
    population: int = 4,
    elite_fraction: float = 0.5,
    sigma: float = 0.35,
    training_seed: int = 2026,
    initial: str | None = None,
    workers: int | None = None,
    runs_dir: str | os.PathLike[str] | None = None,
    loads: str = str(DEFAULT_TABLE),
    progress_bar: bool = True,
) -> dict[str, Any]:
    """The whole run; returns summary.json's content (its `run` is the run folder)."""
    from palletizer.core.config import config_dir, load_config

    cfg = load_config()
    levels, seeds = list(levels), list(seeds)
    loads_used = check_loads(loads, levels, seeds)
    start = dict(read_weights(initial)) if initial else dict(cfg.planner.heuristic.weights)
    state = CemState.start(start, sigma)
    rng = np.random.default_rng(training_seed)
    trials = n_trials()
    stamp = datetime.now(timezone.utc).strftime('%Y%m%d-%H%M%S')
    base = Path(runs_dir if runs_dir is not None else cfg.telemetry.runs_dir)
    run = base / f'{stamp}-weight-training'
    k = 1
    while run.exists():  # two runs in one second
        run, k = base / f'{stamp}-{k}-weight-training', k + 1
    (run / 'evaluations').mkdir(parents=True)
    cdir = config_dir()
    shas = _snapshot(run, Path(cdir))
    hyper = {
        'iterations': iterations,
        'population': population,
        'elite_fraction': elite_fraction,
        'elite_count': max(1, math.ceil(population * elite_fraction)),
        'sigma': sigma,
        'training_seed': training_seed,
        'mean_step': 0.7,
        'std_step': 0.5,
        'std_floor': 0.05,
        'parameterisation': 'weights = initial total x softmax(logits) over the terms whose '
        'initial weight is > 0; those at 0 stay 0',
    }
    protocol = {
        'kind': 'quasi-static jolts (no physics)',
        'levels_g': list(JOLT_LEVELS_G),
        'axes': list(JOLT_AXES),
        'n_trials': trials,
        'restored_between_trials': True,
        'fall': 'the load resultant over a box base, shifted by accel x its height, leaves the '
        'contact hull, under +a or -a; a box on a fallen box falls',
        'episode': 'every carton placed exactly where planned (true specs, exact height map, '
        'configured buffer); stops at no slot or a quasi-static collapse',
    }
    manifest = {
        'schema': 1,
        'algorithm': 'cross_entropy_policy_search',
        'objective': OBJECTIVE,
        'levels': levels,
        'seeds': seeds,
        'loads': loads_used,
        'hyper_parameters': hyper,
        'initial_weights': state.initial,
        'initial_weights_source': initial or f'{cdir}/planner.yaml heuristic.weights',
        'free_terms': list(state.free),
        'stability_protocol': protocol,
        'sha256': shas,
        'runtime': _versions(),
        'git_sha': git_sha(),
        'git_dirty': git_dirty(),
        'ray_address': os.environ.get('RAY_ADDRESS') or 'local',
        'workers': workers,
        'started_utc': stamp,
    }
    _write_json(run / 'manifest.json', manifest)
    heuristic = {
        f.name: getattr(cfg.planner.heuristic, f.name)
        for f in dataclasses.fields(cfg.planner.heuristic)
    }
    heuristic['weights'] = dict(heuristic['weights'])
    _write_json(
        run / 'config_snapshot.json',
        {
            'planner_heuristic': heuristic,
            'buffer_slots': cfg.planner.buffer.slots,
            'stability_protocol': protocol,
            'config_dir': str(cdir),
        },
    )
    log = _Progress(run / 'progress.jsonl')
    log('training_started', run=str(run), levels=levels, seeds=seeds, **hyper)
    table = loads if loads == GENERATOR else pool.absolute(loads)
    pairs = [(lv, s) for lv in levels for s in seeds]
    total = iterations * population * len(pairs)
    done = 0
    t0 = time.perf_counter()
    history: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    with pool.ray_session(workers):
        for it in range(iterations):
            cands = state.sample(rng, population)
            weights = [state.weights(c) for c in cands]
            log(
                'iteration_started', iteration=it, mean=state.mean.tolist(), std=state.std.tolist()
            )
            jobs = []
            for c, w in enumerate(weights):
                log(
                    'candidate_started',
                    iteration=it,
                    candidate=c,
                    weight_id=weight_id(w),
                    weights=w,
                )
                for lv, s in pairs:
                    eid = f'i{it:03d}-c{c:03d}-l{lv:02d}-s{s:06d}'
                    jobs.append(
                        {
                            'id': eid,
                            'iteration': it,
                            'candidate': c,
                            'level': lv,
                            'seed': s,
                            'weights': w,
                        }
                    )
                    log('evaluation_started', id=eid)
            results: list[dict[str, Any] | None] = [None] * len(jobs)
            left = [len(pairs)] * population
            try:
                for i, r in pool.as_completed(
                    evaluator(), jobs, workers=workers, init=use_loads, init_args=(table,)
                ):
                    results[i] = r
                    _write_json(run / 'evaluations' / f'{r["id"]}.json', r)
                    done += 1
                    log(
                        'evaluation_finished',
                        id=r['id'],
                        loss=r['loss'],
                        missing=r['missing'],
                        fallen=r['fallen'],
                        outcome=r['outcome'],
                        wall_s=r['wall_s'],
                    )
                    log('evaluation_progress', done=done, total=total)
                    if progress_bar:
                        _bar(
                            done,
                            total,
                            t0,
                            f'it {it} c{r["candidate"]} L{r["level"]} s{r["seed"]} loss {r["loss"]}',
                        )
                    c = r['candidate']
                    left[c] -= 1
                    if left[c] == 0:
                        sel = [x for x in results if x is not None and x['candidate'] == c]
                        log('candidate_finished', iteration=it, candidate=c, **_score(sel))
            except Exception as exc:
                failed = [j['id'] for j, r in zip(jobs, results, strict=True) if r is None]
                log('evaluation_failed', ids=failed, error=f'{type(exc).__name__}: {exc}')
                log.close()
                raise
            scores, rows = [], []
            for c, w in enumerate(weights):
                sel = [r for r in results if r is not None and r['candidate'] == c]
                sc = _score(sel)
                scores.append(Score(sc['loss'], sc['missing'], sc['fallen']))
                rows.append({'candidate': c, 'weight_id': weight_id(w), 'weights': w, **sc})
            elite = state.update(cands, scores, elite_fraction)
            top = rows[elite[0]]
            key = (top['loss'], top['missing'], top['fallen'])
            if best is None or key < (best['loss'], best['missing'], best['fallen']):
                best = {'iteration': it, **top}
            history.append({'iteration': it, 'candidates': rows, 'elite': elite, 'best': top})
            log(
                'iteration_finished',
                iteration=it,
                elite=elite,
                best=top['weight_id'],
                loss=top['loss'],
            )
    if progress_bar:
        print(file=sys.stderr)
    wall = time.perf_counter() - t0
    assert best is not None  # iterations >= 1
    default = history[0]['candidates'][0]  # iteration 0, candidate 1: the initial weights
    best_doc = {
        'schema': 1,
        'weight_id': best['weight_id'],
        'weights': best['weights'],
        'loss': best['loss'],
        'missing': best['missing'],
        'fallen': best['fallen'],
        'iteration': best['iteration'],
        'candidate': best['candidate'],
        'levels': levels,
        'seeds': seeds,
        'objective': OBJECTIVE,
        'use': f'scripts/palletize --planner heuristic planner_weights:={run / "best_weights.json"}',
    }
    _write_json(run / 'best_weights.json', best_doc)
    summary = {
        'run': str(run),
        'best': {
            k: best[k]
            for k in ('weight_id', 'loss', 'missing', 'fallen', 'iteration', 'candidate')
        },
        'initial': {k: default[k] for k in ('weight_id', 'loss', 'missing', 'fallen')},
        'iterations': [
            {
                'iteration': h['iteration'],
                'best_loss': h['best']['loss'],
                'losses': [c['loss'] for c in h['candidates']],
                'elite': h['elite'],
            }
            for h in history
        ],
        'evaluations': done,
        'wall_s': round(wall, 1),
        'evaluations_per_s': round(done / wall, 3) if wall > 0 else None,
    }
    _write_json(run / 'summary.json', summary)
    log('training_finished', best=best['weight_id'], loss=best['loss'], wall_s=round(wall, 1))
    log.close()
    return summary


def fixed_jobs(
    weights: Mapping[str, float], levels: Sequence[int], seeds: Sequence[int]
) -> list[dict[str, Any]]:
    """One evaluation job per (level, seed) of one set of weights (iteration 0, candidate 0)."""
    return [
        {
            'id': f'l{lv:02d}-s{s:06d}',
            'iteration': 0,
            'candidate': 0,
            'level': lv,
            'seed': s,
            'weights': dict(weights),
        }
        for lv in levels
        for s in seeds
    ]


def evaluator() -> Callable[[Any], dict[str, Any]]:
    """`evaluate` by its importable name: under `python -m` this module is __main__, which a
    Ray worker cannot import."""
    from palletizer.cli import train as module

    return module.evaluate


def _score(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A candidate's totals over its evaluations."""
    return {
        'loss': sum(int(r['loss']) for r in rows),
        'missing': sum(int(r['missing']) for r in rows),
        'fallen': sum(int(r['fallen']) for r in rows),
        'placed': sum(int(r['n_placed']) for r in rows),
        'cartons': sum(int(r['n_objects']) for r in rows),
        'complete': sum(1 for r in rows if r['outcome'] == 'complete'),
        'evaluations': len(rows),
    }


# ---------------------------------------------------------------- comparison


def compare(
    files: Sequence[str | None],
    levels: Sequence[int],
    seeds: Sequence[int],
    workers: int | None = None,
    loads: str = str(DEFAULT_TABLE),
) -> dict[str, Any]:
    """Each weights file (None: configs/planner.yaml) through the training evaluator on every
    (level, seed): its totals, overall and per level."""
    from palletizer.core.config import load_config

    check_loads(loads, levels, seeds)
    table = loads if loads == GENERATOR else pool.absolute(loads)
    out: dict[str, Any] = {}
    with pool.ray_session(workers):
        for f in files:
            w = dict(read_weights(f)) if f else dict(load_config().planner.heuristic.weights)
            jobs = fixed_jobs(w, levels, seeds)
            rows = pool.run_all(
                evaluator(), jobs, workers=workers, init=use_loads, init_args=(table,)
            )
            out[f or 'configs/planner.yaml'] = {
                'weight_id': weight_id(w),
                **_score(rows),
                'levels': {
                    str(lv): _score([r for r in rows if r['level'] == lv]) for lv in levels
                },
            }
    return out


# ---------------------------------------------------------------- command line


def _seeds(p: argparse.ArgumentParser, text: str, reserved: bool) -> list[int]:
    from palletizer.cli.seeds import dev_seeds

    return dev_seeds(p, text, reserved, hint='train on 1-50')


def _levels(p: argparse.ArgumentParser, levels: Sequence[int]) -> list[int]:
    from palletizer.core.config import load_config

    known = sorted(load_config().levels)
    bad = [lv for lv in levels if lv not in known]
    if bad:
        p.error(f'--levels {bad[0]}; expected some of {", ".join(map(str, known))}')
    return list(levels)


def parse_options(argv: Sequence[str], prog: str = 'scripts/train') -> dict[str, Any]:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split('\n\n')[0].replace('\n', ' '))
    p.add_argument('--levels', type=int, nargs='+', default=[16], help='levels (default 16)')
    p.add_argument('--seeds', default='1', help='seeds, e.g. 1-50 or 1-3,7 (default 1)')
    p.add_argument('--iterations', type=int, default=3, help='CEM iterations (default 3)')
    p.add_argument(
        '--population', type=int, default=4, help='candidates per iteration (default 4)'
    )
    p.add_argument('--elite-fraction', type=float, default=0.5, help='elite share (default 0.5)')
    p.add_argument('--sigma', type=float, default=0.35, help='initial std in log space (0.35)')
    p.add_argument('--training-seed', type=int, default=2026, help='random seed (default 2026)')
    p.add_argument(
        '--initial',
        default=None,
        metavar='FILE',
        help='start from a weights file (default: configs/planner.yaml)',
    )
    p.add_argument(
        '--workers', type=int, default=None, help='Ray tasks at once (default: the CPUs Ray has)'
    )
    p.add_argument(
        '--runs-dir', default=None, help='where the run folder goes (default: telemetry runs_dir)'
    )
    p.add_argument(
        '--loads',
        default=str(DEFAULT_TABLE),
        help=f'frozen load table (default {DEFAULT_TABLE}), or {GENERATOR} to draw them now',
    )
    p.add_argument(
        '--compare',
        nargs='+',
        metavar='FILE',
        default=None,
        help='instead of training: evaluate these weights files (and configs/planner.yaml) on the '
        'levels and seeds; `default` names configs/planner.yaml',
    )
    p.add_argument('--no-progress', action='store_true', help='no progress bar')
    p.add_argument('--reserved', action='store_true', help='allow seeds above 100')
    ns = p.parse_args(list(argv))
    for name, value, lo in (('iterations', ns.iterations, 1), ('population', ns.population, 1)):
        if value < lo:
            p.error(f'--{name} {value}; expected >= {lo}')
    if not 0.0 < ns.elite_fraction <= 1.0:
        p.error(f'--elite-fraction {ns.elite_fraction}; expected 0 < fraction <= 1')
    if not (math.isfinite(ns.sigma) and ns.sigma > 0):
        p.error(f'--sigma {ns.sigma}; expected a number > 0')
    if ns.workers is not None and ns.workers < 1:
        p.error(f'--workers {ns.workers}; expected >= 1')
    for f in [ns.initial, *(ns.compare or [])]:
        if f and f != 'default':
            try:
                read_weights(f)
            except PalletizerError as exc:
                p.error(str(exc))
    opts: dict[str, Any] = {
        'levels': _levels(p, ns.levels),
        'seeds': _seeds(p, ns.seeds, ns.reserved),
        'workers': ns.workers,
        'loads': ns.loads,
    }
    if ns.compare is not None:
        opts['compare'] = [None if f == 'default' else f for f in ns.compare]
        return opts
    return {
        **opts,
        'iterations': ns.iterations,
        'population': ns.population,
        'elite_fraction': ns.elite_fraction,
        'sigma': ns.sigma,
        'training_seed': ns.training_seed,
        'initial': ns.initial,
        'runs_dir': ns.runs_dir,
        'progress_bar': not ns.no_progress,
    }


def main(argv: Sequence[str] | None = None) -> int:
    opts = parse_options(sys.argv[1:] if argv is None else argv)
    run: Callable[..., dict[str, Any]]
    if 'compare' in opts:
        files = opts.pop('compare')
        if None not in files:
            files = [None, *files]
        opts['files'] = files
        run = compare
    else:
        run = train
    try:
        result = run(**opts)
    except PalletizerError as exc:
        print(f'train: error: {exc}', file=sys.stderr)
        return 2
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
