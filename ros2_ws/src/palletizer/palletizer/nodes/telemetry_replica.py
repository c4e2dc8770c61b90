"""The telemetry node's replica: the replicator it starts with the run and stops at its close.

The backend follows the telemetry mode (telemetry/replica/credentials.py). The replicator ships
the run's outbox, and those of earlier runs left behind, on its own thread; at close it drains
what it can and says where the rest waits.
"""

from __future__ import annotations

from collections.abc import Callable

from palletizer.core.config import ReplicaSettings
from palletizer.telemetry import Recorder, TelemetryMode
from palletizer.telemetry.replica import Replicator, adopt_orphans, choose_backend

__all__ = ['Log', 'start_replica', 'stop_replica']

Log = Callable[[str, str], None]  # (level: info | warning | error, line)


def start_replica(
    mode: TelemetryMode, cfg: ReplicaSettings, rec: Recorder, log: Log
) -> tuple[Replicator | None, str]:
    """The started replicator of `mode` (None: disk only) and the startup line that says so."""
    choice = choose_backend(mode.value, cfg)
    if choice.backend is None:
        return None, choice.line
    replicator = Replicator(choice.backend, log, batch=cfg.batch, backoff_s=cfg.backoff_s)
    if rec.run is not None:
        replicator.add(rec.run.path)
    for run_dir, note in adopt_orphans(rec.cfg.runs_dir, rec.run_dir):
        replicator.add(run_dir)
        if note:
            log('warning', note)
    replicator.start()
    return replicator, choice.line


def stop_replica(replicator: Replicator, drain_s: float, rec: Recorder, log: Log) -> None:
    """Ship what is queued for up to `drain_s`, stop, and log what was shipped and what is left."""
    replicator.wake()
    drained = replicator.stop(drain_s)
    r = replicator
    where = rec.run_dir or rec.cfg.runs_dir
    if drained:
        log('info', f'replica: {r.shipped} rows shipped, {r.rejected} refused; outbox drained')
    elif r.state == 'disabled':
        log(
            'warning',
            f'replica off (see above): the rows wait in the outbox; once fixed, '
            f'scripts/replicate {where} ships them',
        )
    else:
        log(
            'warning',
            f'replica: {r.shipped} rows shipped; rows are left in the outbox '
            f'({r.error or r.state}): the next start or scripts/replicate {where} '
            'ships them',
        )
