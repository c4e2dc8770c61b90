"""`scripts/bench spec`: the rule levels built to their pallet spec, both planners, interpolated
motion, cameras, over a seed range (default 1-20), scored by the referee's compliance measure.

Each (planner, level, seed) is one episode, a Ray task (palletizer/cli/pool.py), through the
in-process wiring with the level's spec (configs/levels.yaml `spec`, or `--spec FILE` for every
level) given to the planner and to the referee. Each finished episode is appended to
`<out-dir>/spec.episodes.jsonl` at once; `--resume` skips those already run at this commit.
Writes `<out-dir>/spec.json`: per planner and level, `episodes_ok`, the label-out share over
every perimeter carton with a label face, the crush and fragile violations, the weight-order
inversions, the height and mass violations, the group splits and the density (placed carton
volume over the deck area times the load height, the episode line's `density`). Its last line is JSON with the same per
planner over all levels.

Seeds above 100 are reserved for independent checks and refused unless --reserved is given.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from palletizer.cli import pool
from palletizer.cli.bench_reference import failure_reason
from palletizer.cli.loads import GENERATOR, use_loads
from palletizer.cli.seeds import dev_seeds
from palletizer.version import git_sha

__all__ = ['RULE_LEVELS', 'bench_spec', 'parse_options', 'spec_one', 'summarise']

PLANNERS = ('heuristic', 'beam')


def rule_levels() -> tuple[int, ...]:
    """The levels configs/levels.yaml builds to a spec."""
    from palletizer.core.config import load_config

    return tuple(sorted(i for i, lv in load_config().levels.items() if lv.spec))


RULE_LEVELS = rule_levels()


def _spec_for(level: int, spec_file: str | None) -> Any:
    from palletizer.core.config import load_config
    from palletizer.core.pallet_spec import level_spec, read_spec

    cfg = load_config()
    if spec_file:
        return read_spec(spec_file, cfg.catalogue.types)
    return level_spec(cfg, level)


def spec_one(job: tuple) -> dict:
    """One episode in a worker: (planner, level, seed, perception, spec file or None) -> row."""
    from palletizer.core.config import load_config
    from palletizer.core.planning import build_planner
    from palletizer.core.vocab import MotionMode
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    planner, level, seed, perception, spec_file = job
    speed = float(MotionMode.interpolated.speed or 0.0)
    row: dict[str, Any] = {'planner': planner, 'level': level, 'seed': seed}
    t0 = time.perf_counter()
    try:
        cfg = load_config()
        spec = _spec_for(level, spec_file)
        labels = LabelScore(cfg)
        result, sink = run_inprocess(
            level,
            seed,
            build_planner(planner, cfg, pallet_spec=spec),
            speed=speed,
            config=cfg,
            sink=MemorySink(),
            perception=perception,
            pallet_spec=spec,
            probe=labels.probe,
        )
    except Exception as exc:  # a crash is a result too: report it, do not hide it
        return {
            **row,
            'success': False,
            'failure': 'crash',
            'error': f'{type(exc).__name__}: {exc}',
            'wall_s': round(time.perf_counter() - t0, 2),
        }
    m = result.metrics
    comp = m.get('compliance') or {}
    return {
        **row,
        'success': result.success,
        'n_placed': result.n_placed,
        'n_objects': result.n_objects,
        'failure': result.failure.value if result.failure else None,
        'failure_reason': failure_reason(sink.events),
        'oracle': result.oracle,
        'compliance': comp,
        'labels_seen': labels.summary(),
        'density': m.get('density'),
        'sim_s': result.duration_s,
        'wall_s': round(time.perf_counter() - t0, 2),
    }


class LabelScore:
    """The label detection scored against the referee: after each in-hand measure, the face
    read (observation frame) against the carton's true label face, both turned into the world.
    A benchmark's look at simulator truth, outside the episode (the run stays un-oracled)."""

    def __init__(self, cfg: Any) -> None:
        self.cfg = cfg
        self.rows: list[dict[str, Any]] = []

    def probe(self, kind: str, package_id: str, component: Any) -> None:
        seen = getattr(component, 'last_label', None)
        cell = getattr(component, 'cell', None)
        if kind != 'held' or seen is None or cell is None:
            return
        from palletizer.core.compliance import label_normal
        from palletizer.core.detection.label import face_normal
        from palletizer.core.gauge import type_from_label

        true_face = self.cfg.catalogue.rules(type_from_label(package_id)).label
        if true_face == 'none':
            return
        q = cell.ground_truth().cartons[package_id].quat  # w x y z
        body_yaw = math.atan2(2 * (q[0] * q[3] + q[1] * q[2]), 1 - 2 * (q[2] ** 2 + q[3] ** 2))
        truth = label_normal(true_face, body_yaw)
        obs = getattr(component, 'last_held_observation', None)
        row: dict[str, Any] = {'package_id': package_id, 'face': seen.face, 'how': seen.how}
        if seen.face and obs is not None and truth is not None:
            n = face_normal(seen.face, obs.yaw)
            row['right'] = n[0] * truth[0] + n[1] * truth[1] > math.sqrt(0.5)
        else:
            row['right'] = False
            row['reason'] = seen.reason
        self.rows.append(row)

    def summary(self) -> dict[str, Any]:
        return {
            'checked': len(self.rows),
            'read': sum(1 for r in self.rows if r['face']),
            'right': sum(1 for r in self.rows if r['right']),
            'wrong': [r for r in self.rows if not r['right']],
        }


