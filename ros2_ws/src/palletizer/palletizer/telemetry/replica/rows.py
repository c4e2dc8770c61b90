"""Rows of the replica: the disk rows of a run, keyed for the database, and the table order.

Every row gets a deterministic UUID (uuid5 of the run's own UUID and the row's natural key),
so a row shipped twice lands once: the replica upserts on `id`. The run's UUID is random,
drawn once when its outbox is created, and kept in the outbox (see outbox.py).

A disk row (what RunWriter writes to a JSONL file) maps to a database row here and only here;
the live path and the backfill of `scripts/replicate` both go through these functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from palletizer.core.errors import PalletizerError

__all__ = [
    'TABLES',
    'ReplicaDown',
    'ReplicaError',
    'ReplicaFatal',
    'ReplicaRefused',
    'Row',
    'episode_begin_row',
    'episode_end_row',
    'now_iso',
    'row_from_disk',
    'run_row',
]

# Parents before children: a batch is shipped in this order within one transaction.
TABLES = ('runs', 'episodes', 'events', 'placements', 'pallet_states', 'snapshots')


class ReplicaError(PalletizerError):
    """The replica refused or could not take rows; the message says which and why."""


class ReplicaDown(ReplicaError):
    """The replica cannot be reached now (server down, network); retry with back-off."""


class ReplicaFatal(ReplicaError):
    """Retrying will not help: bad DSN, bad credentials, wrong schema version."""


class ReplicaRefused(ReplicaError):
    """The database refused a row for good (a CHECK, a type); nothing of the batch landed."""


@dataclass(frozen=True)
class Row:
    """One row for table `table`: `data` holds its database columns (id included).

    blob: for a snapshot, the PNG's path relative to the run folder (the backend stores the
    bytes: a bytea on PostgreSQL, an object in Supabase Storage), else ''.
    op: 'upsert' (insert, or update the columns given when the id exists) or 'update' (set
    the columns given on the existing row; for amendments such as runs.ended_at, which could
    not be inserted: the NOT NULL columns are checked before ON CONFLICT applies).
    """

    table: str
    data: Mapping[str, Any]
    blob: str = ''
    op: str = 'upsert'

    def __post_init__(self) -> None:
        if self.table not in TABLES:
            raise ReplicaError(f'row table = {self.table!r}; expected one of {", ".join(TABLES)}')
        if self.op not in ('upsert', 'update'):
            raise ReplicaError(f'row op = {self.op!r}; expected upsert or update')


def now_iso() -> str:
    """Wall-clock UTC time as ISO 8601 (the replica's started_at / ended_at columns)."""
    return datetime.now(timezone.utc).isoformat(timespec='milliseconds')


def _id(run_uuid: str, *key: object) -> str:
    return str(uuid.uuid5(uuid.UUID(run_uuid), '/'.join(str(k) for k in key)))


def episode_id(run_uuid: str, seed: int) -> str:
    return _id(run_uuid, 'episodes', int(seed))


def run_row(run_uuid: str, info: Mapping[str, Any], *, ended_at: str | None = None) -> Row:
    """The runs row from run facts: level, task, oracle, git_sha, started_at, label, ...

    Only the keys present are written, so a later one keeps the rest. Without task and level
    (which the table requires) it is an update of the existing row, e.g. ended_at at close.
    """
    data: dict[str, Any] = {'id': run_uuid}
    for key in ('started_at', 'task', 'level', 'git_sha', 'oracle', 'label', 'n_episodes'):
        if info.get(key) is not None:
            data[key] = info[key]
    if ended_at is not None:
        data['ended_at'] = ended_at
    full = 'task' in data and 'level' in data
    return Row('runs', data, op='upsert' if full else 'update')


def episode_begin_row(run_uuid: str, seed: int, info: Mapping[str, Any], started_at: str) -> Row:
    """The episode's `running` row at begin (seed, task, level, n_objects fixed here)."""
    return Row(
        'episodes',
        {
            'id': episode_id(run_uuid, seed),
            'run_id': run_uuid,
            'seed': int(seed),
            'task': info['task'],
            'level': int(info['level']),
            'status': 'running',
            'started_at': started_at,
            'n_objects': int(info.get('n_objects') or 0),
        },
    )


def episode_end_row(run_uuid: str, line: Mapping[str, Any], ended_at: str) -> Row:
    """The episode's final row from its episodes.jsonl line (EpisodeResult.to_dict()).

    An aborted episode (metrics.aborted) closes as `failure` with no cause, as the reference
    did, and its metrics say why (`abort_reason` when known).
    """
    metrics = dict(line.get('metrics') or {})
    data = {
        'id': episode_id(run_uuid, line['seed']),
        'run_id': run_uuid,
        'seed': int(line['seed']),
        'status': 'success' if line.get('success') else 'failure',
        'ended_at': ended_at,
        'duration_s': line.get('duration_s'),
        'n_placed': int(line.get('n_placed') or 0),
        'score': metrics.get('score'),
        'failure': line.get('failure'),
        'metrics': metrics,
    }
    if line.get('task') is not None:
        data['task'] = line['task']
    if line.get('level') is not None:
        data['level'] = int(line['level'])
    if line.get('n_objects') is not None:
        data['n_objects'] = int(line['n_objects'])
    full = 'task' in data and 'level' in data
    return Row('episodes', data, op='upsert' if full else 'update')


_KEYS = {'events': 'seq', 'placements': 'seq', 'pallet_states': 'after_seq'}


def row_from_disk(run_uuid: str, table: str, disk: Mapping[str, Any]) -> Row:
    """The database row of one disk row of events, placements, pallet_states or snapshots."""
    seed = int(disk['seed'])
    cols = {k: v for k, v in disk.items() if k != 'seed'}
    if table == 'snapshots':
        key: tuple[object, ...] = (disk['after_seq'], disk['view'])
        blob = str(cols.pop('path'))
        cols['url'] = blob  # the backend replaces it with where it stored the bytes
    elif table in _KEYS:
        key, blob = (disk[_KEYS[table]],), ''
    else:
        raise ReplicaError(
            f'disk row of table {table!r}; expected events, placements, pallet_states or snapshots'
        )
    cols['id'] = _id(run_uuid, table, seed, *key)
    cols['episode_id'] = episode_id(run_uuid, seed)
    return Row(table, cols, blob)
