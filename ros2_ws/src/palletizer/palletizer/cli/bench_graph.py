"""`scripts/bench graph`: the reference protocol through the real node graph equals the loop.

One `python -m palletizer.cli.palletize --level L --seed 1 -n 3 --speed S --planner P` per level,
telemetry on, in its own temporary folder, network namespace (loopback only) and ROS_DOMAIN_ID.
Its runs/*/episodes.jsonl and runs/*/placements.jsonl are compared with the in-process wiring
(`wiring.inprocess.run_inprocess`) for the same level, seed, planner and speed:

- fast-forward (speed 0), every level: the episode line must equal the in-process episode
  (`to_dict()` through JSON) field for field, and each placement row its package_id, layer,
  placed flag and actual pose (x, y, z, yaw), exactly: in fast-forward both wirings run the same
  lockstep physics, and the poses travel as float64 (ARCHITECTURE §4);
- interpolated (speed 1), one level per source: the outcome (success, n_objects, n_placed,
  failure) must be equal.

A graph run that times out, crashes (a Traceback in its output) or exits with another code than
its episodes call for (0 when all succeed, else 1) is a mismatch, reported with its last lines.
Runs go one after another (the graph alone fills two cores). Options:
`scripts/bench graph --help`.

Why one file of this length: one benchmark, its comparison rules, runner and report together.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from palletizer.core.config import Config, load_config
from palletizer.core.errors import ConfigError, GraphError, close_match
from palletizer.core.vocab import MotionMode

__all__ = [
    'MODES',
    'PROTOCOL_LEVELS',
    'PROTOCOL_SEEDS',
    'SEED_LIMIT',
    'GraphRun',
    'bench_graph',
    'check_options',
    'compare_episode',
    'compare_outcome',
    'compare_placements',
    'parse_options',
    'summarise',
]

PROTOCOL_LEVELS = (11, 12, 13, 21, 22, 23, 31, 32, 33)
PROTOCOL_SEEDS = (1, 2, 3)
SEED_LIMIT = 100  # the benchmark never runs a seed above this
MODES = MotionMode.physical()
OUTCOME_FIELDS = ('success', 'n_objects', 'n_placed', 'failure')
PLACEMENT_FIELDS = ('package_id', 'layer', 'placed', 'actual_pose')
POSE_KEYS = ('x', 'y', 'z', 'yaw')
# Wall-clock limits of one graph run of three episodes [s]: about 40 s fast-forward and 2-3 min
# interpolated on two cores; the limits leave room for a loaded machine.
TIMEOUT_S = {'fast_forward': 600.0, 'interpolated': 1500.0}
TAIL_LINES = 15
DETAILS_MAX = 200  # mismatch_details kept in the JSON; the count covers all of them
_NETNS = 'ip link set lo up && ip link set lo multicast on && exec "$@"'


@dataclass
class GraphRun:
    """One palletize process: its exit, wall time [s], what it wrote and how it compared."""

    level: int
    mode: str
    seeds: tuple[int, ...]
    exit_code: int | None  # None: it was stopped at its time limit
    wall_s: float
    episodes: list[dict[str, Any]] = field(default_factory=list)
    placements: list[dict[str, Any]] = field(default_factory=list)
    tail: str = ''
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    extra_lines: list[dict[str, Any]] = field(default_factory=list)  # run_graph's `collect`

    @property
    def episodes_ok(self) -> int:
        return sum(1 for e in self.episodes if e.get('success') is True)


# -- comparison --------------------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """Exact equality of JSON values; a bool never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _diff(graph: Any, local: Any, path: str) -> list[str]:
    """Dotted paths where two JSON values differ (dicts by key, equal-length lists by index)."""
    if isinstance(graph, Mapping) and isinstance(local, Mapping):
        out = []
        for key in sorted(set(graph) | set(local), key=str):
            sub = f'{path}.{key}' if path else str(key)
            if key not in graph or key not in local:
                out.append(sub)
            else:
                out += _diff(graph[key], local[key], sub)
        return out
    if isinstance(graph, list) and isinstance(local, list) and len(graph) == len(local):
        return [
            d
            for i, (g, v) in enumerate(zip(graph, local, strict=True))
            for d in _diff(g, v, f'{path}[{i}]')
        ]
    return [] if _same(graph, local) else [path or '.']


