"""`scripts/bench perception`: camera perception and the wrist gauge scored by the referee.

Episodes of the reference protocol (levels 11-13, 21-23, 31-33, seeds 1-3) run in-process with
camera perception, sensor noise on, beam planner, fast-forward motion. After every fusion the
map is compared with the referee's true map; every detection with the presented carton's true
pose and size; every weighing with the catalogue truth. Empty-station trials (a table or
conveyor cell before its first carton arrives) count towards false detections.

`--weigh lift` weighs on the lift where that fit converges (configs/perception.yaml
gauge.weigh_on_lift, core/gauge_lift.py) and runs the episodes interpolated (`--speed 1`, as
it needs: a fast-forward lift has no samples); `gauge_on_lift` then says how many of the
weighings were on the lift, and `gauge_lift_*` / `gauge_still_*` score each kind apart.
`--weigh track` also zeroes on the move back after each place where that is certain enough
(gauge.zero_on_move); `gauge_zeroed_on_move` counts those zeros.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np

from palletizer.cli.weighing import WEIGHS, config_weigh, with_weigh

__all__ = ['bench_perception', 'parse_options', 'run_one', 'score_detect_and_weigh']

LEVELS = (11, 12, 13, 21, 22, 23, 31, 32, 33)
SEEDS = (1, 2, 3)
# A confident detection whose lid centre is farther than this from the presented carton's is
# of a carton that is not there: a false detection.
FALSE_DETECTION_M = 0.020
MIN_GAUGE_KG = 2.0  # gauge figures are for cartons of 2 kg and above (the protocol)


def _yaw_err_deg(a: float, b: float, square: bool) -> float:
    """|a - b| [deg] modulo the lid's symmetry: pi for a rectangle, pi/2 for a square."""
    period = math.pi / 2 if square else math.pi
    d = (a - b) % period
    return math.degrees(min(d, period - d))


def _rot(v: Sequence[float], yaw: float) -> tuple[float, float]:
    """The planar part of a package-frame vector, turned by yaw into the world."""
    c, s = math.cos(yaw), math.sin(yaw)
    return (c * v[0] - s * v[1], s * v[0] + c * v[1])


def _detect_row(pid: str, det: Any, cell: Any) -> dict:
    res = det.last
    row: dict[str, Any] = {
        'ms': det.last_ms,
        'package_id': pid,
        'chosen': False,
        'source': det.source,
    }
    if res is None or res.chosen is None:
        return row
    c = res.chosen
    truth = cell.ground_truth().cartons.get(pid)
    row['chosen'] = True
    if truth is None:
        row['false'] = True
        return row
    from palletizer.core.fusion import yaw_of_quat

    L, W, H = (float(v) for v in truth.dims)
    top = float(truth.pos[2]) + H / 2
    d = math.dist((c.x, c.y, c.top_z), (float(truth.pos[0]), float(truth.pos[1]), top))
    row['false'] = d > FALSE_DETECTION_M
    row['pos_mm'] = d * 1000
    row['yaw_deg'] = _yaw_err_deg(c.yaw, yaw_of_quat(truth.quat), abs(L - W) < 0.01)
    lw_true, lw_det = sorted((L, W)), sorted((c.length, c.width))
    row['lw_mm'] = 1000 * max(abs(lw_true[0] - lw_det[0]), abs(lw_true[1] - lw_det[1]))
    # At the truck the height is measured in hand after the pick ('held' below); the lid's
    # own guess (top minus what is around it) is not what the episode uses.
    row['h_mm'] = None if det.source == 'truck' else 1000 * abs(H - c.height)
    row['true_h'] = H
    row['yaw'], row['true_yaw'] = c.yaw, yaw_of_quat(truth.quat)
    return row


def _map_row(hmap: Any) -> dict:
    from palletizer.core.heightmap_fusion import map_errors
    from palletizer.wiring.oracles import OracleHeightMap

    truth = OracleHeightMap(hmap.cell, hmap.pallet).heightmap()
    got = map_errors(hmap.memory, truth)
    seen = map_errors(hmap.seen, truth)
    err = np.asarray(got['errors'], dtype=float)
    # The recalled cells' own errors: what the map kept from earlier fusions.
    back = np.asarray(hmap.memory.observed) & ~np.asarray(hmap.seen.observed)
    back_err = np.abs(np.asarray(hmap.memory.cells) - np.asarray(truth.cells))[back]
    return {
        'coverage_pct': float(got['coverage_pct']),
        'coverage_seen_pct': float(seen['coverage_pct']),
        'errors_mm': (err * 1000).round(3).tolist(),
        'recalled_errors_mm': (back_err * 1000).round(3).tolist(),
        'ms': hmap.last_ms,
    }


