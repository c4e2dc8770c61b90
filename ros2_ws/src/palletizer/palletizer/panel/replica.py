"""The runs history from the Postgres replica, when one is configured (PALLETIZER_PG_DSN).

The disk is the source of truth; the replica holds the same rows (telemetry/replica), so a run
whose folder is gone, or that another machine wrote, can still be looked at. A run found in both
is listed once, from the disk (the replica's `runs.label` is the run folder's name). Replica
runs are named `replica-<uuid>` in the panel. Their snapshots are in the replica's storage,
not served here: the page loads nothing from another host.
"""

from __future__ import annotations

import re
from typing import Any

from palletizer.core.config import load_config
from palletizer.panel.runner import PanelError
from palletizer.panel.scene import EpisodeScene
from palletizer.telemetry.replica.credentials import DSN_ENV, lookup

__all__ = ['PREFIX', 'ReplicaHistory', 'replica_dsn']

PREFIX = 'replica-'
_UUID = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')
LIST_LIMIT = 200  # newest runs listed


def replica_dsn() -> str:
    """The replica's DSN: the environment or .env (PALLETIZER_PG_DSN), else telemetry.yaml's."""
    return lookup(DSN_ENV) or load_config().telemetry.replica.postgres.dsn


class ReplicaHistory:
    """Reads runs and episodes back from the replica with psycopg."""

    def __init__(self, dsn: str, timeout_s: float = 3.0) -> None:
        self.dsn = dsn
        self.timeout_s = timeout_s

    def _query(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        import psycopg

        from palletizer.telemetry.replica.postgres import redact_dsn

        try:
            with psycopg.connect(self.dsn, connect_timeout=max(1, int(self.timeout_s))) as conn:
                return conn.execute(sql, args).fetchall()
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise PanelError(f'replica {redact_dsn(self.dsn)}: {first}', 502) from exc

    def runs(self) -> list[dict[str, Any]]:
        rows = self._query(
            """
            SELECT r.id::text, r.label, r.level, r.task, r.oracle, r.git_sha,
                   count(e.id), count(e.id) FILTER (WHERE e.status = 'success'),
                   count(e.id) FILTER (WHERE (e.metrics->>'aborted')::boolean),
                   coalesce(sum(e.n_objects), 0), coalesce(sum(e.n_placed), 0)
            FROM runs r LEFT JOIN episodes e ON e.run_id = r.id
            GROUP BY r.id ORDER BY r.started_at DESC LIMIT %s
            """,
            LIST_LIMIT,
        )
        return [
            {
                'name': PREFIX + rid,
                'label': label,
                'origin': 'replica',
                'level': level,
                'task': task,
                'episodes': int(n),
                'succeeded': int(ok),
                'aborted': int(aborted),
                'cartons': int(cartons),
                'placed': int(placed),
                'oracle': bool(oracle),
                'git_sha': sha,
            }
            for rid, label, level, task, oracle, sha, n, ok, aborted, cartons, placed in rows
        ]

    def run(self, name: str) -> dict[str, Any]:
        rid = name[len(PREFIX) :]
        if not _UUID.match(rid):
            raise PanelError(f'{name!r} is not a replica run name (replica-<uuid>)', 404)
        eps = self._query(
            """
            SELECT id::text, seed, level, status, failure, n_placed, n_objects, duration_s,
                   metrics
            FROM episodes WHERE run_id = %s::uuid ORDER BY seed
            """,
            rid,
        )
        out = []
        for eid, seed, level, status, failure, n_placed, n_objects, duration, metrics in eps:
            sc = EpisodeScene(seed=int(seed))
            for seq, ts, kind, pid, payload in self._query(
                'SELECT seq, ts, kind, package_id, payload FROM events '
                'WHERE episode_id = %s::uuid ORDER BY seq',
                eid,
            ):
                sc.on_event(
                    {'seq': seq, 'ts': ts, 'kind': kind, 'package_id': pid, 'payload': payload}
                )
            for row in self._query(
                'SELECT seq, package_id, package_type, dims_m, layer, planned_pose, actual_pose, '
                'error_xy_m, support_ratio, placed FROM placements '
                'WHERE episode_id = %s::uuid ORDER BY seq',
                eid,
            ):
                keys: tuple[str, ...] = ('seq', 'package_id', 'package_type', 'dims_m', 'layer')
                keys += ('planned_pose', 'actual_pose', 'error_xy_m', 'support_ratio', 'placed')
                sc.on_placement(dict(zip(keys, row, strict=True)))
            for after, cx, cy, cz, margin in self._query(
                'SELECT after_seq, cog_x, cog_y, cog_z, stability_margin_m FROM pallet_states '
                'WHERE episode_id = %s::uuid ORDER BY after_seq',
                eid,
            ):
                sc.on_state(
                    {
                        'after_seq': after,
                        'cog_x': cx,
                        'cog_y': cy,
                        'cog_z': cz,
                        'stability_margin_m': 0.0 if margin is None else margin,
                    }
                )
            metrics = metrics or {}
            out.append(
                {
                    'seed': int(seed),
                    'level': level,
                    'success': None if status == 'running' else status == 'success',
                    'failure': failure,
                    'aborted': bool(metrics.get('aborted')),
                    'abort_reason': metrics.get('abort_reason'),
                    'open': status == 'running',
                    'n_placed': n_placed,
                    'n_objects': n_objects,
                    'duration_s': duration,
                    'oracle': None,
                    'cartons': sc.rows(),
                    'cycle_s': sc.cycle_times(),
                    'margins_mm': sc.margins(),
                    'snapshots': [],
                    'stability': metrics.get('stability'),
                    'scene': sc.scene(),
                }
            )
        if not out and not self._query('SELECT 1 FROM runs WHERE id = %s::uuid', rid):
            raise PanelError(f'no run {rid} in the replica', 404)
        return {'name': name, 'origin': 'replica', 'episodes': out}
