"""`scripts/bench train-throughput`: training evaluations per second on Ray with 1 and 2 workers
(or the counts given); the JSON has the median over repeats per count."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from palletizer.cli import pool
from palletizer.cli.loads import DEFAULT_TABLE, GENERATOR, check_loads, use_loads
from palletizer.cli.train import evaluator, fixed_jobs

__all__ = ['bench_train_throughput', 'parse_options']


def bench_train_throughput(
    workers: Sequence[int] = (1, 2),
    repeats: int = 3,
    levels: Sequence[int] = (16,),
    seeds: Sequence[int] = tuple(range(1, 9)),
    loads: str = str(DEFAULT_TABLE),
) -> dict[str, Any]:
    """Evaluations per second with each worker count: a local Ray with that many CPUs, one
    warm-up pass (imports, caches), then `repeats` timed passes over the (level, seed) pairs with
    the initial weights; the median. Ray's start-up is not timed. On a shared machine the
    figures follow its load: the JSON has the 1-minute load average before each count, and
    evaluations_at_once (the evaluations' summed wall time over the pass's), which is the worker
    count when each worker has a core to itself."""
    from palletizer.core.config import load_config

    check_loads(loads, levels, seeds)
    table = loads if loads == GENERATOR else pool.absolute(loads)
    w = dict(load_config().planner.heuristic.weights)
    jobs = fixed_jobs(w, levels, seeds)
    out: dict[str, Any] = {}
    reference: list[Any] | None = None
    for n in workers:
        rates: list[float] = []
        overlap: list[float] = []
        load = os.getloadavg()[0]
        with pool.ray_session(n):
            pool.run_all(evaluator(), jobs[:n], workers=n, init=use_loads, init_args=(table,))
            for _ in range(repeats):
                t = time.perf_counter()
                rows = pool.run_all(
                    evaluator(), jobs, workers=n, init=use_loads, init_args=(table,)
                )
                wall = time.perf_counter() - t
                rates.append(len(jobs) / wall)
                # evaluations running at once on average: n when each worker has a core
                overlap.append(sum(r['wall_s'] for r in rows) / wall)
                print(
                    f'[train-throughput] {n} workers: {rates[-1]:.2f} eval/s',
                    file=sys.stderr,
                    flush=True,
                )
        same = [(r['loss'], r['n_placed']) for r in rows]
        if reference is None:
            reference = same
        out[f'workers_{n}'] = {
            'evaluations_per_s_median': round(statistics.median(rates), 3),
            'evaluations_per_s': [round(r, 3) for r in rates],
            'results_equal_to_first': same == reference,
            'evaluations_at_once_median': round(statistics.median(overlap), 2),
            'load_average_1m_before': round(load, 2),
        }
    return {
        'evaluations_per_pass': len(jobs),
        'levels': list(levels),
        'seeds': list(seeds),
        'repeats': repeats,
        'cpus': os.cpu_count(),
        **out,
    }


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench train-throughput') -> dict:
    from palletizer.cli.seeds import parse_seeds

    p = argparse.ArgumentParser(prog=prog, description=__doc__.split('\n\n')[0].replace('\n', ' '))
    p.add_argument('--workers', type=int, nargs='+', default=[1, 2], help='worker counts (1 2)')
    p.add_argument('--repeats', type=int, default=3, help='timed passes per count (default 3)')
    p.add_argument('--levels', type=int, nargs='+', default=[16], help='levels (default 16)')
    p.add_argument('--seeds', default='1-8', help='seeds (default 1-8)')
    p.add_argument('--loads', default=str(DEFAULT_TABLE), help='frozen load table, or generator')
    ns = p.parse_args(list(argv))
    seeds = parse_seeds(ns.seeds)
    if not seeds or max(seeds) > 100:
        p.error(f'--seeds {ns.seeds}; expected seeds in 0-100')
    if min(ns.workers) < 1 or ns.repeats < 1:
        p.error('--workers and --repeats: expected >= 1')
    return {
        'workers': ns.workers,
        'repeats': ns.repeats,
        'levels': ns.levels,
        'seeds': seeds,
        'loads': ns.loads,
    }