def score_detect_and_weigh(
    kind: str, pid: str, comp: Any, truth: dict[str, Any], rows: dict[str, list]
) -> None:
    """A benchmark probe's scoring of detections and weighings (run_inprocess's probe):
    ('detect', id, detector) appends a row to rows['detects'], ('weigh', id, spec) one to
    rows['weighs'] for cartons of MIN_GAUGE_KG and above (truth: id -> the catalogue's
    PackageSpec); other kinds are left alone. The mass error is in % of the true mass, the
    CoM error planar [mm], compared in the world: a lid's yaw is known modulo pi, and the gauge
    gives the CoM in the frame of the yaw the detector reported."""
    if kind == 'detect' and hasattr(comp, 'last_ms'):
        rows['detects'].append(_detect_row(pid, comp, comp.cell))
    elif kind == 'weigh' and comp is not None and pid in truth:
        t = truth[pid]
        if t.mass_kg < MIN_GAUGE_KG:
            return
        seen: dict[str, Any] = next(
            (r for r in reversed(rows['detects']) if r['package_id'] == pid), {}
        )
        yaw, true_yaw = seen.get('yaw', 0.0), seen.get('true_yaw', 0.0)
        com = math.dist(_rot(comp.cog_offset_m, yaw), _rot(t.cog_offset_m, true_yaw))
        rows['weighs'].append(
            {
                'package_id': pid,
                'mass_pct': abs(comp.mass_kg - t.mass_kg) / t.mass_kg * 100,
                'com_mm': com * 1000,
            }
        )


def run_one(job: tuple[int, int] | tuple[int, int, str, float]) -> dict:
    """One episode in a worker process: every perception figure it produced. job: (level,
    seed) or (level, seed, weigh ('still' | 'lift' | 'track'), speed)."""
    from palletizer.core.config import load_config
    from palletizer.core.loads import draw_load
    from palletizer.core.planning import build_planner
    from palletizer.wiring.inprocess import MemorySink, run_inprocess

    level, seed = job[0], job[1]
    cfg = load_config()
    weigh, speed = (job[2], job[3]) if len(job) == 4 else ('', 0.0)
    if weigh:
        cfg = with_weigh(cfg, weigh)
    truth = {d.package_id: d.spec for d in draw_load(level, seed, cfg)}
    rows: dict[str, list] = {'maps': [], 'detects': [], 'weighs': []}

    def probe(kind: str, pid: str, comp: Any) -> None:
        if kind == 'heightmap' and getattr(comp, 'last', None) is not None:
            rows['maps'].append(_map_row(comp))
        elif kind == 'held' and getattr(comp, 'last_held', None) is not None:
            last = next((r for r in reversed(rows['detects']) if r['package_id'] == pid), None)
            if last is not None and 'true_h' in last:
                last['h_mm'] = 1000 * abs(comp.last_held.height - last['true_h'])
        else:
            score_detect_and_weigh(kind, pid, comp, truth, rows)

    t0 = time.perf_counter()
    result, sink = run_inprocess(
        level,
        seed,
        build_planner('beam', cfg),
        speed=speed,
        config=cfg,
        sink=MemorySink(),
        perception='cameras',
        probe=probe,
    )
    on_lift = {
        pid for _, _, kind, pid, p in sink.events if kind == 'pick' and p.get('weighed') == 'lift'
    }
    for w in rows['weighs']:
        w['lift'] = w['package_id'] in on_lift
    on_move = sum(
        1 for _, _, kind, _, p in sink.events if kind == 'settle' and p.get('zeroed') == 'move'
    )
    return {
        'level': level,
        'seed': seed,
        'success': result.success,
        'oracle': result.oracle,
        'n_placed': result.n_placed,
        'n_objects': result.n_objects,
        'failure': None if result.failure is None else str(result.failure.value),
        'wall_s': time.perf_counter() - t0,
        'zeroed_on_move': on_move,
        **rows,
    }


