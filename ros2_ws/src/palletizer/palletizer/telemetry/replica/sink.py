"""ReplicaSink: what RunWriter hands the replica, turned into outbox rows (disk first, then here).

The lifecycle follows the reference's RunLog: the run row when the run's facts are known (the
first episode's begin), an episode `running` at begin, events, placements, pallet states and
snapshots as they happen, the episode's final row at end (or aborted), runs.ended_at at close.
A failure to queue never stops the disk record: it is kept in `error` for the caller to log.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palletizer.telemetry.replica.outbox import Outbox
from palletizer.telemetry.replica.rows import (
    ReplicaError,
    Row,
    episode_begin_row,
    episode_end_row,
    episode_id,
    now_iso,
    row_from_disk,
    run_row,
)

__all__ = ['ReplicaSink', 'close_orphan']


class ReplicaSink:
    """The outbox of one live run folder (holds its writer lock until close())."""

    def __init__(self, run_dir: Path) -> None:
        self.outbox = Outbox(run_dir, lock=True)
        self.run_uuid = self.outbox.run_uuid
        self.error = ''
        self.failures = 0
        self._run_sent = False
        self._seeds: set[int] = set()  # the episodes begun: runs.n_episodes, as backfill counts
        # The runs row needs task and level: it is queued with the first episode that says them.
        self._run_facts = {'started_at': now_iso(), 'label': Path(run_dir).name}

    def _put(self, *rows: Row, meta: dict[str, Any] | None = None) -> None:
        try:
            self.outbox.put(*rows, meta=meta)
        except ReplicaError as exc:
            self.failures += 1
            self.error = str(exc)

    def begin(self, seed: int, info: Mapping[str, Any]) -> None:
        """info: level, task, oracle, git_sha, n_objects (level None: not known until end)."""
        if info.get('level') is None or info.get('task') is None:
            self._put(meta={'open_seed': seed})
            return
        self._seeds.add(int(seed))
        n = {'n_episodes': len(self._seeds)}
        rows = [
            run_row(self.run_uuid, n)
            if self._run_sent
            else run_row(self.run_uuid, {**self._run_facts, **info, **n})
        ]
        rows.append(episode_begin_row(self.run_uuid, seed, info, now_iso()))
        self._put(*rows, meta={'open_seed': seed})
        self._run_sent = True

    def row(self, table: str, disk: Mapping[str, Any]) -> None:
        self._put(row_from_disk(self.run_uuid, table, disk))

    def end(self, line: Mapping[str, Any]) -> None:
        """The episode's final row from its episodes.jsonl line (ended or aborted)."""
        rows = []
        if not self._run_sent and line.get('level') is not None and line.get('task'):
            rows.append(run_row(self.run_uuid, {**self._run_facts, **line}))
            self._run_sent = True
        if line.get('level') is None or not line.get('task'):
            self._put(meta={'open_seed': None})  # the database cannot take a row without them
            return
        rows.append(episode_end_row(self.run_uuid, line, now_iso()))
        self._put(*rows, meta={'open_seed': None})

    def close(self) -> None:
        rows = [run_row(self.run_uuid, {}, ended_at=now_iso())] if self._run_sent else []
        self._put(*rows, meta={'closed': True})  # a closed run needs no recovery at a start
        self.outbox.close()


def close_orphan(run_dir: Path, reason: str) -> int | None:
    """Close the episode a dead writer left open in its outbox; return its seed or None.

    Takes the run's writer lock (ReplicaError if the writer is alive). Queues the episode's
    aborted row (n_placed and duration from its queued rows, metrics.abort_reason = reason)
    and runs.ended_at.
    """
    with Outbox(run_dir, create=False, lock=True) as ob:
        seed = ob.get('open_seed')
        rows = []
        if seed is not None:
            eid = episode_id(ob.run_uuid, seed)
            placed = sum(
                1 for r in ob.rows('placements') if r['episode_id'] == eid and r['placed']
            )
            ts = [r['ts'] for r in ob.rows('events') if r['episode_id'] == eid]
            line = {
                'seed': seed,
                'success': False,
                'failure': None,
                'n_placed': placed,
                'duration_s': max(ts, default=0.0),
                'metrics': {'aborted': True, 'abort_reason': reason},
            }
            rows.append(episode_end_row(ob.run_uuid, line, now_iso()))
        if ob.rows('runs') and not ob.get('closed'):
            rows.append(run_row(ob.run_uuid, {}, ended_at=now_iso()))
        if rows:
            ob.put(*rows, meta={'open_seed': None, 'closed': True})
        return seed