def _get(doc: Any, path: str) -> Any:
    """The value at a path of _diff (None where it is missing)."""
    cur = doc
    for part in path.replace('[', '.[').split('.'):
        if not part:
            continue
        if part.startswith('['):
            i = int(part[1:-1])
            cur = cur[i] if isinstance(cur, list) and i < len(cur) else None
        else:
            cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def compare_episode(graph: Mapping[str, Any], local: Mapping[str, Any]) -> list[str]:
    """Fields of the graph's episodes.jsonl line that differ from the in-process episode."""
    return _diff(dict(graph), dict(local), '')


def compare_outcome(graph: Mapping[str, Any], local: Mapping[str, Any]) -> list[str]:
    """Outcome fields (success, n_objects, n_placed, failure) that differ."""
    return [f for f in OUTCOME_FIELDS if not _same(graph.get(f), local.get(f))]


def _pose_list(pose: Any) -> Any:
    if isinstance(pose, Mapping):
        return [pose.get(k) for k in POSE_KEYS]
    return list(pose) if isinstance(pose, (list, tuple)) else pose


def placement_key(row: Mapping[str, Any]) -> dict[str, Any]:
    """What is compared of one placement: a placements.jsonl row or a Placement.to_dict()."""
    out = {f: row.get(f) for f in PLACEMENT_FIELDS}
    out['actual_pose'] = dict(zip(POSE_KEYS, _pose_list(row.get('actual_pose')), strict=False))
    return out