def empty_trial(level: int, seed: int) -> dict:
    """Detection on a table or conveyor station with every carton taken off it: the presented
    one and any within 0.6 m of the station are moved far away, at rest."""
    import mujoco

    from palletizer.core.config import load_config
    from palletizer.sim.cell import Cell, CellOptions
    from palletizer.wiring.perception import CameraDetector, station_geometry

    cfg = load_config()
    lv = cfg.level(level)
    cell = Cell(lv, seed, options=CellOptions.from_config(cfg.cell))
    try:
        cell.present()
        (sx, sy), _ = station_geometry(cfg, lv.source)
        m, d = cell.model, cell.data
        for k, (_pid, c) in enumerate(cell.ground_truth().cartons.items()):
            if math.hypot(float(c.pos[0]) - sx, float(c.pos[1]) - sy) < 0.6:
                j = m.body(f'package_{c.index}').jntadr[0]
                a, v = m.jnt_qposadr[j], m.jnt_dofadr[j]
                d.qpos[a : a + 7] = [3.0 + k, 3.0, 0.5, 1.0, 0.0, 0.0, 0.0]
                d.qvel[v : v + 6] = 0.0
        mujoco.mj_forward(m, d)
        det = CameraDetector(cell, cfg, lv.source)
        res = det.detect_result()
        return {'level': level, 'seed': seed, 'false': res.chosen is not None, 'ms': det.last_ms}
    finally:
        cell.close()


def _pct(values: Sequence[float], q: float) -> float | None:
    return None if not values else round(float(np.percentile(np.asarray(values), q)), 3)


def summarise(episodes: Sequence[dict], empties: Sequence[dict]) -> dict:
    maps = [m for e in episodes for m in e['maps']]
    dets = [d for e in episodes for d in e['detects']]
    found = [d for d in dets if d.get('chosen') and not d.get('false')]
    weighs = [w for e in episodes for w in e['weighs']]
    errors = [x for m in maps for x in m['errors_mm']]
    cover = [m['coverage_pct'] for m in maps]
    return {
        'coverage_pct_min': _pct(cover, 0),
        'coverage_pct_median': _pct(cover, 50),
        'coverage_seen_pct_min': _pct([m.get('coverage_seen_pct', 0.0) for m in maps], 0),
        'recalled_err_mm_p99': _pct(
            [x for m in maps for x in m.get('recalled_errors_mm', [])], 99
        ),
        'recalled_err_mm_max': _pct(
            [x for m in maps for x in m.get('recalled_errors_mm', [])], 100
        ),
        'height_err_mm_median': _pct(errors, 50),
        'height_err_mm_p99': _pct(errors, 99),
        'fusion_ms_median': _pct([m['ms'] for m in maps], 50),
        'detect_pos_err_mm_p95': _pct([d['pos_mm'] for d in found], 95),
        'detect_yaw_err_deg_p95': _pct([d['yaw_deg'] for d in found], 95),
        'detect_dims_err_mm_p95': _pct(
            [max(d['lw_mm'], d['h_mm']) for d in found if d.get('h_mm') is not None], 95
        ),
        'detect_height_in_hand_err_mm_p95': _pct(
            [d['h_mm'] for d in found if d.get('h_mm') is not None and d['source'] == 'truck'], 95
        ),
        'detect_ms_median': _pct([d['ms'] for d in dets] + [t['ms'] for t in empties], 50),
        'false_detections': sum(bool(d.get('false')) for d in dets)
        + sum(t['false'] for t in empties),
        'missed_detections': sum(not d.get('chosen') for d in dets),
        'gauge_mass_err_pct_p95': _pct([w['mass_pct'] for w in weighs], 95),
        'gauge_com_err_mm_p95': _pct([w['com_mm'] for w in weighs], 95),
        'gauge_on_lift': sum(bool(w.get('lift')) for w in weighs),
        'gauge_zeroed_on_move': sum(int(e.get('zeroed_on_move', 0)) for e in episodes),
        'gauge_lift_mass_err_pct_p95': _pct([w['mass_pct'] for w in weighs if w.get('lift')], 95),
        'gauge_lift_com_err_mm_p95': _pct([w['com_mm'] for w in weighs if w.get('lift')], 95),
        'gauge_still_mass_err_pct_p95': _pct(
            [w['mass_pct'] for w in weighs if not w.get('lift')], 95
        ),
        'gauge_still_com_err_mm_p95': _pct([w['com_mm'] for w in weighs if not w.get('lift')], 95),
        'fusions': len(maps),
        'detections': len(dets),
        'empty_station_trials': len(empties),
        'weighings_2kg_plus': len(weighs),
        'episodes': len(episodes),
        'episodes_ok': sum(e['success'] for e in episodes),
        'oracle_episodes': sum(bool(e['oracle']) for e in episodes),
    }