def summarise(rows: Sequence[dict]) -> dict[str, Any]:
    """The figures of a set of episode rows (crashes count as failed episodes)."""
    comp = [r['compliance'] for r in rows if r.get('compliance')]
    perimeter = sum(c.get('perimeter_labelled', 0) for c in comp)
    out = sum(c.get('label_out', 0) for c in comp)
    broken = [b for c in comp for b in c.get('broken', [])]
    seen = [r['labels_seen'] for r in rows if r.get('labels_seen')]
    checked = sum(s.get('checked', 0) for s in seen)
    right = sum(s.get('right', 0) for s in seen)
    dens = [r['density'] for r in rows if r.get('density') is not None]
    return {
        'episodes': len(rows),
        'episodes_ok': sum(1 for r in rows if r['success']),
        'cartons_placed': sum(r.get('n_placed', 0) for r in rows),
        'perimeter_labelled': perimeter,
        'label_out': out,
        'label_out_pct': round(100.0 * out / perimeter, 1) if perimeter else None,
        'label_detection': {
            'checked': checked,
            'right': right,
            'accuracy_pct': round(100.0 * right / checked, 1) if checked else None,
        },
        'crush_violations': sum(len(c.get('crush_violations', [])) for c in comp),
        'fragile_violations': sum(len(c.get('fragile_violations', [])) for c in comp),
        'weight_order_inversions': sum(len(c.get('weight_order_inversions', [])) for c in comp),
        'height_violations': broken.count('max_load_height_m'),
        'mass_violations': broken.count('max_load_mass_kg'),
        'group_splits': sum(c.get('group_splits', 0) for c in comp),
        'density': round(sum(dens) / len(dens), 3) if dens else None,
        'failures': sorted({str(r['failure']) for r in rows if r['failure']}),
    }