def compare_placements(
    graph: Sequence[Mapping[str, Any]], local: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Differing fields of one episode's placements in seq order: `placements[k].layer`, ...;
    `placements` alone when the counts differ."""
    return _diff(
        [placement_key(g) for g in graph], [placement_key(v) for v in local], 'placements'
    )


def _short(value: Any, limit: int = 120) -> Any:
    text = json.dumps(value, sort_keys=True, default=str)
    return value if len(text) <= limit else text[: limit - 3] + '...'


def _detail(run: GraphRun, seed: int | None, what: str, graph: Any, local: Any) -> dict[str, Any]:
    return {
        'level': run.level,
        'mode': run.mode,
        'seed': seed,
        'field': what,
        'graph': _short(graph),
        'in_process': _short(local),
    }


def check_run(run: GraphRun, refs: Mapping[int, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mismatches of one graph run against its in-process references, keyed by seed.

    A reference is {'episode': dict, 'placements': [dict]} or {'error': text}.
    """
    out: list[dict[str, Any]] = []
    by_seed: dict[int, dict[str, Any]] = {}
    for ep in run.episodes:
        seed = ep.get('seed')
        if seed in by_seed or seed not in run.seeds:
            out.append(_detail(run, seed, 'episode.unexpected', ep, None))
        else:
            by_seed[seed] = ep
    want_rc: int | None = 0
    for seed in run.seeds:
        ref = refs.get(seed, {'error': 'no in-process reference'})
        if 'error' in ref:
            out.append(_detail(run, seed, 'in_process.error', None, ref['error']))
            want_rc = None
            continue
        local = ref['episode']
        if not local.get('success'):
            want_rc = 1 if want_rc is not None else None
        graph = by_seed.get(seed)
        if graph is None:
            out.append(_detail(run, seed, 'episode.missing', None, 'episode'))
            continue
        if run.mode == 'fast_forward':
            rows = sorted(
                (p for p in run.placements if p.get('seed') == seed), key=lambda p: p.get('seq', 0)
            )
            fields = compare_episode(graph, local) + compare_placements(rows, ref['placements'])
            docs = (
                {**graph, 'placements': [placement_key(p) for p in rows]},
                {**local, 'placements': [placement_key(p) for p in ref['placements']]},
            )
        else:
            fields = compare_outcome(graph, local)
            docs = graph, local
        for f in fields:
            g, v = _get(docs[0], f), _get(docs[1], f)
            if f == 'placements':
                g, v = f'{len(g)} rows', f'{len(v)} rows'
            out.append(_detail(run, seed, f, g, v))
    rc = run.exit_code
    crashed = 'Traceback (most recent call last)' in run.tail
    unexpected = rc not in (0, 1) or (want_rc is not None and rc != want_rc)
    if crashed or unexpected:
        why = 'timed out' if run.exit_code is None else f'exit code {run.exit_code}'
        if crashed:
            why += ', Traceback in its output'
        d = _detail(run, None, 'exit_code', run.exit_code, want_rc)
        d['why'] = why
        d['last_lines'] = run.tail.splitlines()[-TAIL_LINES:]
        out.append(d)
    return out


# -- options -----------------------------------------------------------------------------------


def _levels(values: Sequence[int], option: str, cfg: Config) -> tuple[int, ...]:
    valid = sorted(cfg.levels)
    out: list[int] = []
    for v in values:
        if v not in cfg.levels:
            raise ConfigError(
                f'{option} {v}: no such level; valid levels: {", ".join(map(str, valid))}'
                f'{close_match(str(v), map(str, valid))}'
            )
        if v not in out:
            out.append(v)
    if not out:
        raise ConfigError(f'{option}: give at least one level')
    return tuple(out)


def check_options(
    levels: Sequence[int] = PROTOCOL_LEVELS,
    seeds: Sequence[int] = PROTOCOL_SEEDS,
    planner: str = 'beam',
    interpolated_levels: Sequence[int] | None = None,
    skip_interpolated: bool = False,
    config: Config | None = None,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Validated (levels, seeds, interpolated levels); raises ConfigError naming the bad value.

    Seeds must be consecutive (one palletize run covers seed, seed + 1, ...) and within
    0-SEED_LIMIT. Without interpolated_levels, the first chosen level of each source runs
    interpolated (11, 21, 31 for the protocol).
    """
    from palletizer.launcher.graph import PLANNERS

    cfg = config or load_config()
    if planner not in PLANNERS:
        raise ConfigError(
            f'--planner {planner!r}; expected one of {", ".join(PLANNERS)}'
            f'{close_match(planner, PLANNERS)}'
        )
    lv = _levels(levels, '--levels', cfg)
    sd = tuple(seeds)
    if not sd:
        raise ConfigError('--seeds: give at least one seed (the protocol uses 1 2 3)')
    for s in sd:
        if not 0 <= s <= SEED_LIMIT:
            raise ConfigError(
                f'--seeds {s}: seeds must be within 0-{SEED_LIMIT} (the protocol uses 1 2 3); '
                f'seeds above {SEED_LIMIT} are refused'
            )
    if list(sd) != list(range(sd[0], sd[0] + len(sd))):
        raise ConfigError(
            f'--seeds {" ".join(map(str, sd))}: expected consecutive ascending seeds '
            '(one palletize run covers seed, seed + 1, ...), e.g. 1 2 3'
        )
    if skip_interpolated:
        interp: tuple[int, ...] = ()
    elif interpolated_levels is None:
        firsts: dict[str, int] = {}
        for level in lv:
            firsts.setdefault(cfg.level(level).source, level)
        interp = tuple(firsts.values())
    else:
        interp = _levels(interpolated_levels, '--interpolated-levels', cfg)
    return lv, sd, interp


# -- running -----------------------------------------------------------------------------------


def can_isolate() -> str:
    """Empty string when a run can get its own network namespace here, else why not."""
    if os.geteuid() != 0:
        return 'network namespaces need root (unshare -n)'
    for tool in ('unshare', 'ip'):
        if shutil.which(tool) is None:
            return f'{tool} not found (Debian packages util-linux and iproute2)'
    return ''


def _lines(paths: Sequence[Path]) -> list[dict[str, Any]]:
    out = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
    return out


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the run's process group (the launcher closes its episode), then SIGKILL."""
    for sig, wait_s in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_graph(
    level: int,
    mode: str,
    seeds: Sequence[int],
    planner: str,
    domain_id: int,
    timeout_s: float,
    keep: bool = False,
    extra: Callable[[Path], Sequence[str]] | None = None,
    collect: str = '',
) -> GraphRun:
    """One palletize run in a fresh temporary folder, network namespace and ROS domain.

    `extra(work)`: more palletize arguments, given the run's folder; `collect`: a JSON-lines
    file the run writes in its folder, read into `extra_lines`.
    """
    work = Path(tempfile.mkdtemp(prefix=f'bench-graph-{level}-{mode}-'))
    argv = [
        sys.executable,
        '-m',
        'palletizer.cli.palletize',
        '--level',
        str(level),
        '--seed',
        str(seeds[0]),
        '-n',
        str(len(seeds)),
        '--speed',
        f'{MODES[mode]:g}',
        '--planner',
        planner,
        *(extra(work) if extra is not None else ()),
    ]
    env = {
        **os.environ,
        'ROS_DOMAIN_ID': str(domain_id),
        'ROS_AUTOMATIC_DISCOVERY_RANGE': 'LOCALHOST',
        'PYTHONUNBUFFERED': '1',
    }
    env.pop('ROS_STATIC_PEERS', None)  # loopback only: no peer outside the namespace
    log = work / 'palletize.log'
    t0 = time.perf_counter()
    with log.open('wb') as out:
        proc = subprocess.Popen(
            ['unshare', '-n', 'sh', '-c', _NETNS, 'sh', *argv],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a stop reaches every node
        )
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc = None
        except BaseException:
            _stop(proc)
            raise
    wall = time.perf_counter() - t0
    text = log.read_text(errors='replace')
    runs = work / 'runs'
    run = GraphRun(
        level=level,
        mode=mode,
        seeds=tuple(seeds),
        exit_code=rc,
        wall_s=round(wall, 2),
        episodes=_lines(sorted(runs.glob('*/episodes.jsonl'))),
        placements=_lines(sorted(runs.glob('*/placements.jsonl'))),
        tail='\n'.join(text.splitlines()[-400:]),
        extra_lines=_lines([work / collect]) if collect and (work / collect).is_file() else [],
    )
    if 'Traceback (most recent call last)' in text and 'Traceback' not in run.tail:
        run.tail = 'Traceback (most recent call last) earlier in the output\n' + run.tail
    if keep:
        print(f'[graph] kept {work}', file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return run


def reference(level: int, seed: int, planner: str, speed: float, sha: str) -> dict[str, Any]:
    """The in-process episode: {'episode', 'placements'} as JSON values, or {'error'}."""
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    try:
        result, sink = run_inprocess(
            level, seed, build_planner(planner), speed=speed, sink=MemorySink(), git_sha=sha
        )
    except Exception as exc:  # a crash is a result too: report it, do not hide it
        return {'error': f'{type(exc).__name__}: {exc}'}
    return json.loads(
        json.dumps(
            {
                'episode': result.to_dict(),
                'placements': [
                    {
                        'seq': p.seq,
                        'package_id': p.package_id,
                        'layer': p.layer,
                        'placed': p.placed,
                        'actual_pose': list(p.actual_pose),
                    }
                    for p in sink.placements
                ],
            }
        )
    )


# -- summary -----------------------------------------------------------------------------------


def _per_episode(runs: Sequence[GraphRun]) -> float | None:
    vals = [r.wall_s / (len(r.episodes) or len(r.seeds)) for r in runs]
    return round(statistics.median(vals), 2) if vals else None


def summarise(
    runs: Sequence[GraphRun],
    planner: str = 'beam',
    seeds: Sequence[int] = PROTOCOL_SEEDS,
    commit: str = '',
) -> dict[str, Any]:
    """The benchmark's JSON object from the graph runs (each with its mismatches filled in)."""
    details = [d for r in runs for d in r.mismatches]
    modes: dict[str, Any] = {}
    for mode in MODES:
        sel = [r for r in runs if r.mode == mode]
        if not sel:
            continue
        modes[mode] = {
            'compared': (
                'episode line (every field) and placements (package_id, layer, placed, '
                'actual_pose), exact'
                if mode == 'fast_forward'
                else 'outcome (success, n_objects, n_placed, failure)'
            ),
            'levels': [r.level for r in sel],
            'runs': len(sel),
            'graph_episodes': sum(len(r.episodes) for r in sel),
            'graph_episodes_ok': sum(r.episodes_ok for r in sel),
            'episodes_expected': sum(len(r.seeds) for r in sel),
            'mismatches': sum(len(r.mismatches) for r in sel),
            'episodes_mismatched': len(
                {
                    (d['level'], d['seed'])
                    for r in sel
                    for d in r.mismatches
                    if d['seed'] is not None
                }
            ),
            'runs_failed': sum(1 for r in sel if r.exit_code not in (0, 1)),
            'wall_s_per_episode_median': _per_episode(sel),
            'wall_s_graph_total': round(sum(r.wall_s for r in sel), 1),
        }
    return {
        'benchmark': 'graph',
        'commit': commit,
        'planner': planner,
        'seeds': list(seeds),
        'graph_equals_loop': not details and bool(runs),
        'graph_episodes': sum(len(r.episodes) for r in runs),
        'graph_episodes_ok': sum(r.episodes_ok for r in runs),
        'mismatches': len(details),
        'mismatch_details': details[:DETAILS_MAX],
        'mismatch_details_left_off': max(0, len(details) - DETAILS_MAX),
        'wall_s_per_episode_median': _per_episode(runs),
        'modes': modes,
        'runs': [
            {
                'level': r.level,
                'mode': r.mode,
                'exit_code': r.exit_code,
                'wall_s': r.wall_s,
                'episodes': len(r.episodes),
                'episodes_ok': r.episodes_ok,
                'mismatches': len(r.mismatches),
            }
            for r in runs
        ],
    }


def bench_graph(
    levels: Sequence[int] = PROTOCOL_LEVELS,
    seeds: Sequence[int] = PROTOCOL_SEEDS,
    planner: str = 'beam',
    interpolated_levels: Sequence[int] | None = None,
    skip_interpolated: bool = False,
    keep: bool = False,
) -> dict[str, Any]:
    """Run the protocol through the graph and the in-process loop; return the JSON summary."""
    from palletizer.version import git_sha

    lv, sd, interp = check_options(levels, seeds, planner, interpolated_levels, skip_interpolated)
    why = can_isolate()
    if why:
        raise GraphError(f'bench graph: cannot isolate the graph runs: {why}')
    sha = git_sha()
    jobs = [('fast_forward', level) for level in lv] + [
        ('interpolated', level) for level in interp
    ]
    base = os.getpid() % 50
    runs: list[GraphRun] = []
    for i, (mode, level) in enumerate(jobs):
        tag = f'L{level} {mode} seeds {sd[0]}-{sd[-1]}'
        print(f'[graph] {i + 1}/{len(jobs)} {tag}: graph ...', file=sys.stderr, flush=True)
        run = run_graph(level, mode, sd, planner, 1 + (base + i) % 101, TIMEOUT_S[mode], keep)
        shas = {e.get('git_sha') for e in run.episodes}
        one = shas.pop() if len(shas) == 1 else None
        run_sha = one if isinstance(one, str) else sha
        t0 = time.perf_counter()
        refs = {s: reference(level, s, planner, MODES[mode], run_sha) for s in sd}
        ref_s = time.perf_counter() - t0
        run.mismatches = check_run(run, refs)
        runs.append(run)
        verdict = 'ok' if not run.mismatches else f'MISMATCH x{len(run.mismatches)}'
        fields = sorted({d['field'] for d in run.mismatches})
        print(
            f'[graph] {i + 1}/{len(jobs)} {tag}: graph {run.wall_s:.1f} s '
            f'(exit {run.exit_code}, {run.episodes_ok}/{len(run.episodes)} succeeded), '
            f'in-process {ref_s:.1f} s: {verdict}'
            + (
                f' ({", ".join(fields[:8])}{", ..." if len(fields) > 8 else ""})' if fields else ''
            ),
            file=sys.stderr,
            flush=True,
        )
    return summarise(runs, planner, sd, sha)


def parse_options(argv: Sequence[str] | None = None, prog: str = 'scripts/bench graph') -> dict:
    """Checked command-line options as bench_graph() keyword arguments; exits 2 on bad ones."""
    p = argparse.ArgumentParser(
        prog=prog,
        description='The reference protocol through the node graph, compared with the loop.',
    )
    p.add_argument('--levels', type=int, nargs='+', default=list(PROTOCOL_LEVELS))
    p.add_argument(
        '--seeds',
        type=int,
        nargs='+',
        default=list(PROTOCOL_SEEDS),
        help=f'consecutive seeds, 0-{SEED_LIMIT} (the protocol: 1 2 3)',
    )
    p.add_argument('--planner', default='beam')
    p.add_argument(
        '--interpolated-levels',
        type=int,
        nargs='+',
        default=None,
        help='levels run at speed 1 (default: the first chosen level of each source)',
    )
    p.add_argument('--skip-interpolated', action='store_true', help='fast-forward only')
    p.add_argument('--keep', action='store_true', help='keep each run folder and its log')
    kwargs = vars(p.parse_args(argv))
    try:  # bad values fail here, in one line, before anything runs
        check_options(
            kwargs['levels'],
            kwargs['seeds'],
            kwargs['planner'],
            kwargs['interpolated_levels'],
            kwargs['skip_interpolated'],
        )
    except ConfigError as exc:
        p.error(str(exc))
    return kwargs
