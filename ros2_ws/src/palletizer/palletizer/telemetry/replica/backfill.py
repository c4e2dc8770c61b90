"""Queue a disk-only run's rows (its JSONL files) into a new outbox, for `scripts/replicate`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from palletizer.telemetry.replica.outbox import OUTBOX_FILE, Outbox
from palletizer.telemetry.replica.rows import (
    ReplicaError,
    Row,
    episode_end_row,
    row_from_disk,
    run_row,
)

__all__ = ['backfill', 'reconcile']

_CHILDREN = ('events', 'placements', 'pallet_states', 'snapshots')


def _lines(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a JSONL file (a torn last line, from a crash, is left out)."""
    if not path.exists():
        return []
    out = []
    raws = path.read_text().splitlines()
    for n, raw in enumerate(raws, 1):
        if not raw.strip():
            continue
        try:
            out.append(json.loads(raw))
        except ValueError:
            if n == len(raws):
                break  # torn last line
            raise ReplicaError(f'{path}:{n}: not a JSON line') from None
    return out


def _mtime_iso(path: Path) -> str:
    return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(
        timespec='milliseconds'
    )


def backfill(run_dir: Path) -> int:
    """Create run_dir's outbox from its JSONL files; return the rows queued.

    Every episode line becomes its final episode row; an episode with rows but no line (its
    process died) closes as aborted with that reason. ReplicaError when the folder already has
    an outbox or holds no run.
    """
    if (run_dir / OUTBOX_FILE).exists():
        raise ReplicaError(f'{run_dir}: already has an outbox; drain it instead of backfilling')
    episodes = _lines(run_dir / 'episodes.jsonl')
    children = {t: _lines(run_dir / f'{t}.jsonl') for t in _CHILDREN}
    if not episodes and not any(children.values()):
        raise ReplicaError(f'{run_dir}: no episodes.jsonl or rows; is it a run folder?')
    known = next((e for e in episodes if e.get('level') is not None and e.get('task')), None)
    if known is None:
        raise ReplicaError(
            f'{run_dir}: no episode line says the level and task; the database needs them'
        )
    ended = _mtime_iso(run_dir / 'episodes.jsonl')
    with Outbox(run_dir, lock=True) as ob:
        u = ob.run_uuid
        rows: list[Row] = [
            run_row(
                u,
                {
                    'task': known['task'],
                    'level': known['level'],
                    'git_sha': known.get('git_sha') or '',
                    'oracle': any(bool(e.get('oracle')) for e in episodes),
                    'label': run_dir.name,
                    'n_episodes': len({e['seed'] for e in episodes}),
                },
                ended_at=ended,
            )
        ]
        seeds = {e['seed'] for e in episodes}
        for line in episodes:
            rows.append(episode_end_row(u, line, ended))
        orphans = sorted({r['seed'] for rs in children.values() for r in rs} - seeds)
        for seed in orphans:
            line = {
                'seed': seed,
                'task': known['task'],
                'level': known['level'],
                'success': False,
                'failure': None,
                'n_placed': sum(
                    1 for r in children['placements'] if r['seed'] == seed and r['placed']
                ),
                'duration_s': max(
                    (r['ts'] for r in children['events'] if r['seed'] == seed), default=0.0
                ),
                'metrics': {
                    'aborted': True,
                    'abort_reason': 'no episode line on disk: its run process died',
                },
            }
            rows.append(episode_end_row(u, line, ended))
        for table in _CHILDREN:
            rows.extend(row_from_disk(u, table, r) for r in children[table])
        ob.put(*rows, meta={'open_seed': None, 'backfilled': True})
        return len(rows)


def reconcile(run_dir: Path) -> int:
    """Queue the disk rows a dead writer's outbox lacks; return how many were queued.

    A process killed between its disk write and its outbox write leaves a row on disk only;
    this finds such rows by their ids (events, placements, pallet states, snapshots, and
    episode lines without a final row). The caller holds no lock; this takes the writer lock.
    """
    with Outbox(run_dir, create=False, lock=True) as ob:
        u = ob.run_uuid
        rows: list[Row] = []
        for table in _CHILDREN:
            have = {r['id'] for r in ob.rows(table)}
            for line in _lines(run_dir / f'{table}.jsonl'):
                row = row_from_disk(u, table, line)
                if row.data['id'] not in have:
                    rows.append(row)
        closed = {r['seed'] for r in ob.rows('episodes') if r.get('status') != 'running'}
        for line in _lines(run_dir / 'episodes.jsonl'):
            if line['seed'] not in closed:
                rows.insert(0, episode_end_row(u, line, _mtime_iso(run_dir / 'episodes.jsonl')))
        if rows:
            ob.put(*rows)
        return len(rows)