def bench_spec(
    seeds: Sequence[int] = tuple(range(1, 21)),
    planners: Sequence[str] = PLANNERS,
    levels: Sequence[int] = RULE_LEVELS,
    perception: str = 'cameras',
    spec_file: str | None = None,
    workers: int | None = None,
    out_dir: str | os.PathLike[str] = 'benchmarks/results',
    resume: bool = False,
) -> dict:
    sha = git_sha()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    log = out / 'spec.episodes.jsonl'
    spec_key = str(Path(spec_file).resolve()) if spec_file else None
    done = {
        (r['planner'], r['level'], r['seed']): r
        for r in pool.earlier_rows(
            log, resume, lambda r: r.get('commit') == sha and r.get('spec_file') == spec_key
        )
    }
    jobs = [
        (p, lv, s, perception, spec_key)
        for p in planners
        for lv in levels
        for s in seeds
        if (p, lv, s) not in done
    ]
    rows = [r for r in done.values() if r['planner'] in planners]
    print(
        f'[spec] {len(jobs)} episodes to run ({len(rows)} already done at {sha}), '
        f'{workers or os.cpu_count()} workers',
        file=sys.stderr,
        flush=True,
    )
    t0 = time.perf_counter()
    with pool.ray_session(workers), log.open('a') as f:
        finished = pool.as_completed(
            spec_one, jobs, workers=workers, init=use_loads, init_args=(GENERATOR,)
        )
        ok = 0
        for i, (_, result) in enumerate(finished, 1):
            r = {**result, 'commit': sha, 'perception': perception, 'spec_file': spec_key}
            f.write(json.dumps(r, sort_keys=True) + '\n')
            f.flush()
            rows.append(r)
            ok += bool(r['success'])
            rate = (time.perf_counter() - t0) / i
            print(
                f'[spec] {i}/{len(jobs)} {r["planner"]} L{r["level"]} s{r["seed"]}: '
                f'{"ok" if r["success"] else r["failure"]}; {ok}/{i} ok, '
                f'~{rate * (len(jobs) - i) / 60:.0f} min left',
                file=sys.stderr,
                flush=True,
            )
    results = {
        p: {
            'all': summarise([r for r in rows if r['planner'] == p]),
            'levels': {
                str(lv): summarise([r for r in rows if r['planner'] == p and r['level'] == lv])
                for lv in levels
            },
        }
        for p in planners
    }
    doc = {
        'commit': sha,
        'seeds': [min(seeds), max(seeds)] if seeds else [],
        'n_seeds': len(seeds),
        'levels': list(levels),
        'perception': perception,
        'motion': 'interpolated',
        'spec_file': spec_key,
        'loads': GENERATOR,
        'results': results,
        'episodes': sorted(rows, key=lambda r: (r['planner'], r['level'], r['seed'])),
    }
    (out / 'spec.json').write_text(json.dumps(doc, indent=1, sort_keys=True) + '\n')
    return {
        'output': str(out / 'spec.json'),
        'commit': sha,
        'episodes_run': len(jobs),
        **{p: results[p]['all'] for p in planners},
        'levels': {p: results[p]['levels'] for p in planners},
    }


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench spec') -> dict:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split('\n\n')[0].replace('\n', ' '))
    p.add_argument('--seeds', default='1-20', help='seed range, e.g. 1-20 or 1-3,7 (default 1-20)')
    p.add_argument('--planners', nargs='+', choices=PLANNERS, default=list(PLANNERS))
    p.add_argument(
        '--levels',
        type=int,
        nargs='+',
        default=list(RULE_LEVELS),
        help=f'levels (default the rule levels, {" ".join(map(str, RULE_LEVELS))})',
    )
    p.add_argument('--perception', choices=('cameras', 'oracle'), default='cameras')
    p.add_argument(
        '--spec',
        metavar='FILE',
        default=None,
        help="one spec for every level (default each level's)",
    )
    p.add_argument(
        '--workers', type=int, default=None, help='Ray tasks at once (default: the CPUs Ray has)'
    )
    p.add_argument('--out-dir', default='benchmarks/results')
    p.add_argument(
        '--resume', action='store_true', help='skip episodes already run at this commit'
    )
    p.add_argument(
        '--reserved', action='store_true', help='allow seeds above 100 (independent checks only)'
    )
    ns = p.parse_args(list(argv))
    seeds = dev_seeds(p, ns.seeds, ns.reserved)
    from palletizer.core.config import load_config

    cfg = load_config()
    bad = [lv for lv in ns.levels if lv not in cfg.levels]
    if bad:
        p.error(f'--levels {bad[0]}; expected some of {", ".join(map(str, sorted(cfg.levels)))}')
    if ns.spec is None:
        plain = [lv for lv in ns.levels if not cfg.levels[lv].spec]
        if plain:
            p.error(
                f'--levels {plain[0]} has no pallet spec; give one with --spec FILE or pick rule '
                f'levels: {", ".join(map(str, RULE_LEVELS))}'
            )
    else:
        from palletizer.core.pallet_spec import SpecError, read_spec

        try:
            read_spec(ns.spec, cfg.catalogue.types)
        except SpecError as exc:
            p.error(f'--spec {ns.spec}: {exc}')
    if ns.workers is not None and ns.workers < 1:
        p.error(f'--workers {ns.workers}; expected >= 1')
    return {
        'seeds': seeds,
        'planners': ns.planners,
        'levels': ns.levels,
        'perception': ns.perception,
        'spec_file': ns.spec,
        'workers': ns.workers,
        'out_dir': ns.out_dir,
        'resume': ns.resume,
    }