def bench_perception(
    levels: Sequence[int] = LEVELS,
    seeds: Sequence[int] = SEEDS,
    workers: int = 2,
    weigh: str | None = None,
    speed: float | None = None,
) -> dict:
    """weigh: 'still' | 'lift' | 'track' (None: the config's); speed: 0 fast-forward,
    1 interpolated (None: 1 when weighing on the lift, else 0)."""
    from palletizer.core.config import load_config

    weigh = weigh or config_weigh(load_config())
    speed = speed if speed is not None else (0.0 if weigh == 'still' else 1.0)
    jobs = [(lv, s, weigh, speed) for lv in levels for s in seeds]
    episodes: list[dict] = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futs = [pool.submit(run_one, j) for j in jobs]
        for k, f in enumerate(as_completed(futs), 1):
            e = f.result()
            episodes.append(e)
            print(
                f'[perception] {k}/{len(jobs)} level {e["level"]} seed {e["seed"]}: '
                f'{e["n_placed"]}/{e["n_objects"]} placed, {len(e["detects"])} detections, '
                f'{len(e["maps"])} maps, {time.perf_counter() - t0:.0f} s',
                file=sys.stderr,
                flush=True,
            )
    empties = [empty_trial(lv, s) for lv in levels for s in seeds if lv // 10 in (1, 2)]
    print(f'[perception] {len(empties)} empty-station trials', file=sys.stderr, flush=True)
    out = summarise(episodes, empties)
    out['levels'] = list(levels)
    out['seeds'] = list(seeds)
    out['weigh'] = weigh
    out['motion'] = 'interpolated' if speed > 0 else 'fast-forward'
    out['noise'] = 'on (configs/cell.yaml cameras.*.depth_noise and wrench)'
    out['per_episode'] = [
        {k: e[k] for k in ('level', 'seed', 'success', 'n_placed', 'n_objects', 'failure')}
        for e in sorted(episodes, key=lambda e: (e['level'], e['seed']))
    ]
    return out


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench perception') -> dict:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument('--levels', type=int, nargs='+', default=list(LEVELS), metavar='LEVEL')
    p.add_argument('--seeds', type=int, nargs='+', default=list(SEEDS), metavar='SEED')
    p.add_argument('--workers', type=int, default=2, help='worker processes (default 2)')
    p.add_argument(
        '--weigh',
        choices=WEIGHS,
        default=None,
        help='still | lift | track (default: configs/perception.yaml gauge weigh_on_lift and '
        'zero_on_move)',
    )
    p.add_argument(
        '--speed',
        type=float,
        default=None,
        help='0 fast-forward, 1 interpolated (default: 1 with --weigh lift or track, else 0)',
    )
    ns = p.parse_args(list(argv))
    bad = [s for s in ns.seeds if s < 0] + [w for w in (ns.workers,) if w < 1]
    if bad:
        p.error(f'--seeds must be >= 0 and --workers >= 1; got {bad[0]}')
    if ns.speed is not None and ns.speed not in (0.0, 1.0):
        p.error(f'--speed {ns.speed:g}: expected 0 (fast-forward) or 1 (interpolated)')
    if ns.weigh in ('lift', 'track') and ns.speed == 0.0:
        p.error(f'--weigh {ns.weigh} needs --speed 1: a fast-forward move has no samples to fit')
    return {
        'levels': ns.levels,
        'seeds': ns.seeds,
        'workers': ns.workers,
        'weigh': ns.weigh,
        'speed': ns.speed,
    }
