"""What the panel draws of an episode, from its telemetry records: ROS-free and MuJoCo-free.

One `EpisodeScene` takes the records the telemetry node writes to disk (`placements.jsonl`,
`pallet_states.jsonl`, `events.jsonl`), in order, and gives:
- the per-carton table, one row per attempted carton (the director's console line as a row);
- the 3D scene in the pallet frame (origin at the deck centre, z up from the deck top): each
  carton coloured by state (`placed`, `tolerance`: outside the placement tolerances, `failed`:
  the carton the episode failed on), the stack's true centre of mass (the referee's) and the
  measured one (the wrist gauge's masses and centres of mass at the planned poses), the support
  polygon (the convex hull of the cartons standing on the deck) and the stability margin;
- the cycle time per carton (sim time from one `place` event to the next; where the settle
  event carries the carton's cycle, its `cycle_s` and the phases it is made of,
  docs/telemetry.md §8.4) and the margin per placement.

The live view feeds it the same records from the run's topics (panel/observer.py), so the
running episode and the history are drawn by one code path.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from palletizer.core.config import load_config
from palletizer.core.contracts import PalletGeometry
from palletizer.core.stability import support_hull

__all__ = ['EpisodeScene', 'RunRecords', 'list_runs', 'read_run']

# A carton whose bottom is within this of the deck stands on it (the support polygon's base).
# The referee's settled cartons rest 1-4 mm above the nominal deck (placements.jsonl, level 11).
ON_DECK_M = 0.01


def _f(v: Any, nd: int = 1) -> float | None:
    if v is None:
        return None
    x = float(v)
    return None if math.isnan(x) else round(x, nd)


@dataclass
class EpisodeScene:
    """The rows, scene and charts of one episode, built record by record."""

    seed: int = 0
    pallet: PalletGeometry = field(default_factory=PalletGeometry)
    placements: dict[int, dict[str, Any]] = field(default_factory=dict)
    states: dict[int, dict[str, Any]] = field(default_factory=dict)
    weighed: dict[str, dict[str, Any]] = field(default_factory=dict)  # pick payloads by carton
    held: str | None = None  # the carton picked and not yet placed
    last_placed: str | None = None  # carton of the last place/settle event
    failed: tuple[str | None, str] | None = None  # (carton, cause)
    cycles: list[tuple[str, float]] = field(default_factory=list)
    phases: dict[int, list[list[Any]]] = field(default_factory=dict)  # cycle index -> phases
    _since: float | None = None

    # -- records ---------------------------------------------------------------------------
    def on_placement(self, p: Mapping[str, Any]) -> None:
        self.placements[int(p['seq'])] = dict(p)

    def on_state(self, s: Mapping[str, Any]) -> None:
        self.states[int(s['after_seq'])] = dict(s)

    def on_event(self, ev: Mapping[str, Any]) -> None:
        kind, pid = ev.get('kind'), ev.get('package_id') or None
        payload = ev.get('payload') or {}
        ts = float(ev.get('ts') or 0.0)
        if self._since is None:
            self._since = ts
        if kind == 'pick' and pid:
            self.weighed[pid] = dict(payload)
            self.held = pid
        elif kind == 'place' and pid:
            self.cycles.append((pid, round(ts - self._since, 2)))
            self._since = ts
            self.held, self.last_placed = None, pid
        elif kind == 'settle' and pid:
            self.last_placed = pid
            rows = payload.get('phases')
            if isinstance(rows, list) and self.cycles and self.cycles[-1][0] == pid:
                # The carton's own cycle, phase by phase: the bar is their sum.
                total = payload.get('cycle_s')
                if isinstance(total, (int, float)):
                    self.cycles[-1] = (pid, round(float(total), 2))
                self.phases[len(self.cycles) - 1] = [[str(n), float(v)] for n, v in rows]
        elif kind == 'fail':
            # The carton in hand if there is one, else the one just placed (a settle or stability
            # failure), else none (a failure before the pick).
            self.failed = (self.held or self.last_placed, str(payload.get('cause', '?')))

    # -- outputs -----------------------------------------------------------------------------
    def _failed_id(self) -> str | None:
        return self.failed[0] if self.failed else None

    def rows(self) -> list[dict[str, Any]]:
        """One row per attempted carton, as the director prints it, plus the failed carton."""
        out = []
        failed = self._failed_id()
        for seq, p in sorted(self.placements.items()):
            s = self.states.get(seq, {})
            margin = s.get('stability_margin_m')
            verdict = 'ok' if p.get('placed') else 'out of tolerance'
            if failed is not None and p.get('package_id') == failed:
                assert self.failed is not None  # a failed id comes from self.failed
                verdict = f'failed: {self.failed[1]}'
            out.append(
                {
                    'seq': seq,
                    'package_id': p.get('package_id'),
                    'type': p.get('package_type'),
                    'layer': p.get('layer'),
                    'error_mm': _f(p.get('error_xy_m', 0.0) * 1000.0),
                    'support_pct': _f(p.get('support_ratio', 0.0) * 100.0, 0),
                    'margin_mm': None if margin is None else _f(margin * 1000.0),
                    'verdict': verdict,
                }
            )
        listed = {r['package_id'] for r in out}
        if self.failed is not None and self.failed[0] not in listed:
            w = self.weighed.get(self.failed[0] or '', {})
            out.append(
                {
                    'seq': None,
                    'package_id': self.failed[0],
                    'type': w.get('type'),
                    'layer': None,
                    'error_mm': None,
                    'support_pct': None,
                    'margin_mm': None,
                    'verdict': f'failed: {self.failed[1]}',
                }
            )
        return out

    def _measured_cog(self) -> list[float] | None:
        """Centre of mass from the gauge: each carton's weighed mass at its planned pose, offset
        by its weighed centre of mass (the gauge reports it in the carton's frame)."""
        m_sum, acc = 0.0, np.zeros(3)
        for p in self.placements.values():
            w = self.weighed.get(p.get('package_id', ''))
            if not w or 'mass_kg' not in w:
                continue
            pose = p['planned_pose']
            yaw = float(pose['yaw'])
            off = np.asarray(w.get('cog_offset_mm') or [0.0, 0.0, 0.0], dtype=float) / 1000.0
            c, s = math.cos(yaw), math.sin(yaw)
            xyz = np.array(
                [
                    pose['x'] + c * off[0] - s * off[1],
                    pose['y'] + s * off[0] + c * off[1],
                    pose['z'] + off[2],
                ]
            )
            m = float(w['mass_kg'])
            m_sum += m
            acc += m * xyz
        if m_sum <= 0.0:
            return None
        return [round(float(v), 4) for v in acc / m_sum]

    def scene(self) -> dict[str, Any]:
        failed = self._failed_id()
        cartons, base = [], []
        for _, p in sorted(self.placements.items()):
            pose = p['actual_pose']
            dims = [float(v) for v in p['dims_m']]
            state = 'placed' if p.get('placed') else 'tolerance'
            if failed is not None and p.get('package_id') == failed:
                state = 'failed'
            cartons.append(
                {
                    'package_id': p.get('package_id'),
                    'type': p.get('package_type'),
                    'dims': [round(v, 4) for v in dims],
                    'pose': {k: round(float(pose[k]), 4) for k in ('x', 'y', 'z', 'yaw')},
                    'state': state,
                }
            )
            if float(pose['z']) - dims[2] / 2.0 < ON_DECK_M:
                base.append((pose['x'], pose['y'], dims[0], dims[1], pose['yaw']))
        last = self.states[max(self.states)] if self.states else None
        hull = support_hull(base) if base else np.zeros((0, 2))
        return {
            'pallet': {
                'length': self.pallet.size_xy[0],
                'width': self.pallet.size_xy[1],
                'deck_height': self.pallet.deck_z,
            },
            'cartons': cartons,
            'cog_true': None
            if last is None
            else [round(float(last[k]), 4) for k in ('cog_x', 'cog_y', 'cog_z')],
            'cog_measured': self._measured_cog(),
            'support': [[round(float(x), 4), round(float(y), 4)] for x, y in hull],
            'margin_mm': None if last is None else _f(last['stability_margin_m'] * 1000.0),
        }

    def cycle_times(self) -> list[dict[str, Any]]:
        """Per carton: its id, the cycle [s] and, where the settle event said, `phases`
        ([phase, seconds] in order, summing to the cycle)."""
        return [
            {'package_id': pid, 's': s, **({'phases': self.phases[i]} if i in self.phases else {})}
            for i, (pid, s) in enumerate(self.cycles)
        ]

    def margins(self) -> list[dict[str, Any]]:
        return [
            {'seq': seq, 'mm': _f(s['stability_margin_m'] * 1000.0)}
            for seq, s in sorted(self.states.items())
        ]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a telemetry file; a torn last line (a run still writing) is skipped."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding='utf-8').splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


@dataclass
class RunRecords:
    """A run folder's episodes, each with its scene, rows and charts."""

    name: str
    episodes: list[dict[str, Any]]


@functools.cache
def _level_sizes() -> dict[int, int]:
    return {lv.id: lv.n for lv in load_config().levels.values()}


def _n_objects(ep: Mapping[str, Any]) -> int | None:
    """The episode's carton count; an aborted episode's line leaves it null: the level's size."""
    if ep.get('n_objects') is not None:
        return int(ep['n_objects'])
    return _level_sizes().get(int(ep['level'])) if ep.get('level') is not None else None


def _by_seed(rows: Iterable[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(int(r.get('seed', 0)), []).append(r)
    return out


def read_run(run_dir: Path, url_prefix: str = '') -> RunRecords:
    """Every episode of a run folder (telemetry's disk layout), finished or still open."""
    episodes = _jsonl(run_dir / 'episodes.jsonl')
    placements = _by_seed(_jsonl(run_dir / 'placements.jsonl'))
    states = _by_seed(_jsonl(run_dir / 'pallet_states.jsonl'))
    events = _by_seed(_jsonl(run_dir / 'events.jsonl'))
    snaps = _by_seed(_jsonl(run_dir / 'snapshots.jsonl'))
    seeds = list(dict.fromkeys([int(e['seed']) for e in episodes] + sorted(events)))
    closed = {int(e['seed']): e for e in episodes}
    out = []
    for seed in seeds:
        sc = EpisodeScene(seed=seed)
        for ev in events.get(seed, []):
            sc.on_event(ev)
        for p in placements.get(seed, []):
            sc.on_placement(p)
        for s in states.get(seed, []):
            sc.on_state(s)
        ep = closed.get(seed, {})
        metrics = ep.get('metrics') or {}
        out.append(
            {
                'seed': seed,
                'level': ep.get('level'),
                'success': ep.get('success'),
                'failure': ep.get('failure'),
                'aborted': bool(metrics.get('aborted')),
                'abort_reason': metrics.get('abort_reason'),
                'open': seed not in closed,
                'n_placed': ep.get('n_placed'),
                'n_objects': _n_objects(ep) if ep else None,
                'duration_s': ep.get('duration_s'),
                'oracle': ep.get('oracle'),
                'cartons': sc.rows(),
                'cycle_s': sc.cycle_times(),
                'margins_mm': sc.margins(),
                'snapshots': [
                    {
                        'after_seq': s.get('after_seq'),
                        'view': s.get('view'),
                        'url': f'{url_prefix}/files/{s["path"]}',
                    }
                    for s in snaps.get(seed, [])
                    if s.get('path')
                ],
                'stability': metrics.get('stability'),
                'scene': sc.scene(),
            }
        )
    return RunRecords(run_dir.name, out)


def list_runs(runs_dir: Path) -> list[dict[str, Any]]:
    """A line per run folder, newest first: level, planner, episodes, successes, cartons."""
    out: list[dict[str, Any]] = []
    if not runs_dir.is_dir():
        return out
    for d in sorted(runs_dir.iterdir(), key=lambda p: p.name, reverse=True):
        if (
            not d.is_dir()
            or not (d / 'events.jsonl').exists()
            and not (d / 'episodes.jsonl').exists()
        ):
            continue
        eps = _jsonl(d / 'episodes.jsonl')
        first = eps[0] if eps else {}
        out.append(
            {
                'name': d.name,
                'origin': 'disk',
                'level': first.get('level'),
                'task': first.get('task'),
                'episodes': len(eps),
                'succeeded': sum(bool(e.get('success')) for e in eps),
                'aborted': sum(bool((e.get('metrics') or {}).get('aborted')) for e in eps),
                'cartons': sum(_n_objects(e) or 0 for e in eps),
                'placed': sum(int(e.get('n_placed') or 0) for e in eps),
                'oracle': any(bool(e.get('oracle')) for e in eps),
                'git_sha': first.get('git_sha'),
            }
        )
    return out
