"""scripts/bench replica: the telemetry replica's throughput, lag and drain time on real Postgres.

Starts a throwaway PostgreSQL server (replica/localpg.py) and writes synthetic episodes of
the level-17 size (30 cartons: 5 events, a placement and a pallet state each, a snapshot per
layer) through RunWriter with its outbox:

- rows_per_s: rows shipped per second from a full outbox into Postgres (median of repeats),
  beside the rate at which RunWriter queues them (disk + outbox) and the disk-only rate (the
  baseline, measured in the same run: `outbox_write_cost_ratio` is disk+outbox time over disk).
- episode_end_lag_s: from an episode's final row being queued to its commit in Postgres, with
  the replicator live while episodes are written at a cell's pace and woken at each episode
  end, as the telemetry node does (median over episodes).
- drain_after_outage_s: the server is stopped for `outage_s` while episodes keep being
  written; from its restart until the outbox is empty (includes the back-off wait, at most
  configs/telemetry.yaml replica.backoff_s[1]).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from palletizer.core.contracts import EpisodeResult, PalletState, Placement

_N = 30  # cartons per episode (level 17)


def _png(seed: int) -> bytes:
    from palletizer.telemetry import encode_png

    rng = np.random.default_rng(seed)
    return encode_png(rng.integers(0, 256, size=(240, 320, 3), dtype=np.uint8))


def _episode(w, seed: int, pace_s: float = 0.0) -> int:
    """Write one 30-carton episode; return its rows."""
    from palletizer.telemetry import RunInfo

    info = RunInfo(level=17, task='table', oracle=False, git_sha='bench')
    w.begin(seed, _N, info)
    rows, seq = 2, 0
    rng = np.random.default_rng(seed)
    for i in range(_N):
        pid = f'c{i:02d}'
        for kind, package, payload in (
            ('perceive', None, {'seen': 1, 'confidence': 0.97, 'source': 'table'}),
            ('pick', pid, {'mass_kg': 3.5, 'type': 'std_s', 'cog_offset_m': [0.02, 0.02, -0.01]}),
            ('plan', pid, {'layer': 1 + i // 8, 'slot': 's', 'score': 0.7}),
            ('place', pid, {'error_xy_m': 0.002, 'error_yaw_rad': 0.01, 'overhang_m': 0.0}),
            ('settle', pid, {'layer': 1 + i // 8, 'drift_m': 0.0005}),
        ):
            w.event(seq, 2.0 * i + 0.1 * seq, kind, payload, package, seed=seed)
            seq += 1
        x, y = rng.uniform(-0.4, 0.4), rng.uniform(-0.3, 0.3)
        w.placement(
            Placement(
                seq=i, package_id=pid, package_type='std_s', mass_kg=3.5, dims_m=(0.38, 0.28, 0.16),
                layer=1 + i // 8, planned_pose=(x, y, 0.08, 0.0),
                actual_pose=(x + 0.001, y, 0.08, 0.0), error_xy_m=0.001, error_yaw_rad=0.0,
                support_ratio=1.0, overhang_m=0.0, placed=True,
            )
        )  # fmt: skip
        w.pallet_state(
            PalletState(
                after_seq=i, mass_kg=3.5 * (i + 1), cog=(0.0, 0.0, 0.1),
                stability_margin_m=0.3, fill_ratio=0.5, settle_drift_m=0.0005,
                layer_flatness=0.002,
            )
        )  # fmt: skip
        rows += 7
        if i % 8 == 7:
            w.snapshot(i, 'top', _png(seed * 100 + i))
            rows += 1
        if pace_s:
            time.sleep(pace_s)
    w.end(
        EpisodeResult(
            seed=seed, level=17, n_objects=_N, n_placed=_N, n_misrouted=0, success=True,
            duration_s=60.0, failure=None, oracle=False, git_sha='bench', task='table',
            metrics={'score': 1.0},
        )
    )  # fmt: skip
    return rows


def _log(level: str, line: str) -> None:
    print(f'[bench]   replica {level}: {line}', file=sys.stderr, flush=True)


def bench_replica(*, repeats: int = 3, episodes: int = 4, outage_s: float = 30.0) -> dict:
    from palletizer.core.config import load_config
    from palletizer.telemetry import RunWriter
    from palletizer.telemetry.replica import Replicator
    from palletizer.telemetry.replica.localpg import LocalPostgres
    from palletizer.telemetry.replica.postgres import PostgresBackend

    cfg = load_config().telemetry.replica
    backoff = cfg.backoff_s
    root = Path(tempfile.mkdtemp(prefix='bench-replica-'))
    out: dict = {'episode_cartons': _N, 'outage_s': outage_s, 'backoff_s': list(backoff)}
    with LocalPostgres() as pg:
        ship, queue, disk = [], [], []
        for r in range(repeats):
            t0 = time.perf_counter()
            w = RunWriter(root, '20261201-000000', f'disk{r}')
            n = sum(_episode(w, s) for s in range(episodes))
            w.close()
            disk.append(n / (time.perf_counter() - t0))
            t0 = time.perf_counter()
            w = RunWriter(root, '20261201-000000', f'full{r}', outbox=True)
            n = sum(_episode(w, s) for s in range(episodes))
            w.close()
            queue.append(n / (time.perf_counter() - t0))
            rep = Replicator(PostgresBackend(pg.dsn()), _log, batch=cfg.batch)
            rep.add(w.path)
            t0 = time.perf_counter()
            rep.start()
            assert rep.drain(300.0), 'drain did not finish'
            ship.append(rep.shipped / (time.perf_counter() - t0))
            rep.stop(5.0)
            print(
                f'[bench] repeat {r + 1}/{repeats}: {rep.shipped} rows, ship {ship[-1]:.0f}/s, '
                f'queue {queue[-1]:.0f}/s, disk only {disk[-1]:.0f}/s',
                file=sys.stderr,
                flush=True,
            )
        out['rows_per_s'] = round(statistics.median(ship))
        out['queue_rows_per_s'] = round(statistics.median(queue))
        out['disk_only_rows_per_s'] = round(statistics.median(disk))
        out['outbox_write_cost_ratio'] = round(
            statistics.median(disk) / statistics.median(queue), 2
        )
        # Live: episodes at a cell's pace (fast-forward level 17 runs ~0.5 s of wall per carton;
        # 0.05 s keeps the bench short) with the replicator running.
        rep = Replicator(PostgresBackend(pg.dsn()), _log, batch=cfg.batch, backoff_s=backoff)
        w = RunWriter(root, '20261201-000001', 'live', outbox=True)
        rep.add(w.path)
        rep.start()
        for s in range(episodes):
            _episode(w, s, pace_s=0.05)
            rep.wake()  # as the telemetry node does after each episode end
            time.sleep(0.5)
        print(f'[bench] live: {episodes} episodes written while replicating', file=sys.stderr)
        out['episode_end_lag_s'] = round(statistics.median(rep.episode_lag_s), 4)
        out['episode_end_lag_max_s'] = round(max(rep.episode_lag_s), 4)
        # Outage: the server stops; episodes keep coming for outage_s; then it restarts.
        pg.stop()
        t_end = time.monotonic() + outage_s
        s = episodes
        queued = 0
        while time.monotonic() < t_end:
            queued += _episode(w, s, pace_s=0.05)
            s += 1
            print(
                f'[bench] outage: {queued} rows queued, '
                f'{max(0.0, t_end - time.monotonic()):.0f} s left',
                file=sys.stderr,
                flush=True,
            )
        pg.start()
        t0 = time.monotonic()
        ok = rep.drain(300.0)
        out['drain_after_outage_s'] = round(time.monotonic() - t0, 3)
        out['rows_queued_in_outage'] = queued
        out['drained'] = bool(ok)
        w.close()
        rep.drain(30.0)
        rep.stop(5.0)
        out['outages_seen'] = len(rep.outages)
        out['rows_rejected'] = rep.rejected
    return out


def parse_options(argv: Sequence[str], prog: str = 'scripts/bench replica') -> dict:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    p.add_argument('--repeats', type=int, default=3, help='throughput repeats (median)')
    p.add_argument('--episodes', type=int, default=4, help='30-carton episodes per repeat')
    p.add_argument('--outage-s', type=float, default=30.0, help='[s] how long the server is down')
    ns = p.parse_args(list(argv))
    if ns.repeats < 1 or ns.episodes < 1 or ns.outage_s < 0:
        p.error('--repeats and --episodes must be >= 1, --outage-s >= 0')
    return {'repeats': ns.repeats, 'episodes': ns.episodes, 'outage_s': ns.outage_s}
