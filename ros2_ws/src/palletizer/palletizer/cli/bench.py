"""`scripts/bench <name>`: run one benchmark, print progress to stderr and one JSON line last.

A run that writes its benchmark's current result file, `benchmarks/results/<name>.json`,
appends that file's line to `benchmarks/history.jsonl` (cli/history.py): bpp, generalise, spec and
reference write theirs by default; the others print only, and write theirs with `--save`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import shlex
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from palletizer.cli.history import HistoryError, append, history_line
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
    'weigh-motion': (
        'palletizer.cli.bench_weigh',
        'bench_weigh_motion',
        'in-motion weighing on lift-and-cross moves, noise and drift on: mass and CoM p95, '
        'time to convergence, with and without the inertial compensation',
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
    'throughput': (
        'palletizer.cli.bench_throughput',
        'bench_throughput',
        'seconds per carton by phase, cartons per hour and the physical limit, interpolated, '
        'cameras, both planners',
    ),
    'spec': (
        'palletizer.cli.bench_spec',
        'bench_spec',
        'the rule levels built to their pallet spec: compliance, label-out share and success, '
        'interpolated, cameras, both planners',
    ),
    'graph': (
        'palletizer.cli.bench_graph',
        'bench_graph',
        'the reference protocol through the real node graph, compared with the in-process loop',
    ),
}

RESULTS = Path('benchmarks/results')
# The benchmarks whose result file scripts/bench writes (with --save); the others with a
# result file write it themselves.
SAVED = ('perception', 'replica', 'hardware', 'graph', 'throughput')


def _is_result_file(path: Path, name: str) -> bool:
    """`path` is benchmarks/results/<name>.json (not a run written elsewhere with --out-dir)."""
    path = path.resolve()
    return path.name == f'{name}.json' and path.parent.parts[-2:] == ('benchmarks', 'results')


# What every current result file says of the run that made it (tests/cli/test_history.py).
PROVENANCE = ('benchmark', 'command', 'commit', 'date', 'machine', 'wall_s')


def _provenance(name: str, result: dict[str, Any], command: str, now: str) -> dict[str, Any]:
    """The run's provenance fields: the benchmark, the command, the commit (the result's own, else
    the checkout's), the date, the machine and the wall time."""
    from palletizer.version import git_sha

    return {
        'benchmark': name,
        'command': command,
        'commit': result.get('commit') or git_sha() or None,
        'date': now,
        'machine': result.get('machine'),
        'wall_s': result.get('wall_s'),
    }


def _record(name: str, result: dict[str, Any], command: str, save: bool) -> int:
    """Write the result file of a benchmark in SAVED (with `save`), stamp a result file the run
    wrote itself with the run's provenance (PROVENANCE), and append the line of the result file,
    if there is one, to benchmarks/history.jsonl beside it."""
    written = result.get('output') or result.get('written')
    now = datetime.now(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
    if save:
        doc = {**result, **_provenance(name, result, command, now)}
        path = RESULTS / f'{name}.json'
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')
        written = str(path)
        print(f'[bench] wrote {path}', file=sys.stderr)
    if not isinstance(written, str) or not _is_result_file(Path(written), name):
        return 0
    path = Path(written).resolve()
    if not save:
        try:
            own = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f'bench: cannot stamp {path} with the run: {exc}', file=sys.stderr)
            return 1
        own.update(_provenance(name, {**result, 'commit': own.get('commit')}, command, now))
        path.write_text(json.dumps(own, indent=1, sort_keys=True) + '\n')
    try:
        line = history_line(path, command=command, date=now)
        line['source'] = f'benchmarks/results/{path.name}'
        line = append(line, path.parent.parent / 'history.jsonl')
    except HistoryError as exc:
        print(f'bench: not recorded in the history: {exc}', file=sys.stderr)
        return 1
    print(f'[bench] appended {line["id"]} to benchmarks/history.jsonl', file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog='scripts/bench',
        description='Run a benchmark (scripts/bench NAME --help: its options).',
        add_help=False,
    )
    p.add_argument('name', nargs='?', help=f'one of {", ".join(BENCHMARKS)}')
    p.add_argument('--list', action='store_true', help='list the benchmarks')
    p.add_argument(
        '--save',
        action='store_true',
        help=f'{", ".join(SAVED)}: write the result to benchmarks/results/NAME.json '
        '(and its line to benchmarks/history.jsonl)',
    )
    p.add_argument('-h', '--help', action='store_true', help='show this help')
    args = list(sys.argv[1:] if argv is None else argv)
    ns, extra = p.parse_known_args(args)
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
    if ns.save and ns.name not in SAVED:
        p.error(f'--save is for {", ".join(SAVED)}; {ns.name} writes its own result file')
    if extra and options is None:
        p.error(f'unrecognized arguments: {" ".join(extra)} ({ns.name} takes no options)')
    kwargs = options(extra, prog=f'scripts/bench {ns.name}') if options else {}
    print(f'[bench] {ns.name}: {what}', file=sys.stderr)
    t0 = time.perf_counter()
    result = dict(fn(**kwargs))
    result.setdefault('benchmark', ns.name)
    result['wall_s'] = round(time.perf_counter() - t0, 3)
    result['machine'] = {'python': platform.python_version(), 'cpu': platform.machine()}
    code = _record(ns.name, result, shlex.join(['scripts/bench', *args]), ns.save)
    print(json.dumps(result, sort_keys=True))
    return code


if __name__ == '__main__':
    sys.exit(main())
