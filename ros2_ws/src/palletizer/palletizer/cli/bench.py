"""`scripts/bench <name>`: run one benchmark, print progress to stderr and one JSON line last."""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from collections.abc import Sequence

from palletizer.core.errors import close_match

__all__ = ['BENCHMARKS', 'main']

# name -> (module, function, what it measures)
BENCHMARKS = {
    'planner': (
        'palletizer.cli.bench_planner',
        'bench_planner',
        'heuristic and beam decision time on a half-built 120 x 80 map, memory',
    ),
    'planner-quality': (
        'palletizer.cli.bench_planner',
        'bench_planner_quality',
        'placed %, fill and minimum margin per level, quasi-static, no physics',
    ),
    'motion': (
        'palletizer.cli.bench_motion',
        'bench_motion_all',
        'IK and pick+place planning time, and the simulated level-11 cycle per carton',
    ),
    'cell': (
        'palletizer.cli.bench_cell',
        'bench_cell',
        'physics real-time factor, depth capture, stability protocol, memory',
    ),
    'reference': (
        'palletizer.cli.bench_reference',
        'bench_reference',
        'the reference protocol: 2 perception modes x 3 planners x 2 motion modes, levels 11-33 and 14-17',
    ),
    'generalise': (
        'palletizer.cli.bench_generalise',
        'bench_generalise',
        'the planners on seeds 1-50 of the reference levels and 14-17, with workers and progress',
    ),
    'perception': (
        'palletizer.cli.bench_perception',
        'bench_perception',
        'camera height map, carton detection and wrist gauge against the referee, noise on',
    ),
    'replica': (
        'palletizer.cli.bench_replica',
        'bench_replica',
        'telemetry replica into a local PostgreSQL: rows/s, lag at episode end, drain after 30 s down',
    ),
    'bpp': (
        'palletizer.cli.bench_bpp',
        'run',
        'online 3D bin packing, 10 x 10 x 10, random sequences: utilisation, items, decision time',
    ),
    'train-throughput': (
        'palletizer.cli.bench_train',
        'bench_train_throughput',
        'weight-training evaluations per second on Ray with 1 and 2 workers (median of repeats)',
    ),
    'hardware': (
        'palletizer.cli.bench_hardware',
        'bench_hardware',
        'the reference levels in the hardware profile (real-cell interfaces only), scored by the '
        'scenario referee, against the lockstep loop',
    ),
    'graph': (
        'palletizer.cli.bench_graph',
        'bench_graph',
        'the reference protocol through the real node graph, compared with the in-process loop',
    ),
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog='scripts/bench',
        description='Run a benchmark (scripts/bench NAME --help: its options).',
        add_help=False,
    )
    p.add_argument('name', nargs='?', help=f'one of {", ".join(BENCHMARKS)}')
    p.add_argument('--list', action='store_true', help='list the benchmarks')
    p.add_argument('-h', '--help', action='store_true', help='show this help')
    ns, extra = p.parse_known_args(argv)
    if ns.help and not ns.name:
        p.print_help()
        return 0
    if ns.help:
        extra.append('--help')  # the benchmark's own options, when it has any
    if ns.list or not ns.name:
        for name, (_, _, what) in BENCHMARKS.items():
            print(f'{name:16s} {what}')
        return 0
    if ns.name not in BENCHMARKS:
        print(
            f'bench: unknown benchmark {ns.name!r}; expected one of {", ".join(BENCHMARKS)}'
            f'{close_match(ns.name, BENCHMARKS)}',
            file=sys.stderr,
        )
        return 2
    module, func, what = BENCHMARKS[ns.name]
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as exc:
        print(f'bench: {ns.name} is not available in this version ({exc})', file=sys.stderr)
        return 3
    options = getattr(sys.modules[module], 'parse_options', None)
    if ns.help and options is None:
        print(f'scripts/bench {ns.name}: {what}; it takes no options')
        return 0
    if extra and options is None:
        p.error(f'unrecognized arguments: {" ".join(extra)} ({ns.name} takes no options)')
    kwargs = options(extra, prog=f'scripts/bench {ns.name}') if options else {}
    print(f'[bench] {ns.name}: {what}', file=sys.stderr)
    t0 = time.perf_counter()
    result = dict(fn(**kwargs))
    result.setdefault('benchmark', ns.name)
    result['wall_s'] = round(time.perf_counter() - t0, 3)
    result['machine'] = {'python': platform.python_version(), 'cpu': platform.machine()}
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main())
